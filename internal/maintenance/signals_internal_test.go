package maintenance

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/retrystate"
)

// noTasks is a Tasks that records nothing: the queue of these tests has
// no runs to repair.
type noTasks struct{}

func (noTasks) Enqueue(context.Context, string, string, retrystate.Dispatch) error { return nil }
func (noTasks) Stop(core.Logger, string, core.StepStatus)                          {}

func newTestReconciler(t *testing.T, queue string, cfg ReconcilerConfig) *Reconciler {
	t.Helper()
	rdb := redistest.Shared(t).Client(t)
	d := Deps{Store: retrystate.New(rdb, queue), Tasks: noTasks{}, Clock: core.SystemClock, Retention: time.Hour,
		Persist: func(ctx context.Context, _ core.Logger, _ string, fn func(context.Context) error) error {
			return fn(ctx)
		}}
	cfg.Observer = core.NopObserver{}
	return New(d, cfg, slog.New(slog.DiscardHandler))
}

// TestServicesSignal: a running reconciler's startup pass, its sweeps and
// the services of the pass tell a test when they end (test signals),
// so the test waits for those events instead of polling; a sweep with
// nothing due reports Idle and takes no lock; of two reconcilers of one
// queue, the one that finds the lock taken reports Locked false.
func TestServicesSignal(t *testing.T) {
	t.Parallel()
	q := "m_" + t.Name() // the shared server's keys are the test's by its name
	r := newTestReconciler(t, q, ReconcilerConfig{SweepInterval: 50 * time.Millisecond, Interval: time.Hour})
	r.passSignals.passed.Init()
	r.sweepSignals.swept.Init()
	r.expirySignals.expired.Init()
	r.tasksSignals.checked.Init()
	r.gatesSignals.repaired.Init()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	const deadline = 30 * time.Second // generous: each is the first of its kind
	if rep, ok := r.passSignals.passed.Wait(deadline); !ok || !rep.Locked || rep.Total() != 0 {
		t.Fatalf("the startup pass: %+v (signalled %v), want locked, no repairs on an empty queue", rep, ok)
	}
	for _, w := range []struct {
		what string
		ok   func() bool
	}{
		{"deadlines expired", func() bool { _, ok := r.expirySignals.expired.Wait(deadline); return ok }},
		{"tasks checked", func() bool { _, ok := r.tasksSignals.checked.Wait(deadline); return ok }},
		{"gates repaired", func() bool { _, ok := r.gatesSignals.repaired.Wait(deadline); return ok }},
	} {
		if !w.ok() {
			t.Errorf("the startup pass did not signal %s", w.what)
		}
	}
	// Nothing is due on an empty queue: the sweep reads, takes no lock.
	if rep, ok := r.sweepSignals.swept.Wait(deadline); !ok || !rep.Idle || rep.Locked {
		t.Fatalf("a sweep: %+v (signalled %v), want idle, not locked", rep, ok)
	}
	cancel() // the rest is this test's own calls
	<-done
	ctx = context.Background()

	// Another reconciler of the queue, while this one holds the sweep lock
	// (taken here under this reconciler's token, as its sweep would), once
	// an expired fence is due: it reads it, then finds the lock taken.
	other := newTestReconciler(t, q, ReconcilerConfig{})
	other.sweepSignals.swept.Init()
	if ok, err := r.deps.Store.TryLock(ctx, retrystate.LockSweep, r.token, time.Minute); err != nil || !ok {
		t.Fatalf("taking the sweep lock: %v %v", ok, err)
	}
	defer func() { _ = r.deps.Store.Unlock(context.Background(), retrystate.LockSweep, r.token) }()
	rdb := redistest.Shared(t).Client(t)
	fences := "cairn:{" + q + "}:idx:fences"
	if err := rdb.ZAdd(ctx, fences, redis.Z{Score: 1, Member: "dead-run"}).Err(); err != nil {
		t.Fatal(err)
	}
	defer rdb.ZRem(context.Background(), fences, "dead-run")
	if _, err := other.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if rep, ok := other.sweepSignals.swept.Wait(deadline); !ok || rep.Locked || rep.Idle {
		t.Errorf("a sweep while another holds the lock: %+v (signalled %v), want Locked false, not idle", rep, ok)
	}
}
