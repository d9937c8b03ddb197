package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// dispatcher enqueues and stops the asynq tasks of step attempts
// on one queue. The engine, the reconciler and the client each reach asynq
// through one.
type dispatcher struct {
	rdb       redis.UniversalClient
	client    *asynq.Client
	inspector *asynq.Inspector
	queue     string
	clock     core.Clock
	// timers is the engine's promoter, which a task scheduled in this
	// process wakes (timers.go); nil for a client's dispatcher.
	timers *promoter
}

func newDispatcher(rdb redis.UniversalClient, queue string, clock core.Clock) *dispatcher {
	return &dispatcher{rdb: rdb, client: asynq.NewClientFromRedisClient(rdb),
		inspector: asynq.NewInspectorFromRedisClient(rdb), queue: queue, clock: clock}
}

// Stop deletes the task of a step that must not run any more and, when the
// step was running, signals its worker to cancel the step's context. Both
// are best effort: the state already forbids the step from going on, and a
// running step also learns it at its next fence renewal.
func (d *dispatcher) Stop(log core.Logger, task string, stepStatus core.StepStatus) {
	if task == "" {
		return
	}
	if err := d.inspector.DeleteTask(d.queue, task); err != nil &&
		!errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
		log.Debug("task of a stopped step not deleted", core.AttrTaskID, task, core.AttrError, err)
	}
	if stepStatus == core.StepRunning {
		if err := d.inspector.CancelProcessing(task); err != nil {
			log.Warn("could not signal the running step to stop; it stops at its next fence renewal",
				core.AttrTaskID, task, core.AttrError, err)
		}
	}
}

// Enqueue makes sure the task of a dispatch exists. Enqueueing an attempt
// whose task exists already is a no-op, so it can always be retried. A task
// due later is also indexed by its millisecond (tasks.AddTimer), as the
// scripts index theirs, so that a promoter moves it when it is due rather
// than at asynq's next whole second.
func (d *dispatcher) Enqueue(ctx context.Context, runID, workflow string, x retrystate.Dispatch) error {
	p := tasks.Step{RunID: runID, Workflow: workflow, Index: x.Index, Name: x.Name, Attempt: x.Attempt, Gen: x.Gen}
	id := p.ID()
	_, err := d.client.EnqueueContext(ctx, asynq.NewTask(tasks.TypeStep, p.Encode()),
		tasks.Options(d.queue, id, x.Timeout, x.DueAt, d.clock.Now())...)
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("enqueue task %s: %w", id, err)
	}
	if x.DueAt.After(d.clock.Now()) {
		// Best effort: without the entry, asynq's forwarder moves the task
		// at its whole second (never early).
		if err := tasks.AddTimer(ctx, d.rdb, d.queue, id, x.DueAt); err == nil {
			d.timers.wake(x.DueAt)
		}
	}
	return nil
}

// scheduled tells this process's promoter that a script wrote a task due
// at x.DueAt (indexed by the script itself), so that it is promoted at its
// millisecond.
func (d *dispatcher) scheduled(x *retrystate.Dispatch) {
	if x != nil {
		d.timers.wake(x.DueAt)
	}
}
