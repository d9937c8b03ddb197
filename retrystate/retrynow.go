package retrystate

import (
	"context"
	"fmt"
	"time"
)

// The "retry now" of a scheduled retry (lua/retrynow.lua): an operator's
// (Client.RetryNow), or asynq's Inspector.RunTask (asynqmon's "Run") found
// by the engine when begin answered OutcomeEarly to the task it ran.

// ActionRetryNow is the action of RetryNow, as journaled and audited.
const ActionRetryNow = "retry_now"

// EventRetryNow is the journal entry of a retry made due now: an operator
// (actor), or asynq's RunTask (via "asynq_run_task"), made the scheduled
// retry of step (attempt) due now; due_at is the due time it had.
const EventRetryNow = "retry_now"

// Who made a retry due now (the journal's via).
const (
	RetryNowByOperator     = "operator"
	RetryNowByAsynqRunTask = "asynq_run_task"
)

// OutcomeDue (retry now): the scheduled retry of the run's current step is
// due now.
const OutcomeDue Outcome = "due"

// RetryNowParams asks to make the scheduled retry of a run's current step
// due now.
type RetryNowParams struct {
	RunID string
	// Step is the step an operator names. It must be the run's current
	// step, pending a scheduled retry (ignored with Task).
	Step string
	// Task, when set, is a task delivered before its due time (begin
	// answered OutcomeEarly): the retry is made due only when that task is
	// the current step's scheduled retry and asynq's RunTask moved it
	// (Cairn's timers index still holds it a second or more ahead), else
	// the outcome is OutcomeNoop and nothing is written.
	Task string
	// Actor is who acts, as journaled.
	Actor string
	Now   time.Time
}

// RetryNowResult is what RetryNow did. Its Outcome is one of:
//
//   - OutcomeDue: the step's retry (Index, Name, Attempt) is due now; it
//     was due at DueAt. For an operator's call, its task was moved to
//     asynq's pending list when it was scheduled or retried (TaskState, as
//     it was: "" for no task, which the reconciler writes due now).
//   - OutcomeNoop (with Task only): not asynq's RunTask (Reason).
//
// An operator's call on a run whose current step does not wait out a
// retry's backoff is a *RefusedError (see RetryNow).
type RetryNowResult struct {
	Outcome   Outcome
	Index     int
	Name      string
	Attempt   int
	DueAt     time.Time
	TaskState string
	Reason    string
}

// RetryNow makes the scheduled retry of the run's current step due now,
// moving its task (one task: never a second attempt) and the run's due
// time in one script, and journals EventRetryNow. It returns
// ErrRunNotFound for an unknown run, and, for an operator's call (no
// Task), a *RefusedError with the reason when the step is not pending a
// retry that is not due yet, or when a delivery holds its task.
func (s *Store) RetryNow(ctx context.Context, a RetryNowParams) (RetryNowResult, error) {
	res, err := s.run(ctx, s.scripts.retryNow, retryNowLua{runArgs: s.runArgs(a.RunID, a.Now), StepName: a.Step,
		Task: a.Task, Actor: a.Actor})
	if err != nil {
		return RetryNowResult{}, fmt.Errorf("%s: %w", ActionRetryNow, err)
	}
	return retryNowResult(refusal(decodeRetryNow(res)))
}

var retryNowOutcomes = []Outcome{OutcomeDue, OutcomeNoop}

func retryNowResult(d decoded, err error) (RetryNowResult, error) {
	if d, err = accept(ActionRetryNow, d, err, retryNowOutcomes); err != nil {
		return RetryNowResult{}, err
	}
	out := RetryNowResult{Outcome: d.Outcome, Reason: d.Reason, TaskState: d.Task}
	if d.Dispatch != nil {
		out.Index, out.Name, out.Attempt, out.DueAt = d.Dispatch.Index, d.Dispatch.Name, d.Dispatch.Attempt, d.Dispatch.DueAt
	}
	return out, nil
}

// retryNowLua is retrynow.lua's.
type retryNowLua struct {
	runArgs
	StepName string `arg:"step_name"`
	Task     string `arg:"task"`
	Actor    string `arg:"actor"`
}

func (a retryNowLua) args() ([]string, []any) {
	return []string{a.Run}, []any{a.RunID, a.Prefix, a.Now, a.StepName, a.Task, a.Actor}
}

// The elements of retrynow.lua's {"due", index, name, attempt, due_at,
// task state}.
const retryNowLen = 6

// decodeRetryNow decodes the reply of retrynow.lua.
func decodeRetryNow(res []string) (decoded, error) {
	r := newReply(ActionRetryNow, res)
	switch r.word() {
	case "due":
		r.want(retryNowLen)
		return r.result(decoded{Outcome: OutcomeDue, Dispatch: &Dispatch{Index: r.integer(1), Name: r.str(2),
			Attempt: r.integer(3), DueAt: r.instant(4)}, Task: r.str(5)})
	case "noop":
		return decodeReason(r, OutcomeNoop)
	case "refused":
		return decodeReason(r, outcomeRefused)
	case "gone":
		r.want(1)
		return r.result(decoded{Outcome: OutcomeGone})
	}
	r.unknown()
	return r.result(decoded{})
}
