package core

import (
	"context"
	"time"

	"github.com/cairnhq/cairn/retrystate"
)

// Observer is told what the engine, the reconciler and the client do, for
// metrics (package metrics implements it with Prometheus collectors). Its
// methods are called on the engine's hot path, from many goroutines at once:
// they must be safe for concurrent use, fast, and must not block or do I/O.
//
// The counts are of what this process did: with several workers, sum them.
// A run is "started" by the worker that begins its first attempt, however it
// was created; it "finishes" wherever its terminal transition happens (a
// worker, the reconciler, or the Client of an operator action that had an
// Observer). A recovered run that ends again is counted again.
//
// ctx is the context of the work that made the call: for a step attempt's
// calls it carries the attempt's span when the engine traces (see
// EngineConfig.TracerProvider), so an observer can tie what it records to
// the trace (a metrics exemplar, a log line). runID is the run's.
type Observer interface {
	// RunStarted: the first attempt of a run's first step began.
	RunStarted(ctx context.Context, runID, workflow string)
	// RunFinished: a run ended with status succeeded, failed, cancelled or
	// compensated; failureCode is its failure code (a Code* constant; for a
	// compensated run, the failure that started its compensations) or "".
	RunFinished(ctx context.Context, runID, workflow string, status RunStatus, failureCode string)
	// StepAttempt: a delivery of a step attempt ended with outcome (an
	// Outcome* constant). duration is how long the step body ran; zero for
	// outcomes where it did not run (crashed, ignored).
	StepAttempt(ctx context.Context, runID, workflow, step string, outcome AttemptOutcome, duration time.Duration)
	// RetryScheduled: a failed attempt's retry was scheduled after delay.
	RetryScheduled(ctx context.Context, runID, workflow, step string, delay time.Duration)
	// Repair: the reconciler made a repair of kind (crashed_attempt,
	// task_missing, retry_task_missing, task_archived, deadline, trimmed,
	// needs_attention; see Report.Repairs).
	Repair(kind string)
}

// AttemptOutcome is how a delivery of a step attempt ended, as reported to
// Observer.StepAttempt.
type AttemptOutcome = retrystate.AttemptOutcome

// Outcomes of a step attempt delivery, as reported to Observer.StepAttempt.
const (
	// OutcomeSucceeded: the step body returned a result and it was
	// checkpointed.
	OutcomeSucceeded = retrystate.AttemptSucceeded
	// OutcomeFailedTransient: the step failed and a retry was scheduled.
	OutcomeFailedTransient = retrystate.AttemptFailedTransient
	// OutcomeFailedPermanent: the step failed with a permanent error; the
	// run failed.
	OutcomeFailedPermanent = retrystate.AttemptFailedPermanent
	// OutcomeExhausted: the step failed transiently with no retry left (the
	// retry budget is spent, or the next attempt would pass the run's
	// deadline); the run failed.
	OutcomeExhausted = retrystate.AttemptExhausted
	// OutcomeCrashed: the delivery resumes an attempt whose worker died (the
	// crash is counted against the step's crash budget). The resumed
	// attempt reports its own outcome when it ends.
	OutcomeCrashed = retrystate.AttemptCrashed
	// OutcomeIgnored: a stale or duplicate delivery, or one of a finished
	// or unknown run, acknowledged without running the step.
	OutcomeIgnored = retrystate.AttemptIgnored
	// OutcomeDiscarded: the step body ran but the attempt no longer owned
	// its step (its fence expired or the run stopped): the result was
	// discarded.
	OutcomeDiscarded = retrystate.AttemptDiscarded
	// OutcomeInterrupted: the worker stopped the step because it could not
	// renew the attempt's fence (Redis unreachable) and handed the attempt
	// back; it resumes under a new dispatch, spending no budget.
	OutcomeInterrupted = retrystate.AttemptInterrupted
	// OutcomeDeferred: the step's circuit breaker was open (or another
	// attempt was probing it): the attempt was put off, spending no budget.
	OutcomeDeferred = retrystate.AttemptDeferred
	// OutcomeSnoozed: the step body asked to run again later (Snooze); the
	// same attempt runs again after the delay, spending no budget.
	OutcomeSnoozed = retrystate.AttemptSnoozed
	// OutcomeGoto: the step body asked to continue at this step or an
	// earlier one (Goto).
	OutcomeGoto = retrystate.AttemptGoto
)

// NopObserver is an Observer that does nothing; the default.
type NopObserver struct{}

// RunStarted does nothing.
func (NopObserver) RunStarted(context.Context, string, string) {}

// RunFinished does nothing.
func (NopObserver) RunFinished(context.Context, string, string, RunStatus, string) {}

// StepAttempt does nothing.
func (NopObserver) StepAttempt(context.Context, string, string, string, AttemptOutcome, time.Duration) {
}

// RetryScheduled does nothing.
func (NopObserver) RetryScheduled(context.Context, string, string, string, time.Duration) {}

// Repair does nothing.
func (NopObserver) Repair(string) {}

// OrNop returns o, or a NopObserver when o is nil.
func OrNop(o Observer) Observer {
	if o == nil {
		return NopObserver{}
	}
	return o
}

// FailedOutcome is the outcome of an attempt whose failure failed the run
// with code.
func FailedOutcome(code string) AttemptOutcome {
	if code == CodePermanentError {
		return OutcomeFailedPermanent
	}
	return OutcomeExhausted
}
