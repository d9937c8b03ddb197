package core

import (
	"errors"
)

// ErrMailboxFull is returned by Signal when the run holds MaxPendingSignals
// signals for awaits it has not reached yet; the signal was refused.
var ErrMailboxFull = errors.New("signal mailbox full")

// SignalOptions are the options of Client.Signal.
type SignalOptions struct {
	// ID, when set (at most MaxSignalID bytes), makes the signal
	// idempotent: a signal with an ID the run received before is a no-op
	// (SignalDuplicate).
	ID string
	// Actor is who sends the signal, for the logs. Default "client".
	Actor string
}

// SignalOutcome is what a signal did.
type SignalOutcome string

// Signal outcomes.
const (
	// SignalDelivered: the run's current step awaited the signal; it
	// succeeded with the payload as its output and the run went on.
	SignalDelivered SignalOutcome = "delivered"
	// SignalQueued: a later await of the run (or the current one, before it
	// began to wait) will consume the signal when the run reaches it; it is
	// kept in the run's mailbox.
	SignalQueued SignalOutcome = "queued"
	// SignalDuplicate: the run received a signal with this ID before;
	// nothing was done.
	SignalDuplicate SignalOutcome = "duplicate"
	// SignalOutbox: Redis was unreachable (or earlier entries wait in the
	// outbox): the signal was queued in the client's outbox
	// (ClientConfig.Outbox), to be sent in order when Redis answers.
	SignalOutbox SignalOutcome = "outbox"
)

// SignalResult is what Client.Signal did.
type SignalResult struct {
	Outcome SignalOutcome `json:"outcome"`
	// Step is the await the signal completed (SignalDelivered).
	Step string `json:"step,omitempty"`
	// Pending is how many signals the run's mailbox holds (SignalQueued).
	Pending int `json:"pending,omitempty"`
	// RunSucceeded: the await was the run's last step (SignalDelivered).
	RunSucceeded bool `json:"run_succeeded,omitempty"`
	// ID is the signal's ID (SignalOutbox): the caller's, or the one
	// generated for a signal queued without one.
	ID string `json:"id,omitempty"`
}
