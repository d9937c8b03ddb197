package workflow_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// scriptClock returns its times in turn, then the last one forever.
type scriptClock struct {
	mu    sync.Mutex
	times []time.Time
}

func (c *scriptClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.times[0]
	if len(c.times) > 1 {
		c.times = c.times[1:]
	}
	return t
}

// findIDs returns the IDs FindRuns finds, in its order.
func findIDs(t *testing.T, c *workflow.Client, prefix string, opts workflow.FindRunsOptions) []string {
	t.Helper()
	runs, err := c.FindRuns(ctxb, prefix, opts)
	if err != nil {
		t.Fatalf("FindRuns(%q, %+v): %v", prefix, opts, err)
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
		if !strings.HasPrefix(r.ID, prefix) || (opts.Owner != "" && r.Owner != opts.Owner) {
			t.Errorf("FindRuns(%q, %+v) found run %s of owner %q", prefix, opts, r.ID, r.Owner)
		}
	}
	return ids
}

// shortestUnique returns the shortest prefix of id that no other of ids
// starts with.
func shortestUnique(id string, ids []string) string {
	for n := 1; n < len(id); n++ {
		p := id[:n]
		if !slices.ContainsFunc(ids, func(o string) bool { return o != id && strings.HasPrefix(o, p) }) {
			return p
		}
	}
	return id
}

func TestFindRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	publishedEngine(t, e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log},
		workflow.Definition{Name: "wf", Steps: []workflow.Step{{Name: "a", Run: noop}}})
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := &scriptClock{times: []time.Time{t0}}
	client := workflow.NewClient(e.rdb, workflow.ClientConfig{Queue: e.queue, Logger: e.log, Clock: clock})
	start := func(owner string) string {
		run, err := client.Start(ctxb, "wf", nil, &workflow.StartOptions{Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		return run.ID
	}
	// 20 runs of alice and 5 of bob in one millisecond: their IDs share
	// their 10 characters of time.
	var alice, bob, all []string
	for range 20 {
		alice = append(alice, start("alice"))
	}
	for range 5 {
		bob = append(bob, start("bob"))
	}
	clock.times = []time.Time{t0.Add(time.Hour)}
	later := start("alice")
	all = slices.Concat(alice, bob, []string{later})
	timePrefix := alice[0][:10]

	t.Run("whole ID", func(t *testing.T) {
		if got := findIDs(t, client, later, workflow.FindRunsOptions{}); !slices.Equal(got, []string{later}) {
			t.Errorf("found %v, want %s", got, later)
		}
	})
	t.Run("unique prefix", func(t *testing.T) {
		for _, id := range all {
			p := shortestUnique(id, all)
			if got := findIDs(t, client, p, workflow.FindRunsOptions{Limit: 2}); !slices.Equal(got, []string{id}) {
				t.Errorf("prefix %q: found %v, want %s", p, got, id)
			}
		}
	})
	t.Run("shared prefix, newest first", func(t *testing.T) {
		got := findIDs(t, client, timePrefix, workflow.FindRunsOptions{Limit: 100})
		want := slices.Concat(alice, bob)
		slices.Sort(want)
		slices.Reverse(want) // one millisecond: by ID, descending
		if !slices.Equal(got, want) {
			t.Errorf("found\n%v\nwant\n%v", got, want)
		}
		if got := findIDs(t, client, timePrefix, workflow.FindRunsOptions{Limit: 3}); !slices.Equal(got, want[:3]) {
			t.Errorf("limit 3: found %v, want %v", got, want[:3])
		}
		// The longest prefix the later run shares with the others.
		n := 0
		for later[n] == timePrefix[n] {
			n++
		}
		if got := findIDs(t, client, later[:n], workflow.FindRunsOptions{Limit: 100}); len(got) != 26 || got[0] != later {
			t.Errorf("prefix %q: found %d runs, the first %v; want all 26, the later run first", later[:n], len(got), got)
		}
	})
	t.Run("owner", func(t *testing.T) {
		got := findIDs(t, client, timePrefix, workflow.FindRunsOptions{Owner: "bob", Limit: 100})
		if len(got) != 5 {
			t.Errorf("bob's runs: found %v, want his 5", got)
		}
		for _, id := range []string{alice[3], shortestUnique(alice[3], all)} {
			if got := findIDs(t, client, id, workflow.FindRunsOptions{Owner: "bob"}); len(got) != 0 {
				t.Errorf("bob found alice's run by %q: %v", id, got)
			}
		}
		if got := findIDs(t, client, later, workflow.FindRunsOptions{Owner: "alice"}); len(got) != 1 {
			t.Errorf("alice did not find her run: %v", got)
		}
	})
	t.Run("no match", func(t *testing.T) {
		// A prefix in the runs' millisecond that none of them has.
		var free string
		for _, c := range "0123456789abcdefghjkmnpqrstvwxyz" {
			p := timePrefix + string(c)
			if !slices.ContainsFunc(all, func(id string) bool { return strings.HasPrefix(id, p) }) {
				free = p
				break
			}
		}
		for _, p := range []string{"zzzz", free} {
			if got := findIDs(t, client, p, workflow.FindRunsOptions{}); len(got) != 0 {
				t.Errorf("prefix %q: found %v", p, got)
			}
		}
		if got := findIDs(t, client, workflow.NewRunID(t0), workflow.FindRunsOptions{}); len(got) != 0 {
			t.Errorf("an ID never started: found %v", got)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		for _, p := range []string{"", "01J", "01u", "01-", strings.Repeat("0", 27)} {
			if _, err := client.FindRuns(ctxb, p, workflow.FindRunsOptions{}); !errors.Is(err, workflow.ErrInvalidRunID) {
				t.Errorf("FindRuns(%q): %v, want ErrInvalidRunID", p, err)
			}
		}
	})
}

// TestFindRunsCreatedLongAfterItsID: a run created an hour after its ID's
// time (as an outbox's Start sent once Redis is back) is outside the window
// FindRuns reads first; the full scan finds it.
func TestFindRunsCreatedLongAfterItsID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	publishedEngine(t, e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log},
		workflow.Definition{Name: "wf", Steps: []workflow.Step{{Name: "a", Run: noop}}})
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// Start reads the clock for the ID, then for the creation.
	clock := &scriptClock{times: []time.Time{t0, t0.Add(time.Hour)}}
	client := workflow.NewClient(e.rdb, workflow.ClientConfig{Queue: e.queue, Logger: e.log, Clock: clock})
	run, err := client.Start(ctxb, "wf", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !run.CreatedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("created at %v, want an hour after its ID's time %v", run.CreatedAt, t0)
	}
	for _, p := range []string{run.ID[:12], run.ID[:8]} {
		if got := findIDs(t, client, p, workflow.FindRunsOptions{}); !slices.Equal(got, []string{run.ID}) {
			t.Errorf("prefix %q: found %v, want %s", p, got, run.ID)
		}
	}
}

func TestValidRunIDPrefix(t *testing.T) {
	t.Parallel()
	id := workflow.NewRunID(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	for n := 1; n <= len(id); n++ {
		if !workflow.ValidRunIDPrefix(id[:n]) {
			t.Errorf("ValidRunIDPrefix(%q) = false", id[:n])
		}
	}
	for _, s := range []string{"", id + "0", "01J", "01i", "01l", "01o", "01u", "0 1", "01:"} {
		if workflow.ValidRunIDPrefix(s) {
			t.Errorf("ValidRunIDPrefix(%q) = true", s)
		}
	}
}
