package retrystate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairnhq/cairn/retrystate"
)

func createOwned(t *testing.T, s *retrystate.Store, id, owner, workflow string, at time.Time) {
	t.Helper()
	_, err := s.CreateRun(context.Background(), retrystate.NewRun{ID: id, Workflow: workflow, Owner: owner, Input: "{}",
		Now: at, Steps: []retrystate.NewStep{{Name: "a", MaxAttempts: 1, MaxCrashes: 1, Timeout: time.Minute, Policy: "{}"}}})
	if err != nil {
		t.Fatal(err)
	}
}

// TestListFilteredIsBoundedAndComplete: a filtered listing examines a
// bounded number of index entries per page, so a page may come back short
// or empty with a cursor; following the cursors yields every matching run
// once, newest first.
func TestListFilteredIsBoundedAndComplete(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	// alice's 3 runs are the oldest, behind 1,100 of bob's.
	var want []string
	for i := range 3 {
		id := runID(i)
		createOwned(t, s, id, "alice", "wf", t0.Add(time.Duration(i)*time.Millisecond))
		want = append([]string{id}, want...)
	}
	for i := 3; i < 1103; i++ {
		wf := "wf"
		if i%2 == 0 {
			wf = "other"
		}
		createOwned(t, s, runID(i), "bob", wf, t0.Add(time.Duration(i)*time.Millisecond))
	}
	var got []string
	empty := 0
	cursor := ""
	for page := 0; ; page++ {
		if page > 10 {
			t.Fatal("more than 10 pages")
		}
		runs, next, err := s.ListRuns(ctx, retrystate.ListQuery{Owner: "alice", Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) > 2 {
			t.Fatalf("page of %d runs, limit 2", len(runs))
		}
		if len(runs) == 0 && next != "" {
			empty++
		}
		for _, r := range runs {
			if r.Owner != "alice" {
				t.Fatalf("run %s of %s listed", r.ID, r.Owner)
			}
			got = append(got, r.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("listed %v, want %v", got, want)
	}
	if empty == 0 {
		t.Error("no page stopped at the scan bound")
	}

	// Filters combine: bob's runs of workflow "other", with a status.
	n := 0
	cursor = ""
	for {
		runs, next, err := s.ListRuns(ctx, retrystate.ListQuery{Owner: "bob", Workflow: "other", Status: retrystate.StatusPending,
			Limit: 1000, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.Owner != "bob" || r.Workflow != "other" || r.Status != retrystate.StatusPending {
				t.Fatalf("listed %+v", r)
			}
		}
		n += len(runs)
		if next == "" {
			break
		}
		cursor = next
	}
	if n != 550 {
		t.Errorf("bob's runs of other: %d, want 550", n)
	}
	if _, _, err := s.ListRuns(ctx, retrystate.ListQuery{Owner: "alice", Cursor: "bad"}); !errors.Is(err, retrystate.ErrBadCursor) {
		t.Errorf("bad cursor: %v", err)
	}
}

func TestAuditStream(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	var ids []string
	for i, action := range []string{"cancel", "recover"} {
		id, err := s.AppendAudit(ctx, retrystate.AuditEntry{At: t0.Add(time.Duration(i) * time.Second), Actor: "root",
			Action: action, RunID: runID(i), Owner: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	es, err := s.Audit(ctx, "", 10)
	if err != nil || len(es) != 2 || es[0].Action != "cancel" || es[1].ID != ids[1] || !es[0].At.Equal(t0) || es[0].Owner != "alice" {
		t.Fatalf("Audit: %+v, %v", es, err)
	}
	if es, err := s.Audit(ctx, ids[0], 10); err != nil || len(es) != 1 || es[0].Action != "recover" {
		t.Fatalf("Audit after the first: %+v, %v", es, err)
	}
}

func TestWaitNotifications(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	// Nothing yet: the starting point, at once or after the wait.
	ns, start, err := s.WaitNotifications(ctx, "", 10, 0)
	if err != nil || len(ns) != 0 || start != "0-0" {
		t.Fatalf("empty stream: %v %q %v", ns, start, err)
	}
	ns, next, err := s.WaitNotifications(ctx, start, 10, 20*time.Millisecond)
	if err != nil || len(ns) != 0 || next != start {
		t.Fatalf("wait on an empty stream: %v %q %v", ns, next, err)
	}
	// A waiting read returns the notification a transition makes.
	got := make(chan []retrystate.Notification, 1)
	go func() {
		ns, _, err := s.WaitNotifications(ctx, start, 10, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- ns
	}()
	id := runID(1)
	createOwned(t, s, id, "alice", "wf", t0)
	if _, err := s.Cancel(ctx, retrystate.CancelParams{RunID: id, Actor: "root", Retention: time.Hour,
		Now: t0}); err != nil {
		t.Fatal(err)
	}
	select {
	case ns := <-got:
		if len(ns) != 1 || ns[0].Type != "run_cancelled" || ns[0].RunID != id || ns[0].Fields["owner"] != "alice" {
			t.Fatalf("notifications %+v", ns)
		}
		// From "", only what comes later.
		if later, cur, err := s.WaitNotifications(ctx, "", 10, 0); err != nil || len(later) != 0 || cur != ns[0].ID {
			t.Fatalf("from now: %v %q %v", later, cur, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting read did not return")
	}
}
