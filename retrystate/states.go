package retrystate

// The states a run and its steps go through, as the scripts write them (the
// Lua side spells them as string literals; TestLuaStatusLiterals checks that
// every literal the scripts write is one of the constants here, and that
// every constant is written). Package workflow re-exports these types and
// constants under the same names.

// RunStatus is the status of a run.
type RunStatus string

// Run statuses.
const (
	StatusPending   RunStatus = "pending"
	StatusRunning   RunStatus = "running"
	StatusSucceeded RunStatus = "succeeded"
	StatusFailed    RunStatus = "failed"
	StatusCancelled RunStatus = "cancelled"
	// StatusCompensating: the run failed for good (or was cancelled with
	// compensation) and runs the compensations of its succeeded steps,
	// last first; or it rolls back a step group.
	StatusCompensating RunStatus = "compensating"
	// StatusCompensated: every compensation ran; the run ended, keeping
	// its failure code and reason.
	StatusCompensated RunStatus = "compensated"
)

// RunStatuses lists every run status, in the order a run meets them.
var RunStatuses = []RunStatus{StatusPending, StatusRunning, StatusSucceeded, StatusFailed, StatusCancelled,
	StatusCompensating, StatusCompensated}

// Terminal reports whether a run in status s has ended (succeeded, failed,
// cancelled or compensated).
func (s RunStatus) Terminal() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCancelled || s == StatusCompensated
}

// Valid reports whether s is one of the run statuses.
func (s RunStatus) Valid() bool {
	switch s {
	case StatusPending, StatusRunning, StatusSucceeded, StatusFailed, StatusCancelled, StatusCompensating,
		StatusCompensated:
		return true
	}
	return false
}

// StepStatus is the status of a step of a run.
type StepStatus string

// Step statuses. A step waiting for a scheduled retry is pending with
// RetryState RetryScheduled; an await or a sleep that waits (for its signal,
// for its time) is StepWaiting.
const (
	StepPending   StepStatus = "pending"
	StepRunning   StepStatus = "running"
	StepSucceeded StepStatus = "succeeded"
	StepFailed    StepStatus = "failed"
	StepSkipped   StepStatus = "skipped"
	StepCancelled StepStatus = "cancelled"
	// StepWaiting: an await waits for its signal, or a sleep for its time,
	// holding no worker slot.
	StepWaiting StepStatus = "waiting"
	// StepCompensated: the step succeeded and its compensation undid it.
	StepCompensated StepStatus = "compensated"
	// StepRolledBack: the step belongs to an optional group that was
	// rolled back; the run went on after the group.
	StepRolledBack StepStatus = "rolled_back"
)

// StepKind is what a step does: run a body (""), await a signal, or sleep.
type StepKind string

// Step kinds.
const (
	// KindBody: the step runs its body (every step before signals and
	// timers).
	KindBody StepKind = ""
	// KindAwait: the step waits for a named signal, at most its timeout.
	KindAwait StepKind = "await"
	// KindSleep: the step sleeps for a fixed duration.
	KindSleep StepKind = "sleep"
	// KindSleepUntil: the step sleeps until a time the engine computes
	// from the run when the step is reached.
	KindSleepUntil StepKind = "sleep_until"
)

// RetryState is where a step stands with its retries.
type RetryState string

// Retry states of a step.
const (
	RetryNone      RetryState = "none"
	RetryScheduled RetryState = "scheduled"
	RetryExhausted RetryState = "exhausted"
)

// AttemptOutcome is how one delivery of a step attempt ended, as the engine
// reports it to its observer (workflow.Observer.StepAttempt). It is not
// stored: the journal records attempts by event type.
type AttemptOutcome string

// Outcomes of a step attempt delivery.
const (
	// AttemptSucceeded: the step body returned a result and it was
	// checkpointed.
	AttemptSucceeded AttemptOutcome = "succeeded"
	// AttemptFailedTransient: the step failed and a retry was scheduled.
	AttemptFailedTransient AttemptOutcome = "failed_transient"
	// AttemptFailedPermanent: the step failed with a permanent error; the
	// run failed.
	AttemptFailedPermanent AttemptOutcome = "failed_permanent"
	// AttemptExhausted: the step failed transiently with no retry left (the
	// retry budget is spent, or the next attempt would pass the run's
	// deadline); the run failed.
	AttemptExhausted AttemptOutcome = "exhausted"
	// AttemptCrashed: the delivery resumes an attempt whose worker died (the
	// crash is counted against the step's crash budget). The resumed
	// attempt reports its own outcome when it ends.
	AttemptCrashed AttemptOutcome = "crashed"
	// AttemptIgnored: a stale or duplicate delivery, or one of a finished
	// or unknown run, acknowledged without running the step.
	AttemptIgnored AttemptOutcome = "ignored"
	// AttemptDiscarded: the step body ran but the attempt no longer owned
	// its step (its fence expired or the run stopped): the result was
	// discarded.
	AttemptDiscarded AttemptOutcome = "discarded"
	// AttemptInterrupted: the worker stopped the step because it could not
	// renew the attempt's fence (Redis unreachable) and handed the attempt
	// back; it resumes under a new dispatch, spending no budget.
	AttemptInterrupted AttemptOutcome = "interrupted"
	// AttemptDeferred: the step's circuit breaker was open (or another
	// attempt was probing it): the attempt was put off, spending no budget.
	AttemptDeferred AttemptOutcome = "deferred"
	// AttemptSnoozed: the step body asked to run again later (Snooze); the
	// same attempt runs again after the delay, spending no budget.
	AttemptSnoozed AttemptOutcome = "snoozed"
	// AttemptGoto: the step body asked to continue at a step (Goto).
	AttemptGoto AttemptOutcome = "goto"
)

// WaitReason is what a run or step waits for while it holds no worker slot.
// Each reason has an index of the runs waiting for it, idx:waiting:<reason>
// (a sorted set of run IDs by the time they began to wait), which metrics
// count and operators list.
type WaitReason string

// Wait reasons.
const (
	// WaitOrderingKey: the run waits in its ordering key's line.
	WaitOrderingKey WaitReason = "ordering_key"
	// WaitWorkflowLimit: the run waits for a slot under its workflow's
	// max_running.
	WaitWorkflowLimit WaitReason = "workflow_limit"
	// WaitSignal: the run's current step awaits a signal.
	WaitSignal WaitReason = "signal"
	// WaitTimer: the run's current step sleeps until its timer fires.
	WaitTimer WaitReason = "timer"
)

// waitReasons lists every wait reason.
var waitReasons = []WaitReason{WaitOrderingKey, WaitWorkflowLimit, WaitSignal, WaitTimer}
