package engine

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/internal/maintenance"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// Cairn in an existing asynq service.
//
// A Worker runs an asynq server of its own. A service that already runs one,
// with its own task types on its own mux, can run Cairn's steps on it
// instead:
//
//	engine, _ := workflow.NewEngine(rdb, workflow.EngineConfig{Queue: "orders"})
//	_ = engine.Register(defs...)
//	srv := asynq.NewServerFromRedisClient(rdb, engine.AsynqConfig(myConfig))
//	mux := asynq.NewServeMux()
//	mux.HandleFunc("email:send", sendEmail) // the service's own tasks
//	engine.Handle(mux)                      // Cairn's step attempts
//	go engine.Run(ctx)                      // definitions and reconciler
//	_ = srv.Run(mux)
//
// The server must serve the engine's queue and use the engine's retry delay
// and failure predicate for Cairn's tasks; AsynqConfig sets them (and keeps
// the service's own for its tasks).

// Polling intervals AsynqConfig lowers asynq's to, and a Worker's
// defaults: asynq's own defaults (1s
// and 5s) would start a step up to a second after the previous one ended,
// and a retry due in 130 ms up to 5 s late.
const (
	asynqTaskCheckInterval        = 20 * time.Millisecond
	asynqDelayedTaskCheckInterval = 200 * time.Millisecond
)

// Handle registers the engine's handler of step attempts on mux (for the
// task type tasks.TypeStep). See AsynqConfig for the server's options, and
// Run for what a worker does beside handling tasks.
func (e *Engine) Handle(mux *asynq.ServeMux) {
	mux.Handle(tasks.TypeStep, e)
}

// AsynqConfig returns cfg, the configuration of an asynq server that also
// serves other tasks, completed with what the engine's tasks need:
//
//   - Queues: the engine's queue is added, with priority 1, when cfg does
//     not list it (cfg's nil Queues, asynq's {"default": 1}, becomes
//     {"default": 1, <queue>: 1});
//   - RetryDelayFunc: Cairn's tasks take Cairn's delay (RetryDelay: a step
//     attempt asynq hands back is due again at once); the other tasks keep
//     cfg's function, or asynq's default;
//   - IsFailure: a step attempt handed back to be delivered again (a
//     shutdown, a fence held elsewhere) is not a failure; for any other
//     error cfg's predicate decides, or asynq's default (any error is);
//   - TaskCheckInterval and DelayedTaskCheckInterval are lowered to 20ms and
//     200ms when unset or longer (asynq's defaults, 1s and 5s, make each
//     step wait for the next poll and a retry up to 5s late).
//
// Fields Cairn does not need are left as cfg has them.
func (e *Engine) AsynqConfig(cfg asynq.Config) asynq.Config {
	q := e.cfg.Queue
	if _, ok := cfg.Queues[q]; !ok {
		queues := map[string]int{q: 1}
		if len(cfg.Queues) == 0 {
			queues["default"] = 1
		}
		maps.Copy(queues, cfg.Queues)
		cfg.Queues = queues
	}
	theirDelay := cfg.RetryDelayFunc
	if theirDelay == nil {
		theirDelay = asynq.DefaultRetryDelayFunc
	}
	cfg.RetryDelayFunc = func(n int, err error, t *asynq.Task) time.Duration {
		if t != nil && (t.Type() == tasks.TypeStep || t.Type() == tasks.TypeWebhook) {
			return retryDelay(n, err, t)
		}
		return theirDelay(n, err, t)
	}
	theirFailure := cfg.IsFailure
	cfg.IsFailure = func(err error) bool {
		if err != nil && !IsFailure(err) {
			return false // a step attempt handed back to be delivered again
		}
		if theirFailure != nil {
			return theirFailure(err)
		}
		return err != nil
	}
	if cfg.TaskCheckInterval <= 0 || cfg.TaskCheckInterval > asynqTaskCheckInterval {
		cfg.TaskCheckInterval = asynqTaskCheckInterval
	}
	if cfg.DelayedTaskCheckInterval <= 0 || cfg.DelayedTaskCheckInterval > asynqDelayedTaskCheckInterval {
		cfg.DelayedTaskCheckInterval = asynqDelayedTaskCheckInterval
	}
	return cfg
}

// Run does, beside handling step attempts, what a Worker does for an engine
// mounted on a service's own asynq server (Handle, AsynqConfig): it publishes
// the registered definitions, retrying while Redis is unreachable, then runs
// the reconciler (rc configures it; nil: the defaults) and the step
// latencies' flushes (EngineConfig.LatencyFlushInterval) until ctx is done.
// It returns nil when ctx ends. Run it on every replica, as a Worker would
// be.
func (e *Engine) Run(ctx context.Context, rc *maintenance.ReconcilerConfig) error {
	if ok, err := e.publishRetrying(ctx); !ok {
		return err
	}
	var cfg maintenance.ReconcilerConfig
	if rc != nil {
		cfg = *rc
	}
	timersDone := e.disp.timers.start(ctx)
	latencyDone := make(chan struct{})
	if e.latency != nil {
		go func() {
			defer close(latencyDone)
			e.latency.run(ctx, e.cfg.LatencyFlushInterval)
		}()
	} else {
		close(latencyDone)
	}
	e.NewReconciler(cfg).Run(ctx)
	<-timersDone
	<-latencyDone
	return nil
}

// AsynqHandler returns a step body that runs h, an existing asynq handler,
// as a step: h processes a task of type typ whose payload is the run's
// input (its JSON, as Client.Start stored it). The step's output is null.
// h's error is the step's: Cairn retries it per the step's policy, and
// asynq.SkipRetry or asynq.RevokeTask in it fail the step permanently, as
// they end an asynq task's retries. The task has no ResultWriter (its
// ResultWriter method returns nil): h must not write a result.
func AsynqHandler(typ string, h asynq.Handler) core.StepFunc {
	return func(ctx context.Context, sc *core.StepContext) (any, error) {
		if err := h.ProcessTask(ctx, asynq.NewTask(typ, sc.Input)); err != nil {
			return nil, err
		}
		return nil, nil
	}
}

// publishRetrying publishes the registered definitions, retrying with
// backoff while Redis refuses; false when ctx ended first (nil error) or the
// queue's data is of a format this code does not read (that error, which
// retrying cannot cure).
func (e *Engine) publishRetrying(ctx context.Context) (bool, error) {
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 10*time.Second) {
		err := e.Publish(ctx)
		if err == nil {
			return true, nil
		}
		if errors.Is(err, retrystate.ErrDataFormat) {
			return false, err // the caller reports it: retrying cannot cure it
		}
		e.log.Error("cannot publish workflow definitions; is Redis reachable? retrying", core.AttrError, err,
			"retry_in", backoff)
		if core.SleepContext(ctx, backoff) != nil {
			return false, nil //nolint:nilerr // ctx ended: Run returns nil, as after start-up
		}
	}
}
