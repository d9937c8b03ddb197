package testkit_test

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
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

func TestEventuallyFailsWithWhatItWaitedFor(t *testing.T) {
	start := time.Now()
	calls := 0
	msg := catchFatal(t, func(tb testing.TB) {
		testkit.Eventually(tb, 100*time.Millisecond, "a condition that never holds", func() bool {
			calls++
			return false
		})
	})
	if want := "timed out after 100ms waiting for a condition that never holds"; msg != want {
		t.Errorf("failed with %q, want %q", msg, want)
	}
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("gave up after %s, before the timeout", took)
	}
	// A backoff from 1ms up to 20ms: several calls, not a busy loop.
	if calls < 3 || calls > 100 {
		t.Errorf("%d calls in 100ms", calls)
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
