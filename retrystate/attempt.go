package retrystate

import (
	"context"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/tasks"
)

// The operations of a step attempt, as the engine runs it: Begin, then
// Complete, Fail or Release (and Renew while it runs), each fenced by the
// attempt's token. (Snooze and Goto, which end an attempt as a loop asks,
// are in signals.go.)

// BeginParams identifies a delivery of a step attempt's task.
type BeginParams struct {
	RunID     string
	Index     int
	TaskID    string
	Token     string // fence token, unique to this delivery
	FenceTTL  time.Duration
	Retention time.Duration
	Now       time.Time
	// Trace asks for the trace context stored with the run
	// (Started.Trace); a caller that does not trace leaves it unread.
	Trace bool
	// Worker, when set, is the identity of the worker that begins the
	// attempt, recorded with it (the journal's attempt_started, detail
	// "worker").
	Worker string
}

// Checkpoint is the stored output of a step.
type Checkpoint struct {
	Name   string
	Output string // JSON; "" for a step that produced none (skipped)
}

// Begin starts an attempt for a delivered task (OutcomeOK, with Started),
// or tells the caller why not (see the Outcome constants of begin).
func (s *Store) Begin(ctx context.Context, a BeginParams) (BeginResult, error) {
	args := beginLua{runArgs: s.runArgs(a.RunID, a.Now), Task: a.TaskID, Token: a.Token,
		FenceTTL: a.FenceTTL.Milliseconds(), Index: a.Index, Retention: a.Retention.Milliseconds(), Worker: a.Worker}
	if a.Trace {
		args.Trace = "1"
	}
	res, err := s.runBatched(ctx, s.scripts.begin, args)
	if err != nil {
		return BeginResult{}, fmt.Errorf("begin: %w", err)
	}
	return beginResult(decodeBegin(res, a.Index, a.Trace))
}

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
//   - OutcomePaused: the run is paused (Store.Pause): the dispatch is
//     parked for the resume to write again; acknowledge.
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
	OutcomeDeferred, OutcomeRunFailed, OutcomeWait, OutcomeWake, OutcomePaused}

func beginResult(d decoded, err error) (BeginResult, error) {
	if d, err = accept("begin", d, err, beginOutcomes); err != nil {
		return BeginResult{}, err
	}
	return BeginResult{Outcome: d.Outcome, Started: d.Started, RunStatus: d.RunStatus, Dispatch: d.Dispatch,
		Wait: d.Wait, RunFailure: d.failure(), StepKind: d.StepKind, Trace: d.Trace}, nil
}

// Started is an attempt a begin started or resumed.
type Started struct {
	Attempt int
	// Crashes counted on the step, when Crashed.
	Crashes int
	// Crashed: this begin resumed an attempt whose worker died.
	Crashed bool
	// Snoozed: this begin is the next visit of an attempt whose body
	// snoozed (snooze.lua): not a new attempt.
	Snoozed bool
	Input   string
	// Policy is the step's effective policy (JSON).
	Policy string
	// Used is the number of attempts of the current budget, this one
	// included.
	Used int
	// Deadline is the run's deadline; zero: none.
	Deadline time.Time
	// Earlier holds the outputs of the steps before this one, in order.
	Earlier []Checkpoint
	// Next is the dispatch the next step will get when this one completes
	// (nil for the last step), so its task can be prepared in advance.
	Next *Dispatch
	// Compensation is set for a compensation's attempt: the step it
	// compensates (also the last of Earlier) and the run's failure.
	Compensation *CompensationOf
	// Trace is the trace context stored with the run (NewRun.Trace), "" for
	// none.
	Trace string
}

// CompensationOf is what a compensation's attempt undoes, and why.
type CompensationOf struct {
	Step          string
	Output        string
	FailureCode   string
	FailureReason string
}

// CompleteParams checkpoints a step's output.
type CompleteParams struct {
	RunID     string
	Index     int
	Token     string
	Output    string // JSON
	Retention time.Duration
	Now       time.Time
	// NextTaskID and NextMessage, when set, are the task ID and the asynq
	// message (tasks.AsynqMessage) of the next step's first dispatch, as
	// Started.Next predicted it: the script creates that task with the
	// checkpoint when the prediction holds.
	NextTaskID  string
	NextMessage []byte
	// InlineToken, when set, asks the script to begin the next step itself
	// under this fence token, for FenceTTL, instead of writing its task
	// (inline continuation): OutcomeInline when it did.
	InlineToken string
	FenceTTL    time.Duration
	// Worker is BeginParams.Worker for the step begun inline.
	Worker string
	// Ack, when set, is the acknowledgement of the asynq task whose
	// delivery ran the attempt (Cairn's own dequeue, tasks.DoneArgs): the
	// script acknowledges it with the checkpoint when the outcome ends that
	// delivery's work (CompleteResult.Acked), one round trip for both.
	Ack *tasks.DoneArgs
}

// Complete stores a step's output, clears its retry metadata and advances
// the run; fenced by the attempt's token.
func (s *Store) Complete(ctx context.Context, a CompleteParams) (CompleteResult, error) {
	c := checkpointLua{runArgs: s.runArgs(a.RunID, a.Now),
		NextTask: s.keys.asynqTask(a.NextTaskID), Pending: s.keys.asynqPending(), Token: a.Token, Index: a.Index,
		Output: a.Output, Retention: a.Retention.Milliseconds(), NextID: a.NextTaskID, NextMsg: a.NextMessage,
		InlineToken: a.InlineToken, InlineTTL: a.FenceTTL.Milliseconds()}
	var (
		res []string
		err error
	)
	if IsCompensation(a.Index) {
		// A compensation's complete goes on with the saga (compdone.lua);
		// complete.lua's hot path knows nothing of sagas. (Its task is
		// acknowledged by the caller.)
		res, err = s.runBatched(ctx, s.scripts.compdone, c)
		if err != nil {
			return CompleteResult{}, fmt.Errorf("complete: %w", err)
		}
		return completeResult(decodeCompDone(res))
	}
	l := withAck(c, a.Ack)
	if a.InlineToken != "" {
		l.InlineWorker = a.Worker
	}
	res, err = s.runBatched(ctx, s.scripts.complete, l)
	if err != nil {
		return CompleteResult{}, fmt.Errorf("complete: %w", err)
	}
	return completeResult(decodeComplete(res))
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
	// Acked: the script acknowledged CompleteParams.Ack's task with the
	// checkpoint (or found it no longer active): its caller must not
	// acknowledge it again. Set for OutcomeRunSucceeded, OutcomeFenced,
	// OutcomeNext with Enqueued and, without an InlineToken, OutcomeDone:
	// the outcomes after which the delivery has nothing left to do.
	Acked bool
}

var completeOutcomes = []Outcome{OutcomeNext, OutcomeInline, OutcomeRunSucceeded, OutcomeFenced, OutcomeDone,
	OutcomeCompensated, OutcomeRunFailed}

func completeResult(d decoded, err error) (CompleteResult, error) {
	if d, err = accept("complete", d, err, completeOutcomes); err != nil {
		return CompleteResult{}, err
	}
	return CompleteResult{Outcome: d.Outcome, Next: d.next(), Started: d.Started, Why: d.Why, RunStatus: d.RunStatus,
		RunFailure: d.failure(), Acked: d.Acked}, nil
}

// FailParams records a failed attempt.
type FailParams struct {
	RunID     string
	Index     int
	Token     string
	Error     string
	Class     string // ClassTransient or ClassPermanent
	Code      string // the error's code, "" for none
	Delay     time.Duration
	Retention time.Duration
	Now       time.Time
	// RetryTaskID and RetryMessage, when set, are the task ID and the
	// asynq message (tasks.AsynqMessage) the caller expects the retry to
	// get: the script writes that task with the retry when the prediction
	// holds.
	RetryTaskID  string
	RetryMessage []byte
	// Ack, as CompleteParams.Ack: the script acknowledges the delivery's
	// task with the failure's write (FailResult.Acked), unless the caller
	// is left to write the retry's task.
	Ack *tasks.DoneArgs
}

// Fail records a failed attempt: for a transient error with budget left it
// schedules the next attempt after Delay; otherwise the run fails, needing
// attention. Fenced by the attempt's token.
func (s *Store) Fail(ctx context.Context, a FailParams) (FailResult, error) {
	res, err := s.run(ctx, s.scripts.fail, failLua{runArgs: s.runArgs(a.RunID, a.Now),
		RetryTask: s.keys.asynqTask(a.RetryTaskID), Pending: s.keys.asynqPending(), Scheduled: s.keys.asynqScheduled(),
		Token: a.Token, Index: a.Index, Message: a.Error, Class: a.Class, Delay: a.Delay.Milliseconds(),
		Retention: a.Retention.Milliseconds(), Code: a.Code, RetryID: a.RetryTaskID, RetryMsg: a.RetryMessage,
		ackLua: ackOf(a.Ack)})
	if err != nil {
		return FailResult{}, fmt.Errorf("fail: %w", err)
	}
	return failResult(decodeFail(res, a.Index))
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
	// Acked, as CompleteResult.Acked: every outcome but OutcomeRetry
	// without Enqueued.
	Acked bool
}

var failOutcomes = []Outcome{OutcomeRetry, OutcomeRunFailed, OutcomeFenced, OutcomeDone}

func failResult(d decoded, err error) (FailResult, error) {
	if d, err = accept("fail", d, err, failOutcomes); err != nil {
		return FailResult{}, err
	}
	return FailResult{Outcome: d.Outcome, Next: d.next(), RunFailure: d.failure(), Why: d.Why,
		RunStatus: d.RunStatus, Acked: d.Acked}, nil
}

// ReleaseParams hands back an attempt its worker stopped because it could not
// renew the attempt's fence.
type ReleaseParams struct {
	RunID string
	Index int
	Token string
	Now   time.Time
	// TaskID and Message, when set, are the task ID and the asynq message
	// (tasks.AsynqMessage) the caller expects the new dispatch to get: the
	// script writes that task when the prediction holds.
	TaskID  string
	Message []byte
}

// Release hands back a running attempt whose worker stopped it because it
// could not renew its fence (Redis unreachable): neither a crash nor a
// failed attempt. The attempt resumes under a new dispatch, due now, and the
// run is notified (run_recovered, by worker, kind interrupted_attempt).
// Fenced by the attempt's token.
func (s *Store) Release(ctx context.Context, a ReleaseParams) (ReleaseResult, error) {
	res, err := s.run(ctx, s.scripts.release, releaseLua{runArgs: s.runArgs(a.RunID, a.Now),
		NextTask: s.keys.asynqTask(a.TaskID), Pending: s.keys.asynqPending(), Token: a.Token, Index: a.Index,
		NextID: a.TaskID, NextMsg: a.Message})
	if err != nil {
		return ReleaseResult{}, fmt.Errorf("release: %w", err)
	}
	return releaseResult(decodeRelease(res))
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

// Renewal is the answer to a fence renewal.
type Renewal int

// Renewal outcomes.
const (
	Renewed    Renewal = 1
	FenceLost  Renewal = 0
	RunStopped Renewal = -1 // the run is no longer running (cancelled, failed, gone)
)

// RenewParams asks to extend the fence of a running attempt (lua/renew.lua).
type RenewParams struct {
	RunID string
	Index int
	// Token is the attempt's fence token (BeginParams.Token).
	Token string
	// TTL: the fence expires at Now+TTL.
	TTL time.Duration
	Now time.Time
}

// Renew extends the fence of a running attempt to Now+TTL.
func (s *Store) Renew(ctx context.Context, a RenewParams) (Renewal, error) {
	keys, argv := renewLua{Run: s.keys.run(a.RunID), Fences: s.keys.fences(), Token: a.Token, Now: ms(a.Now),
		TTL: a.TTL.Milliseconds(), RunID: a.RunID, Index: a.Index}.args()
	n, err := s.scripts.renew.Run(ctx, s.rdb, keys, argv...).Int64()
	if err != nil {
		return FenceLost, fmt.Errorf("renew: %w", err)
	}
	return decodeRenewal(n)
}
