package testkit_test

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// fatalTB records the first Fatal and stops the goroutine that called it,
// as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// catchFatal runs fn on its own goroutine with a fatalTB and returns the
// message it failed with, "" if it returned.
func catchFatal(t *testing.T, fn func(testing.TB)) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	msg := catchFatal(t, func(tb testing.TB) {
		testkit.Eventually(tb, 10*time.Second, "the third call", func() bool {
			calls++
			return calls == 3
		})
	})
	if msg != "" || calls != 3 {
		t.Errorf("failed with %q after %d calls; want success after 3", msg, calls)
	}
}

// Eventually and Premise fail with what they waited for, once the timeout
// has passed, and not before; they poll with a backoff from 1ms up to
// 20ms. In a bubble (testing/synctest), so the sleeps are the bubble's
// time and the count of calls is exact: calls at 0, 1, 3, 7, 15, 31, 51,
// 71 and 91ms, and a last at 111ms, after the deadline.
func TestWaitsFailWithWhatTheyWaitedFor(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait func(testing.TB, time.Duration, string, func() bool)
		want string
	}{
		{"Eventually", testkit.Eventually, "timed out after 100ms waiting for a condition that never holds"},
		{"Premise", testkit.Premise,
			"premise: a condition that never holds did not hold within 100ms; the test could not set up what it checks"},
	} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			calls := 0
			msg := catchFatal(t, func(tb testing.TB) {
				tc.wait(tb, 100*time.Millisecond, "a condition that never holds", func() bool {
					calls++
					return false
				})
			})
			if msg != tc.want {
				t.Errorf("%s failed with %q, want %q", tc.name, msg, tc.want)
			}
			if took := time.Since(start); took != 111*time.Millisecond {
				t.Errorf("%s gave up after %s; want 111ms, the first call after the 100ms timeout", tc.name, took)
			}
			if calls != 10 {
				t.Errorf("%s: %d calls in 111ms; want 10 (a backoff from 1ms to 20ms)", tc.name, calls)
			}
		})
	}
}

func TestPremiseReturnsOnceItHolds(t *testing.T) {
	calls := 0
	msg := catchFatal(t, func(tb testing.TB) {
		testkit.Premise(tb, 10*time.Second, "the third call", func() bool {
			calls++
			return calls == 3
		})
	})
	if msg != "" || calls != 3 {
		t.Errorf("failed with %q after %d calls; want success after 3", msg, calls)
	}
}

func TestQueueIsUniqueAndBounded(t *testing.T) {
	a, b := testkit.Queue(t, "q"), testkit.Queue(t, "q")
	if a == b {
		t.Errorf("two queues named %s", a)
	}
	if !strings.HasPrefix(a, "q") || !strings.HasSuffix(a, "_TestQueueIsUniqueAndBounded") {
		t.Errorf("queue %s", a)
	}
	t.Run(strings.Repeat("very long name/", 10), func(t *testing.T) {
		q := testkit.Queue(t, "q")
		if len(q) > 60 || strings.ContainsAny(q, " /") {
			t.Errorf("queue %q: want at most 60 letters, digits and _", q)
		}
	})
}

func TestFreeAddrIsFree(t *testing.T) {
	addr := testkit.FreeAddr(t)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("address %s is not on loopback", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("cannot listen on %s: %v", addr, err)
	}
	_ = ln.Close()
}

func TestCountEvents(t *testing.T) {
	evs := []workflow.Event{
		{Type: workflow.EventAttemptFailed, Step: "a"},
		{Type: workflow.EventAttemptFailed, Step: "b"},
		{Type: workflow.EventAttemptSucceeded, Step: "a"},
	}
	if n := testkit.CountEvents(evs, workflow.EventAttemptFailed, "a"); n != 1 {
		t.Errorf("failures of a: %d, want 1", n)
	}
	if n := testkit.CountEvents(evs, workflow.EventAttemptFailed, ""); n != 2 {
		t.Errorf("failures: %d, want 2", n)
	}
}
