package retrystate

import (
	"context"
	"fmt"
	"time"
)

// Signals and timers: the waits of await and sleep steps (Wait), the
// signals that end them (Signal), and the loops of a step body (Snooze,
// Goto).

// Limits of signals, enforced by the callers of Signal (package workflow)
// and, for the mailbox, by signal.lua.
const (
	// MaxPendingSignals is how many signals a run's mailbox keeps for
	// awaits it has not reached yet.
	MaxPendingSignals = 100
	// MaxSignalPayload is the largest signal payload, in bytes.
	MaxSignalPayload = 64 << 10
	// MaxSignalID is the longest signal ID, in bytes.
	MaxSignalID = 256
)

// WaitAction is what Store.Wait does with an await or a sleep step.
type WaitAction string

// Wait actions.
const (
	// WaitStart: the step's task was delivered (Begin said OutcomeWait):
	// start waiting, or finish at once (a signal in the mailbox, a sleep
	// whose time has come).
	WaitStart WaitAction = "start"
	// WaitWake: the wake-up task was delivered (Begin said OutcomeWake): a
	// sleep ends, an await times out.
	WaitWake WaitAction = "wake"
)

// WaitParams identifies a delivery of an await or sleep step's task.
type WaitParams struct {
	RunID     string
	Index     int
	Action    WaitAction
	TaskID    string // the delivered task
	Retention time.Duration
	Now       time.Time
	// Until is the end of a KindSleepUntil step (WaitStart), as the engine
	// computed it; UntilError, when set, says why it could not (the step
	// then fails with a permanent error).
	Until      time.Time
	UntilError string
	// WakeTaskID and WakeMessage, when set, are the task ID and the asynq
	// message (tasks.AsynqMessage) the caller expects the wake-up to get:
	// the script writes that task, scheduled for the wake-up time, when the
	// prediction holds.
	WakeTaskID  string
	WakeMessage []byte
}

// Wait starts or ends the wait of an await or a sleep step (lua/wait.lua):
// OutcomeWaiting (the step waits; Dispatch is its wake-up), OutcomeNext
// (the step succeeded; Dispatch is the next step's), OutcomeRunSucceeded,
// OutcomeRunFailed (an await timed out: CodeSignalTimeout), OutcomeEarly
// (a wake-up before its time) or OutcomeNoop (the state moved on).
func (s *Store) Wait(ctx context.Context, a WaitParams) (WaitResult, error) {
	until := ""
	if a.Action == WaitStart && !a.Until.IsZero() {
		until = fmt.Sprint(ms(a.Until))
	}
	res, err := s.run(ctx, s.scripts.wait, waitLua{runArgs: s.runArgs(a.RunID, a.Now),
		WakeTask: s.keys.asynqTask(a.WakeTaskID), Pending: s.keys.asynqPending(), Scheduled: s.keys.asynqScheduled(),
		Action: string(a.Action), Index: a.Index, Task: a.TaskID, Retention: a.Retention.Milliseconds(), Until: until,
		UntilError: a.UntilError, WakeID: a.WakeTaskID, WakeMsg: a.WakeMessage})
	if err != nil {
		return WaitResult{}, fmt.Errorf("wait: %w", err)
	}
	return waitResult(decodeWait(res))
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

// SignalParams is a signal to a run.
type SignalParams struct {
	RunID   string
	Name    string
	Payload string // JSON
	ID      string // "" for none
	// Retention of a run the signal ends (its last step was the await).
	Retention time.Duration
	Now       time.Time
}

// Signal delivers a signal to a run (lua/signal.lua): OutcomeDelivered (it
// completed the waiting await; enqueue Dispatch), OutcomeRunSucceeded (it
// completed the last step), OutcomeQueued (kept in the mailbox for a later
// await) or OutcomeDuplicate. It returns ErrRunNotFound for an unknown
// run, a *RefusedError when no step awaits the signal any more, a
// *MailboxFullError and a *RunEndedError.
// The caller checks the name, the payload and the ID (see the limits).
func (s *Store) Signal(ctx context.Context, a SignalParams) (SignalResult, error) {
	res, err := s.run(ctx, s.scripts.signal, signalLua{runArgs: s.runArgs(a.RunID, a.Now), Name: a.Name,
		Payload: a.Payload, SignalID: a.ID, Retention: a.Retention.Milliseconds(), MaxPending: MaxPendingSignals})
	if err != nil {
		return SignalResult{}, fmt.Errorf("signal: %w", err)
	}
	return signalResult(refusal(decodeSignal(res)))
}

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

// PendingSignals returns how many signals a run's mailbox holds.
func (s *Store) PendingSignals(ctx context.Context, runID string) (int64, error) {
	return s.rdb.XLen(ctx, s.keys.mailbox(runID)).Result()
}

// SnoozeParams asks for the next visit of a running attempt after Delay
// (workflow.Snooze).
type SnoozeParams struct {
	RunID     string
	Index     int
	Token     string
	Delay     time.Duration
	Retention time.Duration
	Now       time.Time
	// TaskID and Message, when set, are the task ID and the asynq message
	// (tasks.AsynqMessage) the caller expects the next visit to get (the
	// same attempt, the next gen): the script writes that task, scheduled
	// for its due time, when the prediction holds.
	TaskID  string
	Message []byte
}

// Snooze records that a running attempt's body asked to run again after
// Delay: the step is pending again under a new dispatch of the same
// attempt, due at Now+Delay, spending no retry budget (OutcomeSnoozed). A
// visit due at or after the run's deadline fails the run (OutcomeRunFailed,
// run_timeout). Fenced by the attempt's token; a snooze applied before whose
// reply was lost answers OutcomeDone.
func (s *Store) Snooze(ctx context.Context, a SnoozeParams) (SnoozeResult, error) {
	res, err := s.run(ctx, s.scripts.snooze, snoozeLua{runArgs: s.runArgs(a.RunID, a.Now),
		NextTask: s.keys.asynqTask(a.TaskID), Pending: s.keys.asynqPending(), Scheduled: s.keys.asynqScheduled(),
		Token: a.Token, Index: a.Index, Delay: a.Delay.Milliseconds(), NextID: a.TaskID, NextMsg: a.Message,
		Retention: a.Retention.Milliseconds()})
	if err != nil {
		return SnoozeResult{}, fmt.Errorf("snooze: %w", err)
	}
	return snoozeResult(decodeSnooze(res))
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

// GotoParams asks a running attempt's run to continue at step Target
// (workflow.Goto).
type GotoParams struct {
	RunID     string
	Index     int
	Token     string
	Target    string
	Retention time.Duration
	Now       time.Time
	// TaskID and Message, when set, are the task ID and the asynq message
	// the caller expects the target's new attempt to get: the script writes
	// that task, due now, when the prediction holds.
	TaskID  string
	Message []byte
}

// Goto records that a running attempt's body asked to continue at an
// earlier step, or its own: the checkpoints from the target on are
// superseded (kept in the journal) and the target gets a new attempt, due
// now (OutcomeGoto). A target that is not this step or an earlier one fails
// the run (OutcomeRunFailed, invalid_goto). Fenced by the attempt's token; a
// goto applied before whose reply was lost answers OutcomeDone.
func (s *Store) Goto(ctx context.Context, a GotoParams) (GotoResult, error) {
	res, err := s.run(ctx, s.scripts.jump, gotoLua{runArgs: s.runArgs(a.RunID, a.Now),
		NextTask: s.keys.asynqTask(a.TaskID), Pending: s.keys.asynqPending(), Token: a.Token, Index: a.Index,
		TargetName: a.Target, NextID: a.TaskID, NextMsg: a.Message, Retention: a.Retention.Milliseconds()})
	if err != nil {
		return GotoResult{}, fmt.Errorf("goto: %w", err)
	}
	return gotoResult(decodeGoto(res))
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
