// Package testsignal lets a long-lived service tell its tests that
// something happened (a sweep ended, a lock was lost), so that a test
// waits for the event it needs instead of polling with a time bound
// (river's rivershared/testsignal). A Signal costs nothing until a test
// enables it with Init: the service's Signal call is then a non-blocking
// send on a buffered channel.
package testsignal

import "time"

// buffer is how many signals an enabled Signal keeps for its test; more
// are dropped (a test waits for the ones it needs as they come).
const buffer = 1000

// Signal is one kind of event of a service, with a value of type T. The
// zero Signal is disabled.
type Signal[T any] struct {
	ch chan T
}

// Init enables the signal; call it before the service starts, from the
// test.
func (s *Signal[T]) Init() { s.ch = make(chan T, buffer) }

// Signal tells the test that the event happened, with v; a no-op unless
// Init was called, and it never blocks.
func (s *Signal[T]) Signal(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
	}
}

// Wait returns the next value signalled, or false when none came within
// timeout (a generous deadline: the test fails then) or the signal was not
// initialised.
func (s *Signal[T]) Wait(timeout time.Duration) (T, bool) {
	var zero T
	if s.ch == nil {
		return zero, false
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case v := <-s.ch:
		return v, true
	case <-t.C:
		return zero, false
	}
}
