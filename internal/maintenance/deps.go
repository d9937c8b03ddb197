package maintenance

import (
	"context"
	"time"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
)

// Deps is what the reconciler needs of the engine whose queue it keeps:
// its state, the enqueueing and stopping of its step tasks, its clock, the
// retention of finished runs, and its retrying of state writes. The
// engine builds it (Engine.NewReconciler); the reconciler holds no Engine.
type Deps struct {
	Store *retrystate.Store
	Tasks Tasks
	Clock core.Clock
	// Retention is how long a finished run is kept.
	Retention time.Duration
	// Persist runs a state write or an enqueue, retrying with backoff while
	// it fails, as the engine saves an attempt's result.
	Persist func(ctx context.Context, log core.Logger, what string, fn func(context.Context) error) error
}

// Tasks enqueues and stops the asynq tasks of step attempts.
type Tasks interface {
	// Enqueue makes sure the task of a dispatch exists (a no-op when it
	// does).
	Enqueue(ctx context.Context, runID, workflow string, x retrystate.Dispatch) error
	// Stop deletes the task of a step that must not run any more and,
	// when the step was running, signals its worker; best effort.
	Stop(log core.Logger, task string, stepStatus core.StepStatus)
}
