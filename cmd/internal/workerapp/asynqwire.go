package workerapp

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// asynqWireTimeout bounds one run of the asynq task-format check.
const asynqWireTimeout = 30 * time.Second

// errWorkerStopped ends the background asynq task-format check.
var errWorkerStopped = errors.New("worker stopped")

// checkAsynqWire checks, before the worker starts, that asynq stores tasks
// as Cairn's Lua scripts write them (tasks.CheckAsynqWire): on a difference
// the worker does not start. While Redis cannot be reached the worker waits
// for it (workflow.Worker.Run), so the check then goes on in the background
// until Redis answers (recheckAsynqWire), and a difference found then stops
// the worker.
//
// Run the worker in the returned context; once it has stopped, done returns
// the difference that stopped it (nil otherwise).
func checkAsynqWire(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) (
	runCtx context.Context, done func() error, err error) {
	noMismatch := func() error { return nil }
	ok, err := checkAsynqWireOnce(ctx, rdb, log)
	if ok {
		return ctx, noMismatch, err
	}
	log.Warn("cannot check asynq's task format yet; checking again until Redis answers", workflow.AttrError, err)
	runCtx, cancel := context.WithCancelCause(ctx)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		recheckAsynqWire(runCtx, cancel, rdb, log)
	}()
	return runCtx, func() error {
		cancel(errWorkerStopped)
		<-finished
		var mm *tasks.WireMismatchError
		if err := context.Cause(runCtx); errors.As(err, &mm) {
			return err
		}
		return nil
	}, nil
}

// checkAsynqWireOnce runs the check once, within asynqWireTimeout. ok is
// whether it came to an answer: err is then nil (asynq stores tasks as
// Cairn writes them) or the *tasks.WireMismatchError; otherwise err is why
// it could not (Redis cannot be reached).
func checkAsynqWireOnce(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) (ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, asynqWireTimeout)
	defer cancel()
	err = tasks.CheckAsynqWire(ctx, rdb, tasks.NewLuaTaskWriter(rdb), workflow.SystemClock.Now)
	var mm *tasks.WireMismatchError
	switch {
	case err == nil:
		log.Info("asynq task format checked", "asynq", tasks.LinkedAsynqVersion())
		return true, nil
	case errors.As(err, &mm):
		return true, err
	}
	return false, err
}

// recheckAsynqWire checks again, backing off from 100 ms to 10 s, until
// the check comes to an answer or ctx is done; a difference cancels ctx
// with it as the cause, which stops the worker.
func recheckAsynqWire(ctx context.Context, cancel context.CancelCauseFunc, rdb redis.UniversalClient, log *slog.Logger) {
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 10*time.Second) {
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		ok, err := checkAsynqWireOnce(ctx, rdb, log)
		if ok {
			if err != nil {
				log.Error("stopping the worker: asynq does not store tasks as Cairn writes them", workflow.AttrError, err)
				cancel(err)
			}
			return
		}
		log.Debug("cannot check asynq's task format yet", workflow.AttrError, err, "retry_in", 2*backoff)
	}
}
