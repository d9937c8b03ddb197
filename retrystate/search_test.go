package retrystate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/retrystate"
)

// searchRuns creates n runs, one a millisecond from t0: run i is owned by
// alice when i is even, else by bob, its input {"n":i,"owner":...}, and
// its ID "p<i%3>" followed by i's digits (so that IDs with one prefix are
// spread among the others).
func searchRuns(t *testing.T, s *retrystate.Store, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		owner := "alice"
		if i%2 == 1 {
			owner = "bob"
		}
		ids[i] = fmt.Sprintf("p%d%024d", i%3, i)
		_, err := s.CreateRun(context.Background(), retrystate.NewRun{ID: ids[i], Workflow: "wf", Owner: owner,
			Input: fmt.Sprintf(`{"n":%d,"owner":%q}`, i, owner), Now: t0.Add(time.Duration(i) * time.Millisecond),
			Steps: []retrystate.NewStep{{Name: "a", MaxAttempts: 1, MaxCrashes: 1, Timeout: time.Minute, Policy: "{}"}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// searchAll follows a search's cursors to the end: the runs' IDs, newest
// first, the number of pages and of pages the bound ended.
func searchAll(t *testing.T, s *retrystate.Store, q retrystate.ListQuery) (ids []string, pages, limited int) {
	t.Helper()
	for {
		if pages > 100 {
			t.Fatal("more than 100 pages")
		}
		p, err := s.ListPage(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if p.Limited {
			limited++
			if p.Next == "" {
				t.Fatal("a limited page without a cursor")
			}
		}
		if q.Limit > 0 && len(p.Runs) > q.Limit {
			t.Fatalf("page of %d runs, limit %d", len(p.Runs), q.Limit)
		}
		for _, r := range p.Runs {
			ids = append(ids, r.ID)
		}
		if p.Next == "" {
			return ids, pages, limited
		}
		q.Cursor = p.Next
	}
}

// newestFirst returns the IDs of ids whose index keep accepts, newest
// (highest index) first.
func newestFirst(ids []string, keep func(i int) bool) []string {
	var out []string
	for i, id := range slices.Backward(ids) {
		if keep(i) {
			out = append(out, id)
		}
	}
	return out
}

func inputHas(sub string) func([]byte) bool {
	return func(in []byte) bool { return strings.Contains(string(in), sub) }
}

// TestSearchFilters: each search filter alone and combined, against what
// the runs hold; followed to the end, a search lists every match once,
// newest first.
func TestSearchFilters(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ids := searchRuns(t, s, 60)
	at := func(i int) int64 { return t0.Add(time.Duration(i) * time.Millisecond).UnixMilli() }
	for _, c := range []struct {
		name string
		q    retrystate.ListQuery
		keep func(i int) bool
	}{
		{"id prefix", retrystate.ListQuery{IDPrefix: "p1"}, func(i int) bool { return i%3 == 1 }},
		{"whole id", retrystate.ListQuery{IDPrefix: ids[7]}, func(i int) bool { return i == 7 }},
		{"whole id of another owner", retrystate.ListQuery{IDPrefix: ids[7], Owner: "alice"}, func(int) bool { return false }},
		{"whole id out of range", retrystate.ListQuery{IDPrefix: ids[7], CreatedFrom: at(8)}, func(int) bool { return false }},
		{"input", retrystate.ListQuery{Input: inputHas(`"n":4`)}, func(i int) bool { return i == 4 || i >= 40 && i < 50 }},
		{"since", retrystate.ListQuery{CreatedFrom: at(50)}, func(i int) bool { return i >= 50 }},
		{"until", retrystate.ListQuery{CreatedTo: at(10)}, func(i int) bool { return i < 10 }},
		{"since and until", retrystate.ListQuery{CreatedFrom: at(10), CreatedTo: at(20)}, func(i int) bool { return i >= 10 && i < 20 }},
		{"owner and input", retrystate.ListQuery{Owner: "bob", Input: inputHas(`"n":4`)},
			func(i int) bool { return i%2 == 1 && (i == 4 || i >= 40 && i < 50) }},
		{"all of them", retrystate.ListQuery{Owner: "alice", IDPrefix: "p0", Input: inputHas(`"owner":"alice"`),
			CreatedFrom: at(12), CreatedTo: at(48), Status: retrystate.StatusPending},
			func(i int) bool { return i%6 == 0 && i >= 12 && i < 48 }},
		{"status that none has", retrystate.ListQuery{IDPrefix: "p0", Status: retrystate.StatusFailed}, func(int) bool { return false }},
	} {
		for _, limit := range []int{0, 1, 4} {
			q := c.q
			q.Limit = limit
			got, _, limited := searchAll(t, s, q)
			want := newestFirst(ids, c.keep)
			if !slices.Equal(got, want) {
				t.Errorf("%s, limit %d: %v\nwant %v", c.name, limit, got, want)
			}
			if limited != 0 {
				t.Errorf("%s, limit %d: %d pages limited by the default bound", c.name, limit, limited)
			}
		}
	}
}

// TestSearchBound: a search examines at most its budget of index entries a
// page; a page the bound ends says so, holds what matched (even nothing),
// and its cursor goes on, so that following the cursors finds every match
// once.
func TestSearchBound(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ids := searchRuns(t, s, 45)
	// Run 0 alone has "n":0; 44 runs are newer.
	q := retrystate.ListQuery{Input: inputHas(`"n":0,`), Budget: 10, Limit: 5}
	p, err := s.ListPage(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Limited || p.Scanned != 10 || len(p.Runs) != 0 || p.Next == "" {
		t.Fatalf("first page: limited %v, scanned %d, %d runs, next %q; want limited after 10, none, a cursor",
			p.Limited, p.Scanned, len(p.Runs), p.Next)
	}
	got, pages, limited := searchAll(t, s, q)
	if !slices.Equal(got, []string{ids[0]}) || pages != 5 || limited != 4 {
		t.Errorf("followed: %v in %d pages (%d limited), want [%s] in 5 (4 limited)", got, pages, limited, ids[0])
	}
	// The bound counts examined entries, the matches on either side of it
	// are all found, and a page that fills up is not limited.
	q = retrystate.ListQuery{IDPrefix: "p2", Budget: 7, Limit: 2}
	got, _, limited = searchAll(t, s, q)
	if want := newestFirst(ids, func(i int) bool { return i%3 == 2 }); !slices.Equal(got, want) || limited == 0 {
		t.Errorf("id prefix with a budget of 7: %v (%d limited)\nwant %v", got, limited, want)
	}
	// Owner and workflow alone keep their bound (at least 1,000): these
	// 45 runs are one page.
	if p, err := s.ListPage(context.Background(), retrystate.ListQuery{Owner: "bob", Limit: 100}); err != nil ||
		p.Limited || len(p.Runs) != 22 || p.Next != "" || p.Scanned != 45 {
		t.Errorf("owner filter: %d runs, scanned %d, limited %v, next %q, %v", len(p.Runs), p.Scanned, p.Limited, p.Next, err)
	}
}

// TestSearchInputOnlyOfTheOwner: with an owner, the input filter is never
// called on another owner's run.
func TestSearchInputOnlyOfTheOwner(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	searchRuns(t, s, 20)
	seen := 0
	q := retrystate.ListQuery{Owner: "alice", Input: func(in []byte) bool {
		seen++
		if !strings.Contains(string(in), `"owner":"alice"`) {
			t.Errorf("input filter called on %s", in)
		}
		return true
	}}
	got, _, _ := searchAll(t, s, q)
	if len(got) != 10 || seen != 10 {
		t.Errorf("alice's search: %d runs, %d inputs read; want 10 and 10", len(got), seen)
	}
}

func TestSearchRefusesAnEmptyRange(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	for _, q := range []retrystate.ListQuery{{CreatedFrom: 10, CreatedTo: 10}, {CreatedFrom: 11, CreatedTo: 10}, {CreatedFrom: -1}} {
		if _, err := s.ListPage(context.Background(), q); !errors.Is(err, retrystate.ErrBadRange) {
			t.Errorf("%+v: %v, want ErrBadRange", q, err)
		}
	}
	if _, err := s.ListPage(context.Background(), retrystate.ListQuery{IDPrefix: "p1", Cursor: "bad"}); !errors.Is(err, retrystate.ErrBadCursor) {
		t.Errorf("bad cursor: %v", err)
	}
}

// TestSearchCursorNamesNoRun: the cursor of a page the bound ended names
// no run, since the last run examined may be another owner's: it holds the
// millisecond and at most the start of an ID that tells it from the next.
// Followed, the cursors still find every match once, with runs sharing a
// millisecond on either side of a cut.
func TestSearchCursorNamesNoRun(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	var bobs, alices []string
	for i := range 24 {
		owner := "bob"
		if i%3 == 0 {
			owner = "alice"
		}
		// Four runs a millisecond: their IDs share the 10 characters of
		// the time, and differ from the 11th on, as random bits do.
		const crockford = "0123456789abcdefghjkmnpqrstvwxyz"
		id := fmt.Sprintf("01m8k9%04d%c%c%014d", i/4, crockford[(i*7)%32], crockford[(i*11)%32], i)
		createOwned(t, s, id, owner, "wf", t0.Add(time.Duration(i/4)*time.Millisecond))
		if owner == "bob" {
			bobs = append(bobs, id)
		} else {
			alices = append(alices, id)
		}
	}
	seps := map[int]int{} // by the length of the ID part of limited cursors
	for _, budget := range []int{1, 2, 3, 5} {
		var got []string
		q := retrystate.ListQuery{Owner: "alice", Budget: budget, IDPrefix: "01m8k9", Limit: 10}
		for page := 0; ; page++ {
			if page > 40 {
				t.Fatal("more than 40 pages")
			}
			p, err := s.ListPage(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Runs {
				got = append(got, r.ID)
			}
			if p.Next == "" {
				break
			}
			_, after, _ := strings.Cut(p.Next, ":")
			if p.Limited && (len(after) > 12 || slices.Contains(bobs, after)) {
				t.Errorf("budget %d: a limited page's cursor %q names a run", budget, p.Next)
			}
			if p.Limited {
				seps[len(after)]++
			}
			q.Cursor = p.Next
		}
		slices.Sort(got)
		want := slices.Clone(alices)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("budget %d: found %v\nwant %v", budget, got, want)
		}
	}
	// Both kinds of cut: at the end of a millisecond ("0"), and within
	// one (the time and one character).
	if seps[1] == 0 || seps[11] == 0 {
		t.Errorf("cursors' ID parts by length: %v, want some of 1 and of 11", seps)
	}
}

// TestSearchInputBytesBound: a page stops reading inputs once it has read
// its bound of bytes (checked every 50 inputs), limited, and the cursors
// go on to every match.
func TestSearchInputBytesBound(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ids := searchRuns(t, s, 120) // inputs of about 25 bytes
	q := retrystate.ListQuery{Input: inputHas(`"owner":"alice"`), InputBytes: 100, Limit: 1000}
	p, err := s.ListPage(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Limited || p.Scanned != 50 || len(p.Runs) != 25 {
		t.Errorf("first page: limited %v, scanned %d, %d runs; want limited after the first 50 inputs, 25 runs",
			p.Limited, p.Scanned, len(p.Runs))
	}
	got, pages, _ := searchAll(t, s, q)
	if want := newestFirst(ids, func(i int) bool { return i%2 == 0 }); !slices.Equal(got, want) || pages != 3 {
		t.Errorf("followed: %d runs in %d pages, want %d in 3", len(got), pages, len(want))
	}
}
