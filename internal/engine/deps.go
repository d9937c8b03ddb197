package engine

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
)

// deps is what an Engine and its Reconcilers share: the queue's state
// store, the dispatcher of its step tasks, the clock, the retention of
// finished runs, and the retrying of state writes (persist, retry).
// NewEngine builds it once, from its EngineConfig; Engine.NewReconciler
// hands the same one to every reconciler it makes. Both embed it.
type deps struct {
	store *retrystate.Store
	disp  *dispatcher
	clock core.Clock
	// retention is how long a finished run is kept (EngineConfig.Retention).
	retention time.Duration
	// writeTimeout bounds the retries of a state write or an enqueue
	// (EngineConfig.StateWriteTimeout).
	writeTimeout time.Duration
}

// newDeps builds the shared part of an engine from its configuration, with
// its defaults applied.
func newDeps(rdb redis.UniversalClient, cfg EngineConfig) *deps {
	return &deps{
		store:        retrystate.New(rdb, cfg.Queue),
		disp:         newDispatcher(rdb, cfg.Queue, cfg.Clock),
		clock:        cfg.Clock,
		retention:    cfg.Retention,
		writeTimeout: cfg.StateWriteTimeout,
	}
}

// persist runs a state write or an enqueue, retrying with backoff while it
// fails, for at most StateWriteTimeout. It outlives the delivery's context:
// an attempt's result is worth saving even while asynq shuts down.
func (d *deps) persist(ctx context.Context, log core.Logger, what string, fn func(context.Context) error) error {
	return d.retry(context.WithoutCancel(ctx), log, what, fn)
}

// retry runs fn, retrying with backoff while it fails, until ctx is done or
// for at most StateWriteTimeout. A closed Redis client (redis.ErrClosed:
// the process is shutting down) ends it at once: no retry can succeed.
func (d *deps) retry(ctx context.Context, log core.Logger, what string, fn func(context.Context) error) error {
	err := fn(ctx)
	if err == nil || errors.Is(err, redis.ErrClosed) { // the common case: no timer needed
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, d.writeTimeout)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || errors.Is(err, redis.ErrClosed) {
			return err
		}
		log.Warn("redis write failed; retrying", "op", what, core.AttrError, err, "retry_in", backoff)
		if core.SleepContext(ctx, backoff) != nil {
			return err
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}
