package workflow_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// TestCircuitBreaker: a dependency fails its first 6 calls. Behind a breaker
// of threshold 3, runs that allow 7 attempts each: the third failure opens
// the breaker; while it is open no attempt reaches the dependency (the
// attempts are deferred, journaled, spending no budget); each cooldown lets
// exactly one probe through (three fail, each reopening it: 4 openings in
// all), and the fourth probe closes it. Every run succeeds, the dependency
// saw exactly 6 failing calls and one successful call per run. One attempt
// runs at a time (worker concurrency 1), so the sequence is deterministic.
func TestCircuitBreaker(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var (
		mu         sync.Mutex
		calls      int
		failing    = 6
		duringOpen int
	)
	client := e.client
	call := func(ctx context.Context, _ *workflow.StepContext) (any, error) {
		bs, err := client.Breakers(ctx)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		calls++
		for _, b := range bs {
			if b.Name == "dep" && b.State == "open" {
				duringOpen++
			}
		}
		if failing > 0 {
			failing--
			return nil, errors.New("dependency unavailable")
		}
		return "ok", nil
	}
	pol := workflow.Policy{MaxAttempts: 7, InitialInterval: 20 * time.Millisecond, MaxInterval: 20 * time.Millisecond,
		Jitter: workflow.JitterNone, CircuitBreaker: &workflow.CircuitBreaker{Name: "dep", FailureThreshold: 3,
			Window: 10 * time.Second, Cooldown: 300 * time.Millisecond, MaxCooldown: time.Second}}
	e.startWorker(workflow.WorkerConfig{Concurrency: 1},
		workflow.Definition{Name: "calls-dep", Policy: pol, Steps: []workflow.Step{{Name: "call", Run: call}}})

	var runs []*workflow.Run
	for range 4 {
		runs = append(runs, mustStart(t, e.client, "calls-dep", nil))
	}
	deferred := 0
	for _, r := range runs {
		got := e.wait(r.ID, 30*time.Second)
		if got.Status != workflow.StatusSucceeded {
			t.Fatalf("run %s: %s %s", r.ID, got.Status, got.FailureReason)
		}
		evs := e.events(r.ID)
		st := got.Step("call")
		if fails := countEvents(evs, workflow.EventAttemptFailed, "call"); st.Attempts != fails+1 {
			t.Errorf("run %s: %d attempts for %d failures: a deferral counted as an attempt", r.ID, st.Attempts, fails)
		}
		deferred += countEvents(evs, "attempt_deferred", "call")
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 6+len(runs) || duringOpen != 0 {
		t.Errorf("the dependency saw %d calls (%d while the breaker was open); want %d, none while open", calls,
			duringOpen, 6+len(runs))
	}
	bs, err := e.client.Breakers(ctxb)
	if err != nil || len(bs) != 1 {
		t.Fatalf("breakers %+v, %v", bs, err)
	}
	if b := bs[0]; b.State != "closed" || b.Opened != 4 || b.Failures != 0 || b.Deferred == 0 || deferred == 0 {
		t.Errorf("breaker %+v (journaled deferrals %d); want closed, opened 4 times, deferrals", b, deferred)
	}
	if err := e.client.ResetBreaker(ctxb, "dep"); err != nil {
		t.Error(err)
	}
	if err := e.client.ResetBreaker(ctxb, "nope"); !errors.Is(err, workflow.ErrBreakerNotFound) {
		t.Errorf("reset of an unknown breaker: %v", err)
	}
}

// TestCircuitBreakerPolicy: the breaker is taken whole from the most
// specific level, and bad settings are refused.
func TestCircuitBreakerPolicy(t *testing.T) {
	t.Parallel()
	wf := workflow.Policy{CircuitBreaker: &workflow.CircuitBreaker{Name: "a"}}
	step := workflow.Policy{CircuitBreaker: &workflow.CircuitBreaker{Name: "b", Cooldown: time.Second}}
	if got := step.Or(wf).CircuitBreaker; got == nil || got.Name != "b" {
		t.Errorf("step over workflow: %+v", got)
	}
	if got := (workflow.Policy{}).Or(wf).CircuitBreaker; got == nil || got.Name != "a" {
		t.Errorf("inherited: %+v", got)
	}
	for _, cb := range []workflow.CircuitBreaker{
		{Name: ""}, {Name: "a|b"}, {Name: "a", FailureThreshold: -1}, {Name: "a", Cooldown: time.Minute, MaxCooldown: time.Second},
		{Name: "a", Window: 48 * time.Hour},
	} {
		if err := (workflow.Policy{CircuitBreaker: &cb}).Validate(); !errors.Is(err, workflow.ErrInvalidPolicy) {
			t.Errorf("%+v: %v; want ErrInvalidPolicy", cb, err)
		}
	}
	// A nameless breaker says why: only http steps are named by default.
	err := (workflow.Policy{CircuitBreaker: &workflow.CircuitBreaker{FailureThreshold: 3}}).Validate()
	if want := "circuit_breaker: name is required (only http steps default it to the target host)"; err == nil ||
		!strings.Contains(err.Error(), want) {
		t.Errorf("nameless breaker: %v; want %q", err, want)
	}
}

// TestCircuitBreakerProbeSnoozes: a probe whose body snoozes (the
// dependency answered: "not ready yet") closes the breaker, so the
// snoozed step's next visit is not deferred until the probe's lease ends.
func TestCircuitBreakerProbeSnoozes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var (
		mu    sync.Mutex
		calls int
	)
	body := func(context.Context, *workflow.StepContext) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		switch calls {
		case 1:
			return nil, errors.New("dependency unavailable") // opens the breaker (threshold 1)
		case 2:
			return nil, workflow.Snooze(50 * time.Millisecond) // the probe: answered, not ready
		}
		return "ready", nil
	}
	pol := workflow.Policy{MaxAttempts: 3, InitialInterval: 20 * time.Millisecond, MaxInterval: 20 * time.Millisecond,
		Jitter: workflow.JitterNone, CircuitBreaker: &workflow.CircuitBreaker{Name: "poll", FailureThreshold: 1,
			Cooldown: 200 * time.Millisecond}}
	e.startWorker(workflow.WorkerConfig{Concurrency: 1},
		workflow.Definition{Name: "polls-dep", Policy: pol, Steps: []workflow.Step{{Name: "poll", Run: body}}})
	run := mustStart(t, e.client, "polls-dep", nil)
	// Without the snooze closing the breaker, the next visit would wait for
	// the probe's lease: the step timeout (15m) + 1m.
	if got := e.wait(run.ID, 20*time.Second); got.Status != workflow.StatusSucceeded {
		t.Fatalf("run: %s %s", got.Status, got.FailureReason)
	}
	bs, err := e.client.Breakers(ctxb)
	if err != nil || len(bs) != 1 || bs[0].State != "closed" || bs[0].Opened != 1 {
		t.Fatalf("breakers %+v, %v; want poll closed, opened once", bs, err)
	}
}
