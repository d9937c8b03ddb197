package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// AsynqRunTaskActor is the actor journaled (retry_now, via asynq_run_task)
// when asynq's Inspector.RunTask, asynqmon's "Run", made a scheduled retry
// due now.
const AsynqRunTaskActor = "asynq RunTask (asynqmon Run)"

// ranByAsynq is called with a delivery that begin found early, by more than
// MaxEarlyWait. It tells whether asynq's Inspector.RunTask moved it: then
// the step's scheduled retry is made due now, as an operator's RetryNow
// would, journaled (retry_now, via asynq_run_task), and the caller begins
// again. Anything else early (a clock ahead of this worker's, a task
// another tool moved) is left to the caller, which hands the task back
// until its due time (early).
func (e *Engine) ranByAsynq(ctx context.Context, log core.LineLogger, p tasks.Step, taskID string) bool {
	res, err := e.store.RetryNow(ctx, retrystate.RetryNowParams{RunID: p.RunID, Task: taskID,
		Actor: AsynqRunTaskActor, Now: e.cfg.Clock.Now()})
	switch {
	case err != nil:
		log.Warn("could not check whether asynq's RunTask moved an early delivery", core.AttrError, err)
		return false
	case res.Outcome != retrystate.OutcomeDue:
		log.Debug("an early delivery not moved by asynq's RunTask", "why", res.Reason)
		return false
	}
	log.Info("asynq's RunTask (asynqmon's Run) moved a scheduled retry: it is due now", core.AttrActor,
		AsynqRunTaskActor, "was_due", res.DueAt)
	return true
}

// early hands back a delivery that came wait before its attempt's due
// time, with an error that says so where asynqmon shows it (the task's
// last error, in its retry set): Cairn keeps a step's due time.
func (e *Engine) early(log core.LineLogger, wait time.Duration) error {
	due := e.cfg.Clock.Now().Add(wait).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	log.Info("attempt delivered long before its due time; deferring", core.AttrDelay, wait, "due", due)
	return &redeliverError{after: wait, why: fmt.Sprintf("attempt not due until %s; Cairn keeps a step's due time "+
		"(to run a scheduled retry now: the dashboard's Retry now, or enqueue retry --now)", due)}
}
