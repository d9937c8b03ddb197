package retrystate

import (
	"fmt"
	"slices"
	"time"
)

// The outcomes of the state scripts, and the parts of the operations'
// typed results that several of them share. Each operation has one result
// type (attempt.go, runs.go, signals.go, repair.go), holding its Outcome and
// only the fields its outcomes set; the type's doc lists its outcomes. It is
// made from the decoded reply (reply.go) by the operation's function next
// to it, which checks that the outcome is one the operation answers: any
// other is an error wrapping ErrUnexpectedReply.

// Outcome is what a state script did, as the first element of its reply says.
// Its value is the script's word, except for OutcomeDispatch (see there).
type Outcome string

// Outcomes of the state scripts. Which script replies with which, and the
// fields each sets, are in the comments; the typed result of each operation
// (attempt.go, runs.go, signals.go, repair.go) lists the outcomes it
// answers and the fields each sets.
const (
	// OutcomeOK (begin): run the step body; Started holds the attempt.
	OutcomeOK Outcome = "ok"
	// OutcomeGone (begin): no such run; acknowledge the task. (Cancel,
	// Operate and Restore return ErrRunNotFound instead.)
	OutcomeGone Outcome = "gone"
	// OutcomeEnded (begin, cancel): the run had ended already, as
	// RunStatus.
	OutcomeEnded Outcome = "ended"
	// OutcomeStale (begin): the task is not the step's current dispatch;
	// acknowledge. Dispatch is the dispatch the run waits for, if any.
	// (create): the caller's definition version is not the published one,
	// Reason (or its template is missing: Reason ""); nothing written.
	OutcomeStale Outcome = "stale"
	// OutcomeBusy (begin): another delivery of this dispatch holds a live
	// fence; try again after Wait.
	OutcomeBusy Outcome = "busy"
	// OutcomeDeferred (begin): the step's circuit breaker is open (or
	// another attempt probes it): the attempt waits, spending no budget,
	// until Dispatch.DueAt under Dispatch, whose task the caller enqueues.
	OutcomeDeferred Outcome = "deferred"
	// OutcomeEarly (begin): the attempt is not due; try again after Wait.
	OutcomeEarly Outcome = "early"
	// OutcomeRunFailed (begin, fail, redispatch, timeout): the run failed
	// with Code and Reason. The timeout script also sets Task and
	// StepStatus: the current step's, so its task can be deleted or its
	// execution cancelled.
	OutcomeRunFailed Outcome = "failed"
	// OutcomeCreated (create): the run was created; Dispatch is its first
	// step's, Task that dispatch's task ID.
	OutcomeCreated Outcome = "created"
	// OutcomeExists (create): the idempotency key had started run RunID
	// before; nothing written.
	OutcomeExists Outcome = "exists"
	// OutcomeNext (complete): the checkpoint is saved and Dispatch, the
	// next step, is due; Enqueued: the script created its task.
	OutcomeNext Outcome = "next"
	// OutcomeInline (complete with an inline token): the checkpoint is
	// saved and the next step, Dispatch, was begun by the script under the
	// inline token (no task was written for it); Started holds its attempt
	// (but Input and Earlier, which the caller has).
	OutcomeInline Outcome = "inline"
	// OutcomeRunSucceeded (complete, operate): that was the last step (of a
	// skip, for operate); the run succeeded.
	OutcomeRunSucceeded Outcome = "succeeded"
	// OutcomeFenced (complete, fail, release): the attempt no longer owned
	// its step (Why); nothing written.
	OutcomeFenced Outcome = "fenced"
	// OutcomeDone (complete, fail): this attempt's complete or failure was
	// applied before (its reply was lost); nothing written. RunStatus is the
	// run's status now; fail also sets Code, the run's failure code when it
	// failed.
	OutcomeDone Outcome = "done"
	// OutcomeRetry (fail): Dispatch is the scheduled next attempt (Name
	// unset: the failed step's); Enqueued: the script wrote its task.
	OutcomeRetry Outcome = "retry"
	// OutcomeReleased (release): the attempt resumes as Dispatch; Enqueued:
	// the script wrote its task.
	OutcomeReleased Outcome = "released"
	// OutcomeCancelled (cancel): this call cancelled the run; Task and
	// StepStatus are the current step's task ID and its status before.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeAlreadyCancelled (cancel, word "already"): the run had been
	// cancelled before (RunStatus StatusCancelled), or, for a cancel with
	// compensation, set compensating (StatusCompensating).
	OutcomeAlreadyCancelled Outcome = "already"
	// OutcomeDispatch (redispatch's "redispatched", repair's "repair",
	// operate, restore): enqueue Dispatch, of a run of Workflow. Kind names
	// the repair (crashed_attempt with Crashes, task_missing,
	// retry_task_missing, wake_task_missing, task_archived,
	// stalled_delivery); "" for an operator action. Enqueued (repair): the
	// script wrote the task itself.
	OutcomeDispatch Outcome = "dispatch"
	// OutcomeAttention (redispatch, repair): the run was repaired too
	// often and is left to an operator (Reason).
	OutcomeAttention Outcome = "attention"
	// OutcomeNoop (redispatch, repair, timeout): nothing to do (Reason).
	OutcomeNoop Outcome = "noop"
	// OutcomeRecheck (repair's check, Store.CheckTasks): the step was
	// written within the grace, its task may be on its way; look again at
	// RecheckAt.
	OutcomeRecheck Outcome = "recheck"
	// OutcomeCrashed (repair's check, Store.CheckTasks): the step runs
	// under an expired fence: its worker died (Store.Redispatch).
	OutcomeCrashed Outcome = "crashed"
	// outcomeRefused (operate, restore, signal): the action does not apply
	// to the run in its state (Reason); nothing written.
	outcomeRefused Outcome = "refused"

	// Signals and timers.

	// OutcomeWait (begin): the step is an await or a sleep (StepKind): it
	// has no body; start its wait (Store.Wait, WaitStart).
	OutcomeWait Outcome = "wait"
	// OutcomeWake (begin): the wake-up of a waiting step (StepKind) is due:
	// Store.Wait, WaitWake.
	OutcomeWake Outcome = "wake"
	// OutcomeWaiting: the run waits, holding no worker slot, for
	// WaitReason. From create, operate and restore: the run waits in the
	// line of one of its gates (an ordering key or its workflow's
	// max_running), at Position from 1; it has no task until it is
	// admitted, and then the script that admits it writes one. From wait:
	// the step waits for its signal or timer until Dispatch.DueAt; Dispatch
	// is its wake-up; Enqueued: the script wrote its task.
	OutcomeWaiting Outcome = "waiting"
	// OutcomeDelivered (signal): the signal completed the waiting await
	// Step; Dispatch, of a run of Workflow, is the next step's (enqueue it);
	// Task is the await's wake-up task, now stale.
	OutcomeDelivered Outcome = "delivered"
	// OutcomeQueued (signal): the signal is kept in the run's mailbox,
	// which now holds Pending signals.
	OutcomeQueued Outcome = "queued"
	// OutcomeDuplicate (signal): the run received a signal with this ID
	// before; nothing written.
	OutcomeDuplicate Outcome = "duplicate"
	// outcomeMailboxFull (signal, word "full"): the run's mailbox holds
	// Pending signals, its maximum; nothing written.
	outcomeMailboxFull Outcome = "full"
	// OutcomeSnoozed: the step runs again after its snooze (snooze.lua);
	// Dispatch is its next visit (same attempt, the next gen, DueAt).
	OutcomeSnoozed Outcome = "snoozed"
	// OutcomeGoto: the run continues at an earlier step, or this one
	// (goto.lua); Dispatch is the target's new attempt, due now.
	OutcomeGoto Outcome = "goto"

	// Compensations and step groups (sagas, lua/lib/fail_run.lua).

	// OutcomeCompensated (complete of a compensation): the run's
	// compensations are done; it ended StatusCompensated, keeping the
	// failure Code that started them.
	OutcomeCompensated Outcome = "compensated"
	// OutcomeCompensating (cancel with compensation): the run was cancelled
	// and compensates now; the script wrote its first compensation's task.
	// Task and StepStatus are the cancelled step's, as for
	// OutcomeCancelled.
	OutcomeCompensating Outcome = "compensating"
)

// What follows a run's failure (RunFailure.Then of OutcomeRunFailed).
const (
	// ThenFailed: the run failed (the word is "").
	ThenFailed = ""
	// ThenCompensating: the run is compensating; the script wrote its
	// first compensation's task.
	ThenCompensating = "compensating"
	// ThenCompensated: the run compensated at once (nothing to undo).
	ThenCompensated = "compensated"
	// ThenContinued: an optional group was rolled back with nothing to
	// undo; the run goes on after it (the script wrote the next step's
	// task).
	ThenContinued = "continued"
	// ThenSucceeded: that group was the run's end: the run succeeded.
	ThenSucceeded = "succeeded"
)

// Dispatch names the task that must exist for a step to make progress.
type Dispatch struct {
	Index   int
	Name    string
	Attempt int
	Gen     int
	DueAt   time.Time // zero: due now
	Timeout time.Duration
}

// Next is the dispatch a run goes on with: the task that must exist for it
// to make progress.
type Next struct {
	// Dispatch names the task.
	Dispatch *Dispatch
	// Enqueued: the script wrote Dispatch's task itself; otherwise the
	// caller enqueues it (asynq's task ID makes a second enqueue a no-op).
	Enqueued bool
}

// RunFailure is a run's failure, and what follows it.
type RunFailure struct {
	// Code is the failure code (a Code constant).
	Code   string
	Reason string
	// Then says what follows the failure: one of the Then constants;
	// ThenFailed ("") when the run failed.
	Then string
}

// GateWait is a waiting run's place in the line of one of its gates (an
// ordering key or its workflow's max_running): it has no task until it is
// admitted, and then the script that admits it writes one.
type GateWait struct {
	// WaitReason is the gate: WaitOrderingKey or WaitWorkflowLimit.
	WaitReason WaitReason
	// Position is the run's place in the gate's line, from 1.
	Position int
}

// accept returns d, or an error when err is set or when d's outcome is not
// one of those op answers.
func accept(op string, d decoded, err error, outcomes []Outcome) (decoded, error) {
	if err != nil {
		return decoded{}, err
	}
	if !slices.Contains(outcomes, d.Outcome) {
		return decoded{}, fmt.Errorf("%w: %s: outcome %q is not one it answers", ErrUnexpectedReply, op, d.Outcome)
	}
	return d, nil
}
