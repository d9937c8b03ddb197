package retrystate

import (
	"errors"
	"fmt"
)

// Errors returned by Store.
var (
	// ErrRunNotFound: no run has the ID (never created, or expired after
	// its retention).
	ErrRunNotFound = errors.New("run not found")
	// ErrUnknownWorkflow: no worker has registered a workflow of that name.
	ErrUnknownWorkflow = errors.New("unknown workflow")
	// ErrRunIDCollision is returned by CreateRun when a run with the new
	// run's ID exists already; nothing was written. Run IDs carry 80 random
	// bits, so it means the same ID was created before: a create whose
	// reply was lost, repeated (workflow's outbox relies on it).
	ErrRunIDCollision = errors.New("run ID collision")
	// ErrBadCursor is returned by ListRuns for a cursor it did not make.
	ErrBadCursor = errors.New("malformed cursor")
	// ErrBadRange is returned by ListPage for a creation range that holds
	// no time (its end at or before its start) or a negative bound.
	ErrBadRange = errors.New("empty creation range")
	// ErrUnexpectedReply: a script replied with something its decoder
	// (reply.go) does not know: an unknown outcome, a wrong number of
	// elements, or a malformed element. A script and its decoder disagree.
	// It is also wrapped for a Redis reply of a type the command does not
	// return (a sorted set member that is not a string).
	ErrUnexpectedReply = errors.New("retrystate: unexpected script reply")
)

// Refusals of an action on a run that its caller can only report: Cancel,
// Operate, Restore and Signal return them (as the typed errors below, which
// say why) instead of an outcome. Nothing was written.
var (
	// ErrRefused: the action does not apply to the run in its state
	// (*RefusedError).
	ErrRefused = errors.New("refused")
	// ErrRunEnded: the run had ended (*RunEndedError): Cancel of a run
	// that ended otherwise than cancelled, Signal.
	ErrRunEnded = errors.New("run ended")
	// ErrMailboxFull: the run's mailbox holds MaxPendingSignals signals
	// (*MailboxFullError): Signal.
	ErrMailboxFull = errors.New("mailbox full")
)

// RefusedError is an action a script refused (outcomeRefused), and why. It
// is ErrRefused, and any RefusedError with the same reason, for errors.Is.
type RefusedError struct {
	Reason string
}

func (e *RefusedError) Error() string { return "refused: " + e.Reason }

// Unwrap returns ErrRefused.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// Is tells whether target is a RefusedError with the same reason.
func (e *RefusedError) Is(target error) bool {
	t, ok := target.(*RefusedError)
	return ok && *t == *e
}

// RunEndedError is an action on a run that had ended (OutcomeEnded), as
// Status. It is ErrRunEnded, and any RunEndedError with the same status,
// for errors.Is.
type RunEndedError struct {
	Status RunStatus
}

func (e *RunEndedError) Error() string { return "run ended: " + string(e.Status) }

// Unwrap returns ErrRunEnded.
func (e *RunEndedError) Unwrap() error { return ErrRunEnded }

// Is tells whether target is a RunEndedError with the same status.
func (e *RunEndedError) Is(target error) bool {
	t, ok := target.(*RunEndedError)
	return ok && *t == *e
}

// MailboxFullError is a signal to a run whose mailbox is full
// (outcomeMailboxFull): it holds Pending signals, its maximum. It is
// ErrMailboxFull, and any MailboxFullError with the same Pending, for
// errors.Is.
type MailboxFullError struct {
	Pending int
}

func (e *MailboxFullError) Error() string { return fmt.Sprintf("mailbox full: %d signals", e.Pending) }

// Unwrap returns ErrMailboxFull.
func (e *MailboxFullError) Unwrap() error { return ErrMailboxFull }

// Is tells whether target is a MailboxFullError with the same Pending.
func (e *MailboxFullError) Is(target error) bool {
	t, ok := target.(*MailboxFullError)
	return ok && *t == *e
}

// errUnknownOutcome is wrapped (with ErrUnexpectedReply) by the error of a
// reply whose outcome word the decoder does not know.
var errUnknownOutcome = errors.New("unknown outcome")
