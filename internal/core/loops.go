package core

import (
	"errors"
	"fmt"
	"time"
)

// SnoozeError is the error Snooze returns: a request, not a failure.
type SnoozeError struct {
	// Delay before the step runs again.
	Delay time.Duration
}

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.Delay) }

// Snooze returns the error that, returned by a step, runs the same step again after d (the
// "poll until ready" pattern): the attempt is neither failed nor counted
// against the retry budget, and keeps its attempt number and idempotency
// key. Each visit counts against max_iterations, so a poll has a ceiling.
// A negative d is 0. Wrapping keeps it a snooze (errors.As).
func Snooze(d time.Duration) error {
	return &SnoozeError{Delay: max(d, 0)}
}

// GotoError is the error Goto returns: a request, not a failure.
type GotoError struct {
	// Step is the name of the step to continue at.
	Step string
}

func (e *GotoError) Error() string { return fmt.Sprintf("goto step %q", e.Step) }

// Goto returns the error that, returned by a step, continues the run at the named step,
// which must be this step or an earlier one: the checkpoints from that step
// on are superseded (kept in the run's journal) and it runs again with a new
// attempt and a fresh retry budget. Each visit counts against
// max_iterations. A step that is not this one or an earlier one fails the
// run (invalid_goto). Wrapping keeps it a goto (errors.As).
func Goto(step string) error {
	return &GotoError{Step: step}
}

// SnoozeOf returns the delay requested with Snooze, if err is one.
func SnoozeOf(err error) (time.Duration, bool) {
	if s, ok := errors.AsType[*SnoozeError](err); ok {
		return s.Delay, true
	}
	return 0, false
}

// GotoOf returns the step requested with Goto, if err is one.
func GotoOf(err error) (string, bool) {
	if g, ok := errors.AsType[*GotoError](err); ok {
		return g.Step, true
	}
	return "", false
}
