package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// ReconcilerConfig configures a Reconciler. A zero field takes the default
// given in its comment.
type ReconcilerConfig struct {
	// Interval is the time between full passes. Default 30s.
	Interval time.Duration
	// SweepInterval is the time between sweeps for attempts whose worker
	// died (their fence expired), so that a crashed step resumes within
	// about FenceTTL + SweepInterval. Default 2s.
	SweepInterval time.Duration
	// Concurrency bounds the repairs in flight that take calls of their
	// own (not a pass's checks of the tasks, which go a page of runs per
	// pipeline). Default 5.
	Concurrency int
	// MaxAutoRecoveries is how often one run may be repaired automatically;
	// past it the run is marked as needing attention and left alone.
	// Default 3.
	MaxAutoRecoveries int
	// Grace leaves a run that changed less than this long ago to the
	// engine, which may be about to enqueue its next task. Default 10s.
	Grace time.Duration
	// StalledAfter: a current step's task that asynq holds as active under
	// a lease no worker has extended for this long, while the step was
	// never begun, went to a worker that never received it (the reply of
	// asynq's dequeue was lost to a Redis freeze or restart, or the worker
	// died at once); the sweep gives the step a new dispatch rather than
	// wait for asynq's lease recovery (about 100s). It is not a crash and
	// spends no budget. It must exceed the 5s at which asynq extends the
	// leases of the tasks a worker holds. Default 8s.
	StalledAfter time.Duration
	// OutageGrace: once Redis answers again after this reconciler could
	// not reach it (a call failed, or took longer than a second: a frozen
	// Redis answers late rather than not at all), attempts whose fences
	// expired are not treated as crashed, nor deliveries as stalled, for
	// this long, so that live workers, whose fences and leases expired
	// while they could not renew them, first save, begin or hand back their
	// attempts: a step held up by an outage is not a worker crash. Every
	// call of the reconciler to Redis counts, not only its lock's. Default
	// 5s.
	OutageGrace time.Duration
	// MaxChecks bounds the runs a pass reads, to check their tasks, from
	// each of the indexes it walks (idx:scheduled, and the runs of
	// idx:active idle for longer than Grace); the next pass goes on where
	// the last stopped. Default 100,000.
	MaxChecks int
	// Observer is told of each repair and of the runs a repair fails.
	// Default: the engine's EngineConfig.Observer.
	Observer core.Observer
}

func (c ReconcilerConfig) withDefaults() ReconcilerConfig {
	if c.Interval <= 0 {
		c.Interval = 30 * time.Second
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = 2 * time.Second
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 5
	}
	if c.MaxAutoRecoveries <= 0 {
		c.MaxAutoRecoveries = 3
	}
	if c.Grace <= 0 {
		c.Grace = 10 * time.Second
	}
	if c.StalledAfter <= 0 {
		c.StalledAfter = 8 * time.Second
	}
	if c.OutageGrace <= 0 {
		c.OutageGrace = 5 * time.Second
	}
	if c.MaxChecks <= 0 {
		c.MaxChecks = 100000
	}
	return c
}

// Reconciler repairs what crashes, restarts and lost tasks leave behind. It
// reads Cairn's indexes (never SCANs the keyspace) and makes the tasks that
// the state says should exist exist:
//
//   - an attempt whose worker died (its fence expired) is re-dispatched and
//     counted as a crash, never as a failed attempt (but not while Redis has
//     just come back from an outage: see OutageGrace);
//   - a step whose task asynq handed to a worker that never received it
//     (see StalledAfter) gets a new dispatch;
//   - a scheduled retry, or a current step, whose asynq task is missing is
//     re-enqueued (for its due time), and one whose task asynq archived is
//     re-dispatched;
//   - a run past its deadline fails with reason run_timeout;
//   - index entries of expired runs are trimmed.
//
// (A task of a finished or unknown run is acknowledged without running by
// the Engine when it is delivered.) Every repair is journaled, logged and
// notified (run_recovered, by reconciler). One replica at a time runs a
// pass, under a Redis lock with expiry.
type Reconciler struct {
	cfg ReconcilerConfig
	// deps: the engine's store, dispatcher, clock, retention and retries
	// of state writes (the reconciler holds no Engine).
	deps Deps
	log  *slog.Logger

	// token is this reconciler's lock token, the same on every try: a
	// lock it took whose reply was lost (Redis froze or restarted) is its
	// own again at its next try, not a stranger's until the lock expires.
	token string
	// running serialises this reconciler's own passes and sweeps (they
	// share the token).
	running sync.Mutex
	// scheduledAt and idleAt are where the pass's walks of idx:scheduled
	// and idx:active go on (MaxChecks); guarded by running.
	scheduledAt, idleAt retrystate.IndexCursor

	mu         sync.Mutex
	unreached  bool      // the last call to Redis failed
	quietUntil time.Time // expired fences wait until then (OutageGrace)
}

// New returns a reconciler working with d, logging to log. cfg.Observer
// must be set (the engine's, by default).
func New(d Deps, cfg ReconcilerConfig, log *slog.Logger) *Reconciler {
	return &Reconciler{
		cfg:   cfg.withDefaults(),
		deps:  d,
		log:   log.With("component", "reconciler"),
		token: core.NewToken(),
	}
}

// Report says what a pass or a sweep found and did.
//
//nolint:recvcheck // Total and String take a value so that a Report value is a fmt.Stringer; the unexported add and merge update one in place
type Report struct {
	// Locked is false when another replica held the lock and this call did
	// nothing.
	Locked bool
	// Incomplete is the number of runs not yet finished (full passes only).
	Incomplete int64
	// Repairs counts the repairs made, by kind: crashed_attempt,
	// task_missing, retry_task_missing, task_archived, stalled_delivery,
	// deadline, trimmed (index entries of expired runs).
	Repairs map[string]int
	// Failed counts runs that failed here (deadline, crash budget).
	Failed int
	// Attention counts runs left for an operator because they were
	// repaired too often.
	Attention int
	// RepairsHeld is set when expired fences and stalled deliveries
	// were left alone because Redis has just come back from an outage
	// (OutageGrace).
	RepairsHeld bool
	// Checked is the number of runs whose task a pass checked (full
	// passes only; a scheduled run read again as idle is checked once).
	Checked int
	// Recheck, when set, is when a run this pass left alone because it
	// had just been written (its task may still have been on its way)
	// leaves its grace: Run passes again then rather than a whole
	// Interval later, so that a task lost to a crash right after the
	// write is repaired, at most a Grace late, before its due time where
	// it can be.
	Recheck time.Time
}

func (r *Report) add(kind string, n int) {
	if n == 0 {
		return
	}
	if r.Repairs == nil {
		r.Repairs = map[string]int{}
	}
	r.Repairs[kind] += n
}

func (r *Report) merge(o Report) {
	for k, n := range o.Repairs {
		r.add(k, n)
	}
	r.Failed += o.Failed
	r.Attention += o.Attention
	r.Checked += o.Checked
	r.RepairsHeld = r.RepairsHeld || o.RepairsHeld
	if !o.Recheck.IsZero() && (r.Recheck.IsZero() || o.Recheck.Before(r.Recheck)) {
		r.Recheck = o.Recheck
	}
}

// Total is the number of repairs.
func (r Report) Total() int {
	n := 0
	for _, v := range r.Repairs {
		n += v
	}
	return n
}

func (r Report) String() string {
	kinds := make([]string, 0, len(r.Repairs))
	for k, n := range r.Repairs {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(kinds)
	return fmt.Sprintf("repairs [%s], runs failed %d, left for an operator %d", strings.Join(kinds, " "), r.Failed, r.Attention)
}

// Run reconciles once at once, logging what it found, then sweeps every
// SweepInterval and passes every Interval until ctx is done.
func (r *Reconciler) Run(ctx context.Context) {
	var recheckAt time.Time
	for ctx.Err() == nil {
		rep, err := r.Pass(ctx)
		if err == nil {
			if rep.Locked {
				r.log.Info("reconciliation pass", "incomplete_runs", rep.Incomplete, "repairs", rep.Total(),
					"detail", rep.String(), "startup", true)
			}
			recheckAt = rep.Recheck
			break
		}
		if ctx.Err() != nil {
			return
		}
		r.log.Error("reconciliation pass failed; retrying", core.AttrError, err)
		if core.SleepContext(ctx, r.cfg.SweepInterval) != nil {
			return
		}
	}
	sweep := time.NewTicker(r.cfg.SweepInterval)
	defer sweep.Stop()
	pass := time.NewTicker(r.cfg.Interval)
	defer pass.Stop()
	// recheck fires at the Recheck of the last pass, if any.
	recheck := time.NewTimer(time.Hour)
	recheck.Stop()
	defer recheck.Stop()
	arm := func(at time.Time) {
		recheck.Stop()
		if !at.IsZero() {
			recheck.Reset(max(at.Sub(r.deps.Clock.Now()), 0) + 10*time.Millisecond)
		}
	}
	arm(recheckAt)
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C:
			if _, err := r.Sweep(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("sweep failed", core.AttrError, err)
			}
			continue
		case <-recheck.C:
		case <-pass.C:
		}
		rep, err := r.Pass(ctx)
		arm(rep.Recheck)
		switch {
		case err != nil && ctx.Err() == nil:
			r.log.Error("reconciliation pass failed", core.AttrError, err)
		case err == nil && rep.Total()+rep.Failed+rep.Attention > 0:
			r.log.Info("reconciliation pass", "incomplete_runs", rep.Incomplete, "repairs", rep.Total(), "detail", rep.String())
		}
	}
}

// withLock runs fn under the named lock, extending it while fn runs.
func (r *Reconciler) withLock(ctx context.Context, name string, ttl time.Duration, fn func(context.Context) error) (bool, error) {
	if !r.running.TryLock() {
		return false, nil // this reconciler is at it already
	}
	defer r.running.Unlock()
	token := r.token
	var ok bool
	err := r.call(ctx, func(ctx context.Context) (err error) {
		ok, err = r.deps.Store.TryLock(ctx, name, token, ttl)
		return err
	})
	if err != nil || !ok {
		return false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				var held bool
				if err := r.call(ctx, func(ctx context.Context) (err error) {
					held, err = r.deps.Store.ExtendLock(ctx, name, token, ttl)
					return err
				}); err == nil && !held {
					r.log.Warn("lost the reconciler lock", "lock", name)
					cancel()
					return
				}
			}
		}
	})
	err = fn(ctx)
	cancel()
	wg.Wait()
	if uerr := r.call(context.WithoutCancel(ctx), func(ctx context.Context) error {
		return r.deps.Store.Unlock(ctx, name, token)
	}); uerr != nil && err == nil {
		r.log.Warn("could not release the reconciler lock", core.AttrError, uerr)
	}
	return true, err
}

// slowCall is how long a call to Redis may take before the reconciler
// takes Redis for having been away while it waited (see call).
const slowCall = time.Second

// call runs fn, one call of the reconciler to Redis, and notes how it went
// (see reached): every call counts, whichever of them was waiting when
// Redis went away.
func (r *Reconciler) call(ctx context.Context, fn func(context.Context) error) error {
	asked := r.deps.Clock.Now()
	err := fn(ctx)
	r.reached(ctx, asked, err)
	return err
}

// reached records how a call to Redis asked at asked went. A call that
// failed, or answered later than slowCall, means Redis was away (a frozen
// Redis answers late: the client retries its timeouts, so no call need
// fail): attempts whose fences expired meanwhile may belong to live workers
// that could not renew them. The first prompt answer after a failure, and
// a late answer itself, start the OutageGrace.
//
// Every call counts, not only the lock's: Redis may freeze while any call
// of a sweep or pass is waiting, and the next sweep, whose calls are all
// prompt, must still hold. A freeze that begins and ends while the
// reconciler makes no call at all is not seen here; as the sweep ticker
// asks Redis every SweepInterval, such a freeze lasts less than
// SweepInterval + slowCall, too short to expire the fence of a live attempt
// (renewed every FenceTTL/3) unless FenceTTL < 1.5 * (SweepInterval +
// slowCall), 4.5s with the default SweepInterval.
func (r *Reconciler) reached(ctx context.Context, asked time.Time, err error) {
	if err != nil && ctx.Err() != nil {
		return // cancelled: says nothing about Redis
	}
	now := r.deps.Clock.Now()
	waited := now.Sub(asked)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err != nil:
		r.unreached = true
		return
	case waited <= slowCall && !r.unreached:
		return
	}
	r.unreached = false
	r.quietUntil = now.Add(r.cfg.OutageGrace)
	r.log.Info("Redis answers again; attempts whose fences expired meanwhile are not counted as crashed yet, so that live workers can save them",
		"for", r.cfg.OutageGrace, "call_waited", waited.Round(time.Millisecond))
}

// repairsHeld reports whether expired fences and stalled deliveries must
// wait (OutageGrace).
func (r *Reconciler) repairsHeld(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return now.Before(r.quietUntil)
}

// Sweep re-dispatches the attempts whose worker died (their fence expired)
// and the steps whose task asynq handed to a worker that never received it.
func (r *Reconciler) Sweep(ctx context.Context) (Report, error) {
	var rep Report
	locked, err := r.withLock(ctx, retrystate.LockSweep, 30*time.Second, func(ctx context.Context) error {
		var err error
		rep, err = r.sweep(ctx)
		return err
	})
	rep.Locked = locked
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

// stalled finds the step tasks asynq holds as active under a lease no
// worker has extended for StalledAfter, and returns their runs and, for
// each, its latest such task (the others are older dispatches, stale
// already). The repair script leaves alone a step that was begun, or whose
// current task is another.
func (r *Reconciler) stalled(ctx context.Context, now time.Time) ([]retrystate.Due, map[string]string, error) {
	var ids []string
	err := r.call(ctx, func(ctx context.Context) (err error) {
		ids, err = r.deps.Store.StalledTasks(ctx, now.Add(tasks.AsynqLeaseDuration-r.cfg.StalledAfter), batch)
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

// Pass is one full reconciliation. It returns at once, with Locked false,
// when another replica is reconciling.
func (r *Reconciler) Pass(ctx context.Context) (Report, error) {
	var rep Report
	locked, err := r.withLock(ctx, retrystate.LockReconcile, max(2*r.cfg.Interval, time.Minute), func(ctx context.Context) error {
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

		var due []retrystate.Due
		if err := r.call(ctx, func(ctx context.Context) (err error) {
			due, err = r.deps.Store.DueDeadlines(ctx, now, batch)
			return err
		}); err != nil {
			return err
		}
		rep.merge(r.each(ctx, due, r.expire))

		// Is the task there? Every scheduled retry or wake-up, then every
		// run idle for longer than Grace (but the scheduled ones, which the
		// first walk checks).
		checked, err := r.checkIndex(ctx, "idx:scheduled", &r.scheduledAt, false,
			func(ctx context.Context, at retrystate.IndexCursor, n int64) ([]retrystate.Due, retrystate.IndexCursor, bool, error) {
				return r.deps.Store.ScheduledPage(ctx, at, n)
			})
		rep.merge(checked)
		if err != nil {
			return err
		}
		idleBefore := now.Add(-r.cfg.Grace)
		checked, err = r.checkIndex(ctx, "idx:active", &r.idleAt, true,
			func(ctx context.Context, at retrystate.IndexCursor, n int64) ([]retrystate.Due, retrystate.IndexCursor, bool, error) {
				return r.deps.Store.IdlePage(ctx, at, idleBefore, n)
			})
		rep.merge(checked)
		if err != nil {
			return err
		}

		var trimmed int
		if err := r.call(ctx, func(ctx context.Context) (err error) {
			trimmed, err = r.deps.Store.TrimIndexes(ctx, now.Add(-r.deps.Retention), 10*batch)
			return err
		}); err != nil {
			return err
		}
		rep.add("trimmed", trimmed)
		for range trimmed {
			r.cfg.Observer.Repair("trimmed")
		}

		// Ordering keys and max_running: a gate whose admitted run is gone
		// frees the slot and admits its next runs.
		var gates retrystate.GateRepair
		if err := r.call(ctx, func(ctx context.Context) (err error) {
			gates, err = r.deps.Store.RepairGates(ctx, r.deps.Clock.Now(), 10*batch)
			return err
		}); err != nil {
			return err
		}
		rep.add("gate_slot_freed", gates.Dropped)
		rep.add("gate_admitted", gates.Started)
		if gates.Dropped+gates.Started > 0 {
			r.log.Warn("ordering keys or workflow limits repaired", "slots_freed", gates.Dropped,
				"runs_started", gates.Started)
			for range gates.Dropped {
				r.cfg.Observer.Repair("gate_slot_freed")
			}
			for range gates.Started {
				r.cfg.Observer.Repair("gate_admitted")
			}
		}
		return nil
	})
	rep.Locked = locked
	return rep, err
}

// each runs fn for every run with at most Concurrency in flight and sums
// their reports. A failed repair is logged; the next pass tries again.
func (r *Reconciler) each(ctx context.Context, runs []retrystate.Due, fn func(context.Context, string) (Report, error)) Report {
	var (
		mu    sync.Mutex
		total Report
		wg    sync.WaitGroup
		sem   = make(chan struct{}, r.cfg.Concurrency)
		seen  = make(map[string]bool, len(runs))
	)
	for _, d := range runs {
		if seen[d.RunID] || ctx.Err() != nil {
			continue
		}
		seen[d.RunID] = true
		sem <- struct{}{}
		wg.Add(1)
		go func(id string) {
			defer func() { <-sem; wg.Done() }()
			rep, err := fn(ctx, id)
			if err != nil {
				if ctx.Err() == nil {
					r.log.Warn("repair failed; the next pass retries it", core.AttrRunID, id, core.AttrError, err)
				}
				return
			}
			mu.Lock()
			total.merge(rep)
			mu.Unlock()
		}(d.RunID)
	}
	wg.Wait()
	return total
}

func (r *Reconciler) runLog(id string, d *retrystate.Dispatch) *slog.Logger {
	l := r.log.With(core.AttrRunID, id)
	if d != nil {
		l = l.With(core.AttrStep, d.Name, core.AttrAttempt, d.Attempt)
	}
	return l
}

// outcome logs a repair's outcome, enqueues its dispatch, and reports it.
func (r *Reconciler) outcome(ctx context.Context, id string, rp retrystate.Result) (Report, error) {
	var rep Report
	log := r.runLog(id, rp.Dispatch)
	switch rp.Outcome {
	case retrystate.OutcomeDispatch:
		if !rp.Enqueued {
			if err := r.deps.Persist(ctx, log, "enqueue repaired task", func(ctx context.Context) error {
				return r.call(ctx, func(ctx context.Context) error {
					return r.deps.Tasks.Enqueue(ctx, id, rp.Workflow, *rp.Dispatch)
				})
			}); err != nil {
				return rep, err
			}
		}
		log.Warn("repaired run", "repair", rp.Kind, "crashes", rp.Crashes, core.AttrDueAt, rp.Dispatch.DueAt)
		rep.add(rp.Kind, 1)
		r.cfg.Observer.Repair(rp.Kind)
	case retrystate.OutcomeRunFailed:
		if _, ended := core.FinalStatus(rp.Then); ended {
			log.Error("run failed during repair", "repair", rp.Kind, core.AttrCode, rp.Code, core.AttrReason, rp.Reason, "then", rp.Then)
		} else {
			log.Warn("run's step failed during repair; the run goes on", "repair", rp.Kind, core.AttrCode, rp.Code,
				core.AttrReason, rp.Reason, "then", rp.Then)
		}
		rep.add(rp.Kind, 1)
		rep.Failed++
		r.deps.Tasks.Stop(log, rp.Task, rp.StepStatus)
		r.observeFailed(ctx, id, rp)
	case retrystate.OutcomeAttention:
		log.Error("run needs attention: repaired automatically too often", core.AttrReason, rp.Reason)
		rep.Attention++
		r.cfg.Observer.Repair("needs_attention")
	default:
		// OutcomeNoop, the only other outcome the redispatch, timeout and
		// repair scripts reply with (but a check's, which checkPage reads
		// first): nothing was repaired, nothing to report.
	}
	return rep, nil
}

// redispatch charges a crash to the attempt of run id if its fence expired,
// and re-dispatches it; never while repairs are held (OutageGrace): the
// check comes right before the script, as a sweep's list of expired fences
// may have been read before Redis went away.
func (r *Reconciler) redispatch(ctx context.Context, id string) (Report, error) {
	if r.repairsHeld(r.deps.Clock.Now()) {
		return Report{RepairsHeld: true}, nil
	}
	var rp retrystate.Result
	err := r.call(ctx, func(ctx context.Context) (err error) {
		rp, err = r.deps.Store.Redispatch(ctx, id, r.cfg.MaxAutoRecoveries, r.deps.Retention, r.deps.Clock.Now())
		return err
	})
	if err != nil {
		return Report{}, err
	}
	return r.outcome(ctx, id, rp)
}

func (r *Reconciler) expire(ctx context.Context, id string) (Report, error) {
	var rp retrystate.Result
	err := r.call(ctx, func(ctx context.Context) (err error) {
		rp, err = r.deps.Store.ExpireDeadline(ctx, id, r.deps.Retention, r.deps.Clock.Now())
		return err
	})
	if err != nil {
		return Report{}, err
	}
	return r.outcome(ctx, id, rp)
}

// checkPageSize is the number of runs whose tasks one pipeline checks, and
// checkPagesInFlight the pipelines a walk has sent at a time: one that
// Redis runs and the next, waiting, so that Redis never waits for the
// reconciler. Each call to Redis must answer within slowCall, or it counts
// as an outage (see reached): a page waits for the one before it, and a
// check that repairs takes Redis 50 to 80µs (BenchmarkReconcileRetries), so
// a page's answer comes within about 30ms, or ten times that on a machine
// loaded enough to slow Redis down tenfold.
const (
	checkPageSize      = 200
	checkPagesInFlight = 2
)

// pageReader reads the next page of up to n runs of an index walk from at.
type pageReader func(ctx context.Context, at retrystate.IndexCursor, n int64) ([]retrystate.Due, retrystate.IndexCursor, bool, error)

// checkIndex makes sure that the task each run of an index walk (of the
// index named index) waits for exists in asynq, from *at on, for up to
// MaxChecks runs, and leaves *at where it stopped (the start again when it
// reached the end, or failed). The runs are read a page at a time
// (checkPageSize) and each page is checked, and repaired where it must be,
// in one pipeline of script calls (checkPage), with up to
// checkPagesInFlight pages in flight; idle: the runs come from idx:active,
// and those in idx:scheduled are left to its own walk. The error is a
// failed read of the index; a page whose checks failed ends the walk with
// a warning, as a failed repair is logged, and the pass goes on.
func (r *Reconciler) checkIndex(ctx context.Context, index string, at *retrystate.IndexCursor, idle bool, read pageReader) (Report, error) {
	var (
		mu      sync.Mutex
		total   Report
		failed  error // a page's
		wg      sync.WaitGroup
		pages   = make(chan struct{}, checkPagesInFlight)
		checked int
		readErr error
	)
	for checked < r.cfg.MaxChecks && ctx.Err() == nil {
		mu.Lock()
		stop := failed != nil
		mu.Unlock()
		if stop {
			break
		}
		var page []retrystate.Due
		var next retrystate.IndexCursor
		var done bool
		if readErr = r.call(ctx, func(ctx context.Context) (err error) {
			page, next, done, err = read(ctx, *at, int64(min(checkPageSize, r.cfg.MaxChecks-checked)))
			return err
		}); readErr != nil {
			break
		}
		*at = next
		checked += len(page)
		if len(page) > 0 {
			pages <- struct{}{}
			wg.Go(func() {
				defer func() { <-pages }()
				rep, err := r.checkPage(ctx, page, idle)
				mu.Lock()
				defer mu.Unlock()
				total.merge(rep)
				if err != nil && failed == nil {
					failed = err
				}
			})
		}
		if done {
			break
		}
	}
	wg.Wait()
	if failed != nil || readErr != nil {
		// Some runs of the walk were not checked: start again next time.
		*at = retrystate.IndexCursor{}
	}
	if failed != nil && ctx.Err() == nil {
		r.log.Warn("task checks failed; the next pass checks these runs again", "index", index, core.AttrError, failed)
	}
	return total, readErr
}

// checkPage makes sure that the task each of the runs waits for exists in
// asynq, with one script call per run, all in one pipeline
// (Store.CheckTasks): a lost task is re-created, an archived one
// re-dispatched, by the script itself. Only the runs whose step's worker
// died (an expired fence) take other calls (redispatch, one run at a time
// after the page's checks); a run written
// within Grace, whose task may still be on its way, is looked at again
// when the grace ends (Report.Recheck).
func (r *Reconciler) checkPage(ctx context.Context, page []retrystate.Due, idle bool) (Report, error) {
	ids := make([]string, len(page))
	for i, d := range page {
		ids[i] = d.RunID
	}
	if idle {
		// The scheduled ones are checked by the walk of idx:scheduled.
		if err := r.call(ctx, func(ctx context.Context) (err error) {
			ids, err = r.deps.Store.Unscheduled(ctx, ids)
			return err
		}); err != nil || len(ids) == 0 {
			return Report{}, err
		}
	}
	var checks []retrystate.Check
	if err := r.call(ctx, func(ctx context.Context) (err error) {
		checks, err = r.deps.Store.CheckTasks(ctx, ids, retrystate.CheckArgs{Grace: r.cfg.Grace,
			MaxAuto: r.cfg.MaxAutoRecoveries, Now: r.deps.Clock.Now()})
		return err
	}); err != nil {
		return Report{}, err
	}
	rep := Report{Checked: len(checks)}
	var crashed []string
	for _, c := range checks {
		var got Report
		var err error
		switch {
		case c.Err != nil:
			err = c.Err
		case c.Result.Outcome == retrystate.OutcomeRecheck:
			got.Recheck = c.Result.RecheckAt
		case c.Result.Outcome == retrystate.OutcomeCrashed:
			crashed = append(crashed, c.RunID)
		default:
			got, err = r.outcome(ctx, c.RunID, c.Result)
		}
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("repair failed; the next pass retries it", core.AttrRunID, c.RunID, core.AttrError, err)
			}
			continue
		}
		rep.merge(got)
	}
	for _, id := range crashed {
		got, err := r.redispatch(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("repair failed; the next pass retries it", core.AttrRunID, id, core.AttrError, err)
			}
			continue
		}
		rep.merge(got)
	}
	return rep, nil
}

// repairTask gives a run's current step whose task is in trouble a task
// that will be delivered.
func (r *Reconciler) repairTask(ctx context.Context, id, task string, trouble retrystate.TaskTrouble) (Report, error) {
	if trouble == retrystate.TaskStalled && r.repairsHeld(r.deps.Clock.Now()) {
		return Report{RepairsHeld: true}, nil
	}
	var rp retrystate.Result
	err := r.call(ctx, func(ctx context.Context) (err error) {
		rp, err = r.deps.Store.RepairTask(ctx, id, task, trouble, r.cfg.MaxAutoRecoveries, r.deps.Clock.Now())
		return err
	})
	if err != nil {
		return Report{}, err
	}
	return r.outcome(ctx, id, rp)
}

// observeFailed tells the observer of a repair that failed a step for good
// and, when that ended the run, of the run's end (reading the run's
// workflow name only when an observer listens).
func (r *Reconciler) observeFailed(ctx context.Context, id string, rp retrystate.Result) {
	r.cfg.Observer.Repair(rp.Kind)
	st, ended := core.FinalStatus(rp.Then)
	if _, nop := r.cfg.Observer.(core.NopObserver); nop || !ended {
		return
	}
	wf, err := r.deps.Store.RunWorkflow(ctx, id)
	if err != nil {
		r.log.Debug("cannot read the workflow of a failed run for metrics", core.AttrRunID, id, core.AttrError, err)
	}
	code := rp.Code
	if st == core.StatusSucceeded {
		code = ""
	}
	r.cfg.Observer.RunFinished(ctx, id, wf, st, code)
}
