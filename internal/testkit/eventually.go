package testkit

import (
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
	deadline := time.Now().Add(timeout)
	pause := minPoll
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPoll)
	}
}
