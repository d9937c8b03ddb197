package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/retrystate"
)

// StepWaiting is the status of an await that waits for its signal, or of a
// sleep that waits for its time: the step holds no worker slot.
const StepWaiting = retrystate.StepWaiting

// CodeSignalTimeout is the failure code of a run whose await's timeout
// passed without its signal.
const CodeSignalTimeout = retrystate.CodeSignalTimeout

// Journal event types of awaits and sleeps.
const (
	EventAwaitStarted   = retrystate.EventAwaitStarted
	EventSignalReceived = retrystate.EventSignalReceived
	EventSignalConsumed = retrystate.EventSignalConsumed
	EventAwaitTimedOut  = retrystate.EventAwaitTimedOut
	EventTimerSet       = retrystate.EventTimerSet
	EventTimerFired     = retrystate.EventTimerFired
)

// Limits of signals.
const (
	// MaxPendingSignals is how many signals a run keeps for awaits it has
	// not reached yet (its mailbox); one more is refused (ErrMailboxFull).
	MaxPendingSignals = retrystate.MaxPendingSignals
	// MaxSignalPayload is the largest signal payload, in bytes (64 KiB).
	MaxSignalPayload = retrystate.MaxSignalPayload
	// MaxSignalID is the longest signal ID, in bytes.
	MaxSignalID = retrystate.MaxSignalID
	// MaxWait is the longest await timeout and sleep duration.
	MaxWait = 366 * 24 * time.Hour
)

// Await makes a step wait for a named signal, holding no worker slot. A
// signal that arrives before the run reaches the step is kept in the run's
// mailbox and consumed when it does. The step's output is the signal's
// JSON payload, which later steps read like any checkpoint. When Timeout
// passes without the signal, the step fails with code signal_timeout and the
// run fails, needing attention (an operator's retry waits again).
type Await struct {
	// Signal is the name of the signal: letters, digits, '.', '_' (at most
	// 64), as step names.
	Signal string
	// Timeout is how long the step waits, from when the run reaches it;
	// required, at most MaxWait.
	Timeout time.Duration
}

func (a *Await) validate() error {
	if !StepNameRE.MatchString(a.Signal) {
		return fmt.Errorf("await: signal name %q must be 1-64 letters, digits, '.' or '_'", a.Signal)
	}
	if a.Timeout <= 0 || a.Timeout > MaxWait {
		return fmt.Errorf("await: timeout %s must be positive and at most %s", a.Timeout, MaxWait)
	}
	return nil
}

// Sleep makes a step wait, holding no worker slot, for a duration (For) or
// until a time computed from the run when the step is reached (Until): a
// durable timer. It never fires early and survives restarts of workers and
// Redis. The step's output is null.
type Sleep struct {
	// For is how long to sleep, from when the run reaches the step; at
	// most MaxWait.
	For time.Duration
	// Until returns the time to sleep until, given the step's context
	// (the run's input and the outputs of the earlier steps). An error
	// fails the step with a permanent error; a time in the past fires at
	// once. It runs in the worker that reaches the step, which must have
	// the workflow registered.
	Until func(sc *StepContext) (time.Time, error)
}

func (s *Sleep) validate() error {
	switch {
	case (s.For != 0) == (s.Until != nil):
		return errors.New("sleep: set exactly one of For and Until")
	case s.For < 0 || s.For > MaxWait:
		return fmt.Errorf("sleep: duration %s must be positive and at most %s", s.For, MaxWait)
	}
	return nil
}

// waits returns what a run keeps of an await or a sleep.
func (s Step) waits() (retrystate.StepKind, string, time.Duration) {
	switch {
	case s.Await != nil:
		return retrystate.KindAwait, s.Await.Signal, s.Await.Timeout
	case s.Sleep != nil && s.Sleep.Until != nil:
		return retrystate.KindSleepUntil, "", 0
	case s.Sleep != nil:
		return retrystate.KindSleep, "", s.Sleep.For
	}
	return retrystate.KindBody, "", 0
}

// StepWaitingFor says what a step waits for: nil unless it is waiting.
func StepWaitingFor(s retrystate.Step) *WaitingFor {
	if s.Status != StepWaiting {
		return nil
	}
	w := &WaitingFor{Until: TimePtr(s.NextAttemptAt)}
	if s.Kind == retrystate.KindAwait {
		w.Signal = s.Signal
	} else {
		w.Timer = true
	}
	return w
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
