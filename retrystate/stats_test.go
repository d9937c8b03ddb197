package retrystate_test

import (
	"testing"
	"time"

	"github.com/cairnhq/cairn/retrystate"
)

// TestDashboardReads: the bounded reads of dashboards count runs by
// creation time and status, scan the newest runs' heads up to a cap
// (across pages, saying whether more are left), and read a window of the
// notifications.
func TestDashboardReads(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	const n = 1203 // more than two pages of the scan
	for i := range n {
		create(t, s, runID(i+1), t0.Add(time.Duration(i)*time.Second), "a")
	}
	// Runs are pending until they begin; one is cancelled.
	if _, err := s.Cancel(ctxb, retrystate.CancelParams{RunID: runID(n), Actor: "op", Retention: time.Hour,
		Now: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	// Counts: buckets of 10 minutes from t0.
	edges := []time.Time{t0, t0.Add(10 * time.Minute), t0.Add(20 * time.Minute), t0.Add(time.Hour)}
	counts, err := s.CountCreated(ctxb, edges)
	if err != nil {
		t.Fatal(err)
	}
	if p := counts[retrystate.StatusPending]; p[0] != 600 || p[1] != 600 || p[2] != 2 {
		t.Errorf("pending per bucket %v, want 600, 600, 2", p)
	}
	if c := counts[retrystate.StatusCancelled]; c[2] != 1 || c[0]+c[1] != 0 {
		t.Errorf("cancelled per bucket %v, want the last run in the last bucket", c)
	}
	if _, err := s.CountCreated(ctxb, []time.Time{t0, t0}); err == nil {
		t.Error("edges not increasing: no error")
	}
	if _, err := s.CountCreated(ctxb, make([]time.Time, retrystate.MaxCountBuckets+2)); err == nil {
		t.Error("too many buckets: no error")
	}

	// The scan: newest first, across pages, capped.
	all, more, err := s.ScanStamps(ctxb, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n || more || all[0].ID != runID(n) || all[0].Status != retrystate.StatusCancelled ||
		all[n-1].ID != runID(1) || all[0].Owner != "o" || all[0].Workflow != "wf" || !all[0].CreatedAt.Equal(t0.Add((n-1)*time.Second)) {
		t.Fatalf("scan of every run: %d runs (more %v), first %+v", len(all), more, all[0])
	}
	seen := map[string]bool{}
	for _, r := range all {
		if seen[r.ID] {
			t.Fatalf("run %s read twice", r.ID)
		}
		seen[r.ID] = true
	}
	capped, more, err := s.ScanStamps(ctxb, time.Time{}, 700)
	if err != nil || len(capped) != 700 || !more || capped[699].ID != runID(n-699) {
		t.Errorf("capped at 700: %d runs, more %v, %v", len(capped), more, err)
	}
	exact, more, err := s.ScanStamps(ctxb, time.Time{}, n)
	if err != nil || len(exact) != n || more {
		t.Errorf("capped at exactly the runs there are: %d runs, more %v, %v", len(exact), more, err)
	}
	recent, more, err := s.ScanStamps(ctxb, t0.Add(time.Duration(n-10)*time.Second), 0)
	if err != nil || len(recent) != 10 || more {
		t.Errorf("the last 10 seconds: %d runs, more %v, %v", len(recent), more, err)
	}

	// Notifications: the cancel notified run_cancelled at t0+1h.
	ns, more, err := s.RecentNotifications(ctxb, t0.Add(30*time.Minute), 0)
	if err != nil || more || len(ns) != 1 || ns[0].Type != "run_cancelled" || ns[0].RunID != runID(n) {
		t.Errorf("notifications of the window: %+v, more %v, %v", ns, more, err)
	}
	if ns, _, err := s.RecentNotifications(ctxb, t0.Add(2*time.Hour), 0); err != nil || len(ns) != 0 {
		t.Errorf("a window after the last notification: %+v %v", ns, err)
	}

	// No gate in use.
	gs, total, err := s.Gates(ctxb, 0)
	if err != nil || len(gs) != 0 || total != 0 {
		t.Errorf("gates: %+v %d %v", gs, total, err)
	}
}
