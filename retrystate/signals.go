package retrystate

import (
	"context"
	"fmt"
	"time"
)

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

// PendingSignals returns how many signals a run's mailbox holds.
func (s *Store) PendingSignals(ctx context.Context, runID string) (int64, error) {
	return s.rdb.XLen(ctx, s.keys.mailbox(runID)).Result()
}
