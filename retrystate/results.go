package retrystate

import (
	"fmt"
	"slices"
	"time"
)

// The typed results of the state operations: one per operation, holding
// its Outcome and only the fields its outcomes set. Each is made from the
// decoded reply (reply.go) by its operation's function below, which checks
// that the outcome is one the operation answers: any other is an error
// wrapping ErrUnexpectedReply.

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

// Attempts: begin, complete, fail, release.

// BeginResult is what Begin did. Its Outcome is one of:
//
//   - OutcomeOK: run the step body; Started holds the attempt.
//   - OutcomeGone: no such run; acknowledge the task.
//   - OutcomeEnded: the run had ended already, as RunStatus; acknowledge.
//   - OutcomeStale: the task is not the step's current dispatch;
//     acknowledge. Dispatch is the dispatch the run waits for (nil when
//     there is none, as while the step runs).
//   - OutcomeBusy: another delivery of this dispatch holds a live fence;
//     try again after Wait.
//   - OutcomeEarly: the attempt is not due; try again after Wait.
//   - OutcomeDeferred: the step's circuit breaker is open (or another
//     attempt probes it): the attempt waits, spending no budget, until
//     Dispatch.DueAt under Dispatch, whose task the caller enqueues.
//   - OutcomeRunFailed: the run failed instead (its deadline or iteration
//     ceiling passed): RunFailure.
//   - OutcomeWait: the step is an await or a sleep (StepKind): it has no
//     body; start its wait (Store.Wait, WaitStart).
//   - OutcomeWake: the wake-up of a waiting step (StepKind) is due:
//     Store.Wait, WaitWake.
type BeginResult struct {
	Outcome Outcome
	// Started is the attempt begun or resumed (OutcomeOK).
	Started *Started
	// RunStatus is the status of the run that ended (OutcomeEnded).
	RunStatus RunStatus
	// Dispatch is the dispatch the run waits for (OutcomeStale, nil for
	// none) or the deferred attempt's (OutcomeDeferred).
	Dispatch *Dispatch
	// Wait is how long to wait before trying again (OutcomeBusy,
	// OutcomeEarly).
	Wait time.Duration
	// RunFailure is the run's failure (OutcomeRunFailed).
	RunFailure
	// StepKind is the kind of the waiting step (OutcomeWait, OutcomeWake).
	StepKind StepKind
	// Trace is the run's trace context (OutcomeWait and OutcomeWake of a
	// begin with BeginParams.Trace; an attempt's is Started.Trace).
	Trace string
}

var beginOutcomes = []Outcome{OutcomeOK, OutcomeGone, OutcomeEnded, OutcomeStale, OutcomeBusy, OutcomeEarly,
	OutcomeDeferred, OutcomeRunFailed, OutcomeWait, OutcomeWake}

func beginResult(d decoded, err error) (BeginResult, error) {
	if d, err = accept("begin", d, err, beginOutcomes); err != nil {
		return BeginResult{}, err
	}
	return BeginResult{Outcome: d.Outcome, Started: d.Started, RunStatus: d.RunStatus, Dispatch: d.Dispatch,
		Wait: d.Wait, RunFailure: d.failure(), StepKind: d.StepKind, Trace: d.Trace}, nil
}

// CompleteResult is what Complete did. Its Outcome is one of:
//
//   - OutcomeNext: the checkpoint is saved and Next.Dispatch, the next step,
//     is due (Next.Enqueued: the script wrote its task).
//   - OutcomeInline (CompleteParams.InlineToken): the checkpoint is saved
//     and the next step, Next.Dispatch, was begun by the script under the
//     inline token (no task was written for it); Started holds its attempt
//     (but Input and Earlier, which the caller has).
//   - OutcomeRunSucceeded: that was the last step; the run succeeded.
//   - OutcomeFenced: the attempt no longer owned its step (Why); nothing
//     written.
//   - OutcomeDone: this attempt's complete was applied before (its reply
//     was lost); nothing written. RunStatus is the run's status now.
//
// A compensation's complete (lua/compdone.lua) also answers:
//
//   - OutcomeCompensated: the run's compensations are done; it ended
//     StatusCompensated, keeping the failure code that started them
//     (RunFailure.Code, the only field of RunFailure set).
//   - OutcomeRunFailed: the compensation ended a required group's
//     rollback: the run failed (RunFailure).
//
// (The next compensation, or the step after a rolled-back optional group,
// is OutcomeNext, its task written by the script.)
type CompleteResult struct {
	Outcome Outcome
	// Next is the next step's dispatch (OutcomeNext; Dispatch also for
	// OutcomeInline).
	Next
	// Started is the attempt of the next step, begun inline
	// (OutcomeInline).
	Started *Started
	// Why the attempt no longer owns its step (OutcomeFenced).
	Why string
	// RunStatus is the run's status (OutcomeDone).
	RunStatus RunStatus
	// RunFailure is the run's failure (OutcomeRunFailed; its Code for
	// OutcomeCompensated).
	RunFailure
}

var completeOutcomes = []Outcome{OutcomeNext, OutcomeInline, OutcomeRunSucceeded, OutcomeFenced, OutcomeDone,
	OutcomeCompensated, OutcomeRunFailed}

func completeResult(d decoded, err error) (CompleteResult, error) {
	if d, err = accept("complete", d, err, completeOutcomes); err != nil {
		return CompleteResult{}, err
	}
	return CompleteResult{Outcome: d.Outcome, Next: d.next(), Started: d.Started, Why: d.Why, RunStatus: d.RunStatus,
		RunFailure: d.failure()}, nil
}

// FailResult is what Fail did. Its Outcome is one of:
//
//   - OutcomeRetry: Next is the scheduled next attempt (Dispatch.Name
//     unset: the failed step's; Enqueued: the script wrote its task).
//   - OutcomeRunFailed: the run failed (RunFailure).
//   - OutcomeFenced: the attempt no longer owned its step (Why); nothing
//     written.
//   - OutcomeDone: this attempt's failure was applied before (its reply
//     was lost); nothing written. RunStatus is the run's status now, and
//     RunFailure.Code the run's failure code when it failed.
type FailResult struct {
	Outcome Outcome
	// Next is the next attempt's dispatch (OutcomeRetry).
	Next
	// RunFailure is the run's failure (OutcomeRunFailed; only its Code for
	// OutcomeDone).
	RunFailure
	// Why the attempt no longer owns its step (OutcomeFenced).
	Why string
	// RunStatus is the run's status (OutcomeDone).
	RunStatus RunStatus
}

var failOutcomes = []Outcome{OutcomeRetry, OutcomeRunFailed, OutcomeFenced, OutcomeDone}

func failResult(d decoded, err error) (FailResult, error) {
	if d, err = accept("fail", d, err, failOutcomes); err != nil {
		return FailResult{}, err
	}
	return FailResult{Outcome: d.Outcome, Next: d.next(), RunFailure: d.failure(), Why: d.Why,
		RunStatus: d.RunStatus}, nil
}

// ReleaseResult is what Release did. Its Outcome is one of:
//
//   - OutcomeReleased: the attempt resumes as Next.Dispatch (Next.Enqueued:
//     the script wrote its task).
//   - OutcomeFenced: the attempt no longer owned its step (Why); nothing
//     written.
type ReleaseResult struct {
	Outcome Outcome
	// Next is the resumed attempt's dispatch (OutcomeReleased).
	Next
	// Why the attempt no longer owns its step (OutcomeFenced).
	Why string
}

var releaseOutcomes = []Outcome{OutcomeReleased, OutcomeFenced}

func releaseResult(d decoded, err error) (ReleaseResult, error) {
	if d, err = accept("release", d, err, releaseOutcomes); err != nil {
		return ReleaseResult{}, err
	}
	return ReleaseResult{Outcome: d.Outcome, Next: d.next(), Why: d.Why}, nil
}

// Runs: create, cancel, operate, restore, expire.

// CreateResult is what CreateRun did. Its Outcome is one of:
//
//   - OutcomeCreated: run RunID was created; Next is its first step's
//     dispatch (Enqueued when the script wrote its task,
//     NewRun.FirstTask), Task that dispatch's task ID.
//   - OutcomeWaiting: run RunID was created and waits, holding no worker
//     slot, in the line of one of its gates (GateWait).
//   - OutcomeExists: the idempotency key had started run RunID before;
//     nothing written.
//   - OutcomeStale: the definition version (NewRun.Def) is not the
//     published one, Published ("" when its template is missing); nothing
//     written.
type CreateResult struct {
	Outcome Outcome
	// RunID is the run created (OutcomeCreated, OutcomeWaiting) or the one
	// the idempotency key started (OutcomeExists).
	RunID string
	// Next is the first step's dispatch (OutcomeCreated).
	Next
	// Task is the first step's task ID (OutcomeCreated).
	Task string
	// GateWait is the run's place in its gate's line (OutcomeWaiting).
	GateWait
	// Published is the published definition version (OutcomeStale).
	Published string
}

var createOutcomes = []Outcome{OutcomeCreated, OutcomeWaiting, OutcomeExists, OutcomeStale}

func createResult(d decoded, err error) (CreateResult, error) {
	if d, err = accept("create", d, err, createOutcomes); err != nil {
		return CreateResult{}, err
	}
	return CreateResult{Outcome: d.Outcome, RunID: d.RunID, Next: d.next(), Task: d.Task, GateWait: d.gateWait(),
		Published: d.Reason}, nil
}

// CancelResult is what Cancel did. Its Outcome is one of:
//
//   - OutcomeCancelled: this call cancelled the run; Task and StepStatus
//     are the current step's task ID and its status before.
//   - OutcomeCompensating (CancelParams.Compensate): the run was cancelled
//     and compensates now; the script wrote its first compensation's task.
//     Task and StepStatus are the cancelled step's, as for
//     OutcomeCancelled.
//   - OutcomeAlreadyCancelled: the run had been cancelled before
//     (RunStatus StatusCancelled), or, for a cancel with compensation, set
//     compensating (StatusCompensating).
//
// (A run that ended otherwise, or that the cancel does not apply to, is an
// error: see Cancel.)
type CancelResult struct {
	Outcome Outcome
	// Task and StepStatus are the current step's task ID and its status
	// before the cancel (OutcomeCancelled, OutcomeCompensating).
	Task       string
	StepStatus StepStatus
	// RunStatus is the run's status (OutcomeAlreadyCancelled).
	RunStatus RunStatus
}

var cancelOutcomes = []Outcome{OutcomeCancelled, OutcomeCompensating, OutcomeAlreadyCancelled}

func cancelResult(d decoded, err error) (CancelResult, error) {
	if d, err = accept("cancel", d, err, cancelOutcomes); err != nil {
		return CancelResult{}, err
	}
	return CancelResult{Outcome: d.Outcome, Task: d.Task, StepStatus: d.StepStatus, RunStatus: d.RunStatus}, nil
}

// OperateResult is what Operate did. Its Outcome is one of:
//
//   - OutcomeDispatch: the run goes on with Dispatch, of a run of
//     Workflow: enqueue it.
//   - OutcomeRunSucceeded: that was a skip of the last step: the run
//     succeeded.
//   - OutcomeWaiting: the run waits, holding no worker slot, in the line
//     of one of its gates (GateWait).
//
// (An action that does not apply to the run is an error: see Operate.)
type OperateResult struct {
	Outcome Outcome
	// Dispatch is the task to enqueue, of a run of Workflow
	// (OutcomeDispatch).
	Dispatch *Dispatch
	Workflow string
	// GateWait is the run's place in its gate's line (OutcomeWaiting).
	GateWait
}

var operateOutcomes = []Outcome{OutcomeDispatch, OutcomeRunSucceeded, OutcomeWaiting}

func operateResult(op string, d decoded, err error) (OperateResult, error) {
	if d, err = accept(op, d, err, operateOutcomes); err != nil {
		return OperateResult{}, err
	}
	return OperateResult{Outcome: d.Outcome, Dispatch: d.Dispatch, Workflow: d.Workflow, GateWait: d.gateWait()}, nil
}

// RestoreResult is what Restore did: as OperateResult, whose fields it has,
// but for OutcomeRunSucceeded (a restored run has a step to run). Its
// Outcome is one of:
//
//   - OutcomeDispatch: the run goes on with Dispatch, of a run of
//     Workflow: enqueue it.
//   - OutcomeWaiting: the run waits, holding no worker slot, in the line
//     of one of its gates (GateWait).
//
// (A restore that does not apply to the run or the step is an error: see
// Restore.)
type RestoreResult struct {
	Outcome Outcome
	// Dispatch is the task to enqueue, of a run of Workflow
	// (OutcomeDispatch).
	Dispatch *Dispatch
	Workflow string
	// GateWait is the run's place in its gate's line (OutcomeWaiting).
	GateWait
}

var restoreOutcomes = []Outcome{OutcomeDispatch, OutcomeWaiting}

func restoreResult(d decoded, err error) (RestoreResult, error) {
	if d, err = accept(ActionRestore, d, err, restoreOutcomes); err != nil {
		return RestoreResult{}, err
	}
	return RestoreResult{Outcome: d.Outcome, Dispatch: d.Dispatch, Workflow: d.Workflow, GateWait: d.gateWait()}, nil
}

// ExpireResult is what ExpireDeadline did. Its Outcome is one of:
//
//   - OutcomeRunFailed: the run failed with CodeRunTimeout (RunFailure;
//     Kind "deadline"); Task and StepStatus are the current step's task ID
//     and its status before, so its task can be deleted or its execution
//     cancelled.
//   - OutcomeNoop: nothing to do (Reason).
type ExpireResult struct {
	Outcome Outcome
	// Kind names the repair, "deadline" (OutcomeRunFailed).
	Kind string
	// RunFailure is the run's failure (OutcomeRunFailed).
	RunFailure
	// Task and StepStatus are the current step's task ID and its status
	// before (OutcomeRunFailed).
	Task       string
	StepStatus StepStatus
	// Reason says why nothing was done (OutcomeNoop).
	Reason string
}

var expireOutcomes = []Outcome{OutcomeRunFailed, OutcomeNoop}

func expireResult(d decoded, err error) (ExpireResult, error) {
	if d, err = accept("expire deadline", d, err, expireOutcomes); err != nil {
		return ExpireResult{}, err
	}
	r := ExpireResult{Outcome: d.Outcome, Kind: d.Kind, RunFailure: d.failure(), Task: d.Task,
		StepStatus: d.StepStatus}
	if d.Outcome == OutcomeNoop {
		r.Reason = d.Reason // (a failure's reason is RunFailure.Reason)
	}
	return r, nil
}

// Repairs: redispatch, repair, check.

// RedispatchResult is what Redispatch did. Its Outcome is one of:
//
//   - OutcomeDispatch: the crash was counted (Crashes, on the step) and the
//     attempt resumes as Dispatch, of a run of Workflow: enqueue it.
//   - OutcomeRunFailed: the crash spent the step's crash budget: the run
//     failed (RunFailure).
//   - OutcomeAttention: the run was repaired too often and is left to an
//     operator (Reason).
//   - OutcomeNoop: nothing to do (Reason).
type RedispatchResult struct {
	Outcome Outcome
	// Kind names the repair, "crashed_attempt" (OutcomeDispatch,
	// OutcomeRunFailed, OutcomeAttention).
	Kind string
	// Dispatch is the resumed attempt's, of a run of Workflow
	// (OutcomeDispatch).
	Dispatch *Dispatch
	Workflow string
	// Crashes counted on the step (OutcomeDispatch).
	Crashes int
	// RunFailure is the run's failure (OutcomeRunFailed).
	RunFailure
	// Reason says why the run needs attention (OutcomeAttention) or why
	// nothing was done (OutcomeNoop).
	Reason string
}

var redispatchOutcomes = []Outcome{OutcomeDispatch, OutcomeRunFailed, OutcomeAttention, OutcomeNoop}

func redispatchResult(d decoded, err error) (RedispatchResult, error) {
	if d, err = accept("redispatch", d, err, redispatchOutcomes); err != nil {
		return RedispatchResult{}, err
	}
	r := RedispatchResult{Outcome: d.Outcome, Kind: d.Kind, Dispatch: d.Dispatch, Workflow: d.Workflow,
		Crashes: d.Crashes, RunFailure: d.failure()}
	if d.Outcome != OutcomeRunFailed {
		r.Reason = d.Reason // (a failure's reason is RunFailure.Reason)
	}
	return r, nil
}

// RepairResult is what RepairTask did. Its Outcome is one of:
//
//   - OutcomeDispatch: the step got a task that will be delivered:
//     Next.Dispatch, of a run of Workflow, whose task the script wrote
//     (Next.Enqueued). Kind names the repair: task_missing,
//     retry_task_missing, wake_task_missing, task_archived or
//     stalled_delivery.
//   - OutcomeAttention: the run was repaired too often and is left to an
//     operator (Reason).
//   - OutcomeNoop: nothing to do (Reason).
type RepairResult struct {
	Outcome Outcome
	// Kind names the repair (OutcomeDispatch).
	Kind string
	// Next is the repaired step's dispatch, of a run of Workflow
	// (OutcomeDispatch).
	Next
	Workflow string
	// Reason says why the run needs attention (OutcomeAttention) or why
	// nothing was done (OutcomeNoop).
	Reason string
}

var repairOutcomes = []Outcome{OutcomeDispatch, OutcomeAttention, OutcomeNoop}

func repairResult(d decoded, err error) (RepairResult, error) {
	if d, err = accept("repair task", d, err, repairOutcomes); err != nil {
		return RepairResult{}, err
	}
	return RepairResult{Outcome: d.Outcome, Kind: d.Kind, Next: d.next(), Workflow: d.Workflow, Reason: d.Reason}, nil
}

// CheckResult is what CheckTasks found and did for one run: a
// RepairResult's outcomes, and two more:
//
//   - OutcomeRecheck: the step was written within the grace, its task may
//     be on its way; look again at RecheckAt.
//   - OutcomeCrashed: the step runs under an expired fence: its worker
//     died (Store.Redispatch).
type CheckResult struct {
	RepairResult
	// RecheckAt is when to look at the run again (OutcomeRecheck).
	RecheckAt time.Time
}

var checkOutcomes = append(slices.Clip(repairOutcomes), OutcomeRecheck, OutcomeCrashed)

func checkResult(d decoded, err error) (CheckResult, error) {
	if d, err = accept("check task", d, err, checkOutcomes); err != nil {
		return CheckResult{}, err
	}
	return CheckResult{RepairResult: RepairResult{Outcome: d.Outcome, Kind: d.Kind, Next: d.next(),
		Workflow: d.Workflow, Reason: d.Reason}, RecheckAt: d.RecheckAt}, nil
}

// Signals and timers: signal, wait, snooze, goto.

// SignalResult is what Signal did. Its Outcome is one of:
//
//   - OutcomeDelivered: the signal completed the waiting await Step;
//     Dispatch, of a run of Workflow, is the next step's (enqueue it);
//     Task is the await's wake-up task, now stale.
//   - OutcomeRunSucceeded: the signal completed the await Step, the run's
//     last step: the run succeeded. Task is as for OutcomeDelivered.
//   - OutcomeQueued: the signal is kept in the run's mailbox, which now
//     holds Pending signals.
//   - OutcomeDuplicate: the run received a signal with this ID before;
//     nothing written.
//
// (A signal no step awaits any more, to a full mailbox or to a run that
// ended is an error: see Signal.)
type SignalResult struct {
	Outcome Outcome
	// Step is the await the signal completed (OutcomeDelivered,
	// OutcomeRunSucceeded).
	Step string
	// Task is the await's wake-up task, now stale (OutcomeDelivered,
	// OutcomeRunSucceeded).
	Task string
	// Dispatch is the next step's, of a run of Workflow (OutcomeDelivered).
	Dispatch *Dispatch
	Workflow string
	// Pending is the number of signals in the run's mailbox
	// (OutcomeQueued).
	Pending int
}

var signalOutcomes = []Outcome{OutcomeDelivered, OutcomeRunSucceeded, OutcomeQueued, OutcomeDuplicate}

func signalResult(d decoded, err error) (SignalResult, error) {
	if d, err = accept("signal", d, err, signalOutcomes); err != nil {
		return SignalResult{}, err
	}
	return SignalResult{Outcome: d.Outcome, Step: d.Step, Task: d.Task, Dispatch: d.Dispatch, Workflow: d.Workflow,
		Pending: d.Pending}, nil
}

// WaitResult is what Wait did. Its Outcome is one of:
//
//   - OutcomeWaiting: the step waits for WaitReason (WaitSignal or
//     WaitTimer) until Next.Dispatch.DueAt; Next.Dispatch is its wake-up
//     (Next.Enqueued: the script wrote its task).
//   - OutcomeNext: the step succeeded (a sleep ended, a signal was in the
//     mailbox); Next.Dispatch is the next step's.
//   - OutcomeRunSucceeded: that was the last step; the run succeeded.
//   - OutcomeRunFailed: the run failed (an await timed out:
//     CodeSignalTimeout; RunFailure).
//   - OutcomeEarly: a wake-up before its time; try again after Wait.
//   - OutcomeNoop: the state moved on; nothing to do (Reason).
type WaitResult struct {
	Outcome Outcome
	// WaitReason is what the step waits for (OutcomeWaiting).
	WaitReason WaitReason
	// Next is the wake-up's dispatch (OutcomeWaiting) or the next step's
	// (OutcomeNext).
	Next
	// RunFailure is the run's failure (OutcomeRunFailed).
	RunFailure
	// Wait is how long to wait before trying again (OutcomeEarly).
	Wait time.Duration
	// Reason says why nothing was done (OutcomeNoop).
	Reason string
}

var waitOutcomes = []Outcome{OutcomeWaiting, OutcomeNext, OutcomeRunSucceeded, OutcomeRunFailed, OutcomeEarly,
	OutcomeNoop}

func waitResult(d decoded, err error) (WaitResult, error) {
	if d, err = accept("wait", d, err, waitOutcomes); err != nil {
		return WaitResult{}, err
	}
	r := WaitResult{Outcome: d.Outcome, WaitReason: d.WaitReason, Next: d.next(), RunFailure: d.failure(),
		Wait: d.Wait}
	if d.Outcome == OutcomeNoop {
		r.Reason = d.Reason
	}
	return r, nil
}

// SnoozeResult is what Snooze did. Its Outcome is one of:
//
//   - OutcomeSnoozed: the step runs again after its snooze; Next.Dispatch
//     is its next visit (the same attempt, the next gen, DueAt;
//     Next.Enqueued: the script wrote its task).
//   - OutcomeRunFailed: the visit would be due at or after the run's
//     deadline: the run failed (RunFailure, CodeRunTimeout).
//   - OutcomeFenced: the attempt no longer owned its step (Why); nothing
//     written.
//   - OutcomeDone: this snooze was applied before (its reply was lost);
//     nothing written. RunStatus is the run's status now.
type SnoozeResult struct {
	Outcome Outcome
	// Next is the next visit's dispatch (OutcomeSnoozed).
	Next
	// RunFailure is the run's failure (OutcomeRunFailed).
	RunFailure
	// Why the attempt no longer owns its step (OutcomeFenced).
	Why string
	// RunStatus is the run's status (OutcomeDone).
	RunStatus RunStatus
}

var snoozeOutcomes = []Outcome{OutcomeSnoozed, OutcomeRunFailed, OutcomeFenced, OutcomeDone}

func snoozeResult(d decoded, err error) (SnoozeResult, error) {
	if d, err = accept("snooze", d, err, snoozeOutcomes); err != nil {
		return SnoozeResult{}, err
	}
	return SnoozeResult{Outcome: d.Outcome, Next: d.next(), RunFailure: d.failure(), Why: d.Why,
		RunStatus: d.RunStatus}, nil
}

// GotoResult is what Goto did. Its Outcome is one of:
//
//   - OutcomeGoto: the run continues at the target: Next.Dispatch is its
//     new attempt, due now (Next.Enqueued: the script wrote its task).
//   - OutcomeRunFailed: the target is not this step or an earlier one: the
//     run failed (RunFailure, CodeInvalidGoto).
//   - OutcomeFenced: the attempt no longer owned its step (Why); nothing
//     written.
//   - OutcomeDone: this goto was applied before (its reply was lost);
//     nothing written. RunStatus is the run's status now.
type GotoResult struct {
	Outcome Outcome
	// Next is the target's new attempt (OutcomeGoto).
	Next
	// RunFailure is the run's failure (OutcomeRunFailed).
	RunFailure
	// Why the attempt no longer owns its step (OutcomeFenced).
	Why string
	// RunStatus is the run's status (OutcomeDone).
	RunStatus RunStatus
}

var gotoOutcomes = []Outcome{OutcomeGoto, OutcomeRunFailed, OutcomeFenced, OutcomeDone}

func gotoResult(d decoded, err error) (GotoResult, error) {
	if d, err = accept("goto", d, err, gotoOutcomes); err != nil {
		return GotoResult{}, err
	}
	return GotoResult{Outcome: d.Outcome, Next: d.next(), RunFailure: d.failure(), Why: d.Why,
		RunStatus: d.RunStatus}, nil
}
