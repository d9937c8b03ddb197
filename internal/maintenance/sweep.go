package maintenance

import (
	"context"
	"time"

	"github.com/cairnhq/cairn/internal/testsignal"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// The sweep: every SweepInterval, under the sweep lock, the attempts
// whose worker died (their fence expired) are re-dispatched, and so are the
// steps whose task asynq handed to a worker that never received it
// (stalled deliveries); not while Redis has just come back (outage.go).
// A sweep that finds neither in its first read (one round trip) takes no
// lock, so that sweeping often costs an idle worker's Redis little.

// sweepConfig is the sweep's own configuration (ReconcilerConfig).
type sweepConfig struct {
	// interval is the time between sweeps (SweepInterval).
	interval time.Duration
	// stalledAfter: a lease nobody extended for this long is a stalled
	// delivery (StalledAfter).
	stalledAfter time.Duration
	// maxAutoRecoveries: past it a run needs attention (MaxAutoRecoveries).
	maxAutoRecoveries int
}

// sweepSignals tell a test of this package that a sweep ended, with its
// report (Idle: nothing was due, no lock taken; Locked false otherwise:
// another replica held the lock; RepairsHeld: held by the outage grace).
type sweepSignals struct {
	swept testsignal.Signal[Report]
}

// stalledEvery is how often a sweep with nothing else to do looks for
// stalled deliveries (reads asynq's leases), when SweepInterval is
// shorter: they are found StalledAfter (8s) after their dequeue, so looking
// every 2s (the SweepInterval before issue 26) is enough, and an idle
// worker's Redis does not pay for a second read at every sweep.
const stalledEvery = 2 * time.Second

// Sweep re-dispatches the attempts whose worker died (their fence expired)
// and the steps whose task asynq handed to a worker that never received it.
// It first asks Redis, in one round trip and without the lock, whether
// there is any (Store.SweepDue: expired fences at every sweep, stalled
// leases every stalledEvery); when there is none, as on an idle worker or
// one whose attempts are all alive, it returns with Idle set, having taken
// no lock.
func (r *Reconciler) Sweep(ctx context.Context) (Report, error) {
	var rep Report
	now := r.deps.Clock.Now()
	var leaseBefore time.Time // zero: not this time
	r.mu.Lock()
	leases := !now.Before(r.leasesReadAt.Add(max(r.sweepCfg.interval, stalledEvery)))
	r.mu.Unlock()
	if leases {
		leaseBefore = r.leaseBefore(now)
	}
	var due bool
	err := r.call(ctx, func(ctx context.Context) (err error) {
		due, err = r.deps.Store.SweepDue(ctx, now, leaseBefore)
		return err
	})
	if err == nil && leases {
		r.mu.Lock()
		r.leasesReadAt = now
		r.mu.Unlock()
	}
	if err != nil || !due {
		rep.Idle = err == nil
		r.sweepSignals.swept.Signal(rep)
		return rep, err
	}
	locked, err := r.withLock(ctx, retrystate.LockSweep, 30*time.Second, func(ctx context.Context) error {
		var err error
		rep, err = r.sweep(ctx)
		return err
	})
	rep.Locked = locked
	r.sweepSignals.swept.Signal(rep)
	return rep, err
}

const batch = 1000

func (r *Reconciler) sweep(ctx context.Context) (Report, error) {
	now := r.deps.Clock.Now()
	if r.repairsHeld(now) {
		// Live workers are saving what they did while Redis was away (and
		// asynq's leases, not extended meanwhile, all look stale).
		return Report{RepairsHeld: true}, nil
	}
	var dead []retrystate.Due
	if err := r.call(ctx, func(ctx context.Context) (err error) {
		dead, err = r.deps.Store.ExpiredFences(ctx, now, batch)
		return err
	}); err != nil {
		return Report{}, err
	}
	if r.repairsHeld(r.deps.Clock.Now()) {
		// Redis went away while it was being asked (see reached).
		return Report{RepairsHeld: true}, nil
	}
	rep := r.each(ctx, dead, r.redispatch)
	runs, task, err := r.stalled(ctx, now)
	if err != nil {
		return rep, err
	}
	rep.merge(r.each(ctx, runs, func(ctx context.Context, id string) (Report, error) {
		return r.repairTask(ctx, id, task[id], retrystate.TaskStalled)
	}))
	return rep, nil
}

// leaseBefore is the lease expiry at or before which a task asynq holds
// as active has gone StalledAfter without being extended, at now.
func (r *Reconciler) leaseBefore(now time.Time) time.Time {
	return now.Add(tasks.AsynqLeaseDuration - r.sweepCfg.stalledAfter)
}

// stalled finds the step tasks asynq holds as active under a lease no
// worker has extended for StalledAfter, and returns their runs and, for
// each, its latest such task (the others are older dispatches, stale
// already). The repair script leaves alone a step that was begun, or whose
// current task is another.
func (r *Reconciler) stalled(ctx context.Context, now time.Time) ([]retrystate.Due, map[string]string, error) {
	var ids []string
	err := r.call(ctx, func(ctx context.Context) (err error) {
		ids, err = r.deps.Store.StalledTasks(ctx, r.leaseBefore(now), batch)
		return err
	})
	if err != nil || len(ids) == 0 || r.repairsHeld(r.deps.Clock.Now()) {
		return nil, nil, err
	}
	type dispatch struct{ index, attempt, gen int }
	latest := make(map[string]dispatch, len(ids))
	task := make(map[string]string, len(ids))
	var runs []retrystate.Due
	for _, id := range ids {
		run, index, attempt, gen, err := tasks.ParseID(id)
		if err != nil {
			continue // another kind of task (a webhook delivery)
		}
		d := dispatch{index, attempt, gen}
		if old, seen := latest[run]; seen {
			if d.index < old.index || (d.index == old.index && (d.attempt < old.attempt ||
				(d.attempt == old.attempt && d.gen < old.gen))) {
				continue
			}
		} else {
			runs = append(runs, retrystate.Due{RunID: run})
		}
		latest[run], task[run] = d, id
	}
	return runs, task, nil
}

// redispatch charges a crash to the attempt of run id if its fence expired,
// and re-dispatches it; never while repairs are held (OutageGrace): the
// check comes right before the script, as a sweep's list of expired fences
// may have been read before Redis went away.
func (r *Reconciler) redispatch(ctx context.Context, id string) (Report, error) {
	if r.repairsHeld(r.deps.Clock.Now()) {
		return Report{RepairsHeld: true}, nil
	}
	var rp retrystate.RedispatchResult
	err := r.call(ctx, func(ctx context.Context) (err error) {
		rp, err = r.deps.Store.Redispatch(ctx, retrystate.RedispatchParams{RunID: id,
			MaxAuto: r.sweepCfg.maxAutoRecoveries, Retention: r.deps.Retention, Now: r.deps.Clock.Now()})
		return err
	})
	if err != nil {
		return Report{}, err
	}
	return r.redispatched(ctx, id, rp)
}
