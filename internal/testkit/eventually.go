package testkit

import (
	"strings"
	"testing"
	"time"
)

// Backoff of [Eventually]: the first retry comes after minPoll, each next
// one twice as late, up to maxPoll.
const (
	minPoll = time.Millisecond
	maxPoll = 20 * time.Millisecond
)

// Eventually calls cond until it returns true, waiting a little longer
// between calls each time (1ms, doubling up to 20ms). If cond still does not
// hold after timeout, it fails the test with "timed out after <timeout>
// waiting for <what>". cond runs on the test's goroutine, so it may call
// t.Fatal.
//
// Polling for a condition is how tests wait: never a fixed sleep.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(timeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// EventuallyNone calls missing, as [Eventually] calls its cond, until it
// returns nothing. If something is still missing after timeout, it fails
// the test with "timed out after <timeout> waiting for <what>; missing:"
// and what missing returned last.
func EventuallyNone(t testing.TB, timeout time.Duration, what string, missing func() []string) {
	t.Helper()
	var left []string
	if !poll(timeout, func() bool { left = missing(); return len(left) == 0 }) {
		t.Fatalf("timed out after %s waiting for %s; missing: %s", timeout, what, strings.Join(left, ", "))
	}
}

// Premise waits, as [Eventually] does, for what a test must have set up
// before it acts: the attempt it kills or freezes Redis under is running,
// the work it interrupts is under way. If cond does not hold within
// timeout, it fails the test with "premise: <what> did not hold within
// <timeout>; the test could not set up what it checks": a loaded machine
// or a broken harness, reported as such rather than as the product's
// failure (which the test's own assertions report).
func Premise(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(timeout, cond) {
		t.Fatalf("premise: %s did not hold within %s; the test could not set up what it checks", what, timeout)
	}
}

// poll calls cond until it returns true (true) or timeout has passed
// (false), with Eventually's backoff between calls.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	pause := minPoll
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPoll)
	}
	return true
}
