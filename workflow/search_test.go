package workflow_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// TestClientSearch: Client.ListPage's search on the injected clock: the
// creation range to the millisecond, an ID prefix's scan stopping at the
// time the prefix begins with, input conditions, and the searches it
// refuses, which write nothing.
func TestClientSearch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	clock := newFakeClock()
	c := workflow.NewClient(e.rdb, workflow.ClientConfig{Queue: e.queue, Logger: e.log, Clock: clock})
	publishedEngine(t, e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log},
		workflow.Definition{Name: "s", Steps: []workflow.Step{{Name: "a", Run: noop}}})
	start := func(input string) *workflow.Run {
		t.Helper()
		r, err := c.Start(ctxb, "s", []byte(input), nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Five old runs, an hour later one more: 3,600,000 ms apart.
	var old []*workflow.Run
	for i := range 5 {
		old = append(old, start(fmt.Sprintf(`{"i":%d,"tier":"old"}`, i)))
		clock.Advance(time.Millisecond)
	}
	clock.Advance(time.Hour)
	recent := start(`{"i":5,"tier":"new"}`)
	ids := func(p workflow.ListPage) []string {
		var out []string
		for _, r := range p.Runs {
			out = append(out, r.ID)
		}
		return out
	}
	page := func(opts workflow.ListOptions) workflow.ListPage {
		t.Helper()
		p, err := c.ListPage(ctxb, opts)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	// The creation range: since inclusive, until exclusive.
	p := page(workflow.ListOptions{CreatedFrom: old[1].CreatedAt, CreatedTo: old[3].CreatedAt})
	if got := ids(p); !slices.Equal(got, []string{old[2].ID, old[1].ID}) {
		t.Errorf("old[1] to old[3]: %v, want old[2], old[1]", got)
	}
	// An ID prefix that pins the time to the millisecond's second: the
	// scan examines the recent run and stops at its time, less 2 s.
	p = page(workflow.ListOptions{IDPrefix: recent.ID[:8]})
	if got := ids(p); !slices.Equal(got, []string{recent.ID}) || p.Scanned != 1 || p.Limited || p.Next != "" {
		t.Errorf("prefix of the recent run: %v, scanned %d, limited %v, next %q; want it alone after 1", got, p.Scanned,
			p.Limited, p.Next)
	}
	// An old run's prefix finds it behind the recent one.
	p = page(workflow.ListOptions{IDPrefix: old[0].ID[:22]})
	if got := ids(p); !slices.Equal(got, []string{old[0].ID}) {
		t.Errorf("prefix of old[0]: %v", got)
	}
	// Input conditions, with the bound: 2 runs a page.
	f, err := workflow.ParseInputFilter(`input.tier=old input.i=0`)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	limited := 0
	opts := workflow.ListOptions{Input: f, MaxScan: 2}
	for range 10 {
		p := page(opts)
		found = append(found, ids(p)...)
		if p.Limited {
			limited++
		}
		if p.Next == "" {
			break
		}
		opts.Cursor = p.Next
	}
	// 6 runs: 2 limited pages, then old[1] and old[0], the index's end.
	if !slices.Equal(found, []string{old[0].ID}) || limited != 2 {
		t.Errorf("input.tier=old input.i=0, 2 a page: %v after %d limited pages, want old[0] after 2", found, limited)
	}

	keys := func() []string {
		k, err := e.rdb.Keys(ctxb, fmt.Sprintf("cairn:{%s}:*", e.queue)).Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(k)
		return k
	}
	before := keys()
	for _, bad := range []workflow.ListOptions{
		{MaxScan: -1}, {MaxScan: workflow.MaxSearchScan + 1},
		{CreatedFrom: recent.CreatedAt, CreatedTo: recent.CreatedAt},
		{CreatedFrom: recent.CreatedAt, CreatedTo: old[0].CreatedAt},
		{IDPrefix: "01u"}, {IDPrefix: recent.ID + "0"},
	} {
		if _, err := c.ListPage(ctxb, bad); !errors.Is(err, workflow.ErrInvalidSearch) {
			t.Errorf("ListPage(%+v): %v, want ErrInvalidSearch", bad, err)
		}
	}
	if after := keys(); !slices.Equal(after, before) {
		t.Errorf("refused searches changed the keys: %v, then %v", before, after)
	}
}
