package maintenance

import (
	"context"
	"time"

	"github.com/cairnhq/cairn/internal/testsignal"
	"github.com/cairnhq/cairn/retrystate"
)

// The pass: every Interval, and once at start, under the reconcile lock
// (one replica at a time), a sweep (sweep.go), then the runs past their
// deadline and the expired entries of the indexes (expiry.go), the tasks
// of scheduled and idle runs (tasks.go) and the gates (gates.go).

// passConfig is the pass's own configuration (ReconcilerConfig).
type passConfig struct {
	// interval is the time between passes (Interval); the lock's TTL is
	// twice it, a minute at least.
	interval time.Duration
}

// passSignals tell a test of this package that a pass ended, with its
// report (Locked false: another replica held the lock).
type passSignals struct {
	passed testsignal.Signal[Report]
}

// Pass is one full reconciliation. It returns at once, with Locked false,
// when another replica is reconciling.
func (r *Reconciler) Pass(ctx context.Context) (Report, error) {
	var rep Report
	locked, err := r.withLock(ctx, retrystate.LockReconcile, max(2*r.passCfg.interval, time.Minute), func(ctx context.Context) error {
		if err := r.call(ctx, func(ctx context.Context) (err error) {
			rep.Incomplete, err = r.deps.Store.CountActive(ctx)
			return err
		}); err != nil {
			return err
		}
		sw, err := r.sweep(ctx)
		if err != nil {
			return err
		}
		rep.merge(sw)
		now := r.deps.Clock.Now()

		expired, err := r.expireDeadlines(ctx, now)
		rep.merge(expired)
		if err != nil {
			return err
		}
		checked, err := r.checkTasks(ctx, now)
		rep.merge(checked)
		if err != nil {
			return err
		}
		trimmed, err := r.trimIndexes(ctx, now)
		rep.merge(trimmed)
		if err != nil {
			return err
		}
		gates, err := r.repairGates(ctx)
		rep.merge(gates)
		if err != nil {
			return err
		}
		return nil
	})
	rep.Locked = locked
	r.passSignals.passed.Signal(rep)
	return rep, err
}
