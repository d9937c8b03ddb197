package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
)

// ReconcilerConfig configures a Reconciler. A zero field takes the default
// given in its comment.
type ReconcilerConfig struct {
	// Interval is the time between full passes. Default 30s.
	Interval time.Duration
	// SweepInterval is the time between sweeps for attempts whose worker
	// died (their fence expired), so that a crashed step resumes within
	// about FenceTTL + SweepInterval. A sweep with nothing to do costs
	// Redis one round trip of two reads, and takes no lock. Keep FenceTTL
	// at least 1.5 * (SweepInterval + 1s) (see outage.go). Default 500ms.
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
		c.SweepInterval = 500 * time.Millisecond
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
	// cfg is the whole configuration, with its defaults; each service
	// (sweep.go, pass.go, expiry.go, tasks.go, gates.go, outage.go) reads
	// its own part, made by New; Concurrency and Observer are the
	// repairs' (repair.go).
	cfg       ReconcilerConfig
	sweepCfg  sweepConfig
	passCfg   passConfig
	tasksCfg  tasksConfig
	outageCfg outageConfig
	// The services' test signals (package testsignal): disabled but in
	// this package's tests, which Init the ones they wait for.
	sweepSignals  sweepSignals
	passSignals   passSignals
	expirySignals expirySignals
	tasksSignals  tasksSignals
	gatesSignals  gatesSignals
	outageSignals outageSignals
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
	// leasesReadAt is when a sweep last read asynq's leases for stalled
	// deliveries in its first read (stalledEvery).
	leasesReadAt time.Time
}

// New returns a reconciler working with d, logging to log. cfg.Observer
// must be set (the engine's, by default).
func New(d Deps, cfg ReconcilerConfig, log *slog.Logger) *Reconciler {
	cfg = cfg.withDefaults()
	return &Reconciler{
		cfg: cfg,
		sweepCfg: sweepConfig{interval: cfg.SweepInterval, stalledAfter: cfg.StalledAfter,
			maxAutoRecoveries: cfg.MaxAutoRecoveries},
		passCfg:   passConfig{interval: cfg.Interval},
		tasksCfg:  tasksConfig{grace: cfg.Grace, maxChecks: cfg.MaxChecks, maxAutoRecoveries: cfg.MaxAutoRecoveries},
		outageCfg: outageConfig{grace: cfg.OutageGrace},
		deps:      d,
		log:       log.With("component", "reconciler"),
		token:     core.NewToken(),
	}
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
		if core.SleepContext(ctx, r.sweepCfg.interval) != nil {
			return
		}
	}
	sweep := time.NewTicker(r.sweepCfg.interval)
	defer sweep.Stop()
	pass := time.NewTicker(r.passCfg.interval)
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
