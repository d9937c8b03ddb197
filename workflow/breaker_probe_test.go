package workflow_test

import (
	"testing"
	"time"

	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// probeRig is a rig whose breaker "dep" opened (one transient failure of a
// first run) and whose cooldown has passed: the next begin probes.
func probeRig(t *testing.T) (*rig, func(id, token string, gen int) retrystate.BeginResult) {
	t.Helper()
	pol := workflow.Policy{MaxAttempts: 5, StepTimeout: time.Minute, CircuitBreaker: &workflow.CircuitBreaker{
		Name: "dep", FailureThreshold: 1, Window: time.Minute, Cooldown: time.Second, MaxCooldown: time.Second}}
	r := newRig(t, workflow.Definition{Name: "probe", Policy: pol, Steps: []workflow.Step{{Name: "call", Run: noop}}})
	begin := func(id, token string, gen int) retrystate.BeginResult {
		t.Helper()
		b, err := r.store.Begin(ctxb, retrystate.BeginParams{RunID: id, Index: 0, TaskID: tasks.ID(id, 0, 1, gen),
			Token: token, FenceTTL: 10 * time.Second, Now: r.clock.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a := mustStart(t, r.client, "probe", nil)
	if b := begin(a.ID, "a1", 0); b.Outcome != retrystate.OutcomeOK {
		t.Fatalf("begin: %+v", b)
	}
	if _, err := r.store.Fail(ctxb, retrystate.FailParams{RunID: a.ID, Index: 0, Token: "a1", Error: "503",
		Class: retrystate.ClassTransient, Delay: time.Hour, Now: r.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(2 * time.Second)
	return r, begin
}

func breakerState(t *testing.T, r *rig) workflow.BreakerState {
	t.Helper()
	bs, err := r.client.Breakers(ctxb)
	if err != nil || len(bs) != 1 {
		t.Fatalf("breakers: %+v %v", bs, err)
	}
	return bs[0]
}

// TestBreakerProbeWorkerCrash: the worker running a half-open breaker's
// probe dies; the attempt resumed after the crash probes at once (it is the
// same attempt), rather than wait out the dead probe's lease.
func TestBreakerProbeWorkerCrash(t *testing.T) {
	t.Parallel()
	r, begin := probeRig(t)
	b := mustStart(t, r.client, "probe", nil)
	if res := begin(b.ID, "dead", 0); res.Outcome != retrystate.OutcomeOK {
		t.Fatalf("probe's begin: %+v", res)
	}
	if st := breakerState(t, r); st.State != "half_open" {
		t.Fatalf("breaker %+v, want half_open with a probe", st)
	}
	r.clock.Advance(11 * time.Second) // the fence expires; the reconciler re-dispatches
	if rep, err := r.rec.Sweep(ctxb); err != nil || rep.Repairs["crashed_attempt"] != 1 {
		t.Fatalf("sweep: %v %v", rep, err)
	}
	if err := r.deliver(b.ID, "probe", 0, "call", 1, 1); err != nil {
		t.Fatal(err)
	}
	if got := r.get(b.ID); got.Status != workflow.StatusSucceeded {
		t.Errorf("run %s, warning %q, breaker %+v; want the resumed attempt to probe and succeed", got.Status,
			got.Warning, breakerState(t, r))
	}
	if st := breakerState(t, r); st.State != "closed" {
		t.Errorf("breaker %+v, want closed by the resumed probe", st)
	}
}

// TestBreakerProbeCrashFoundByBegin: the same, when a delivery's begin finds
// the dead probe's fence expired.
func TestBreakerProbeCrashFoundByBegin(t *testing.T) {
	t.Parallel()
	r, begin := probeRig(t)
	b := mustStart(t, r.client, "probe", nil)
	if res := begin(b.ID, "dead", 0); res.Outcome != retrystate.OutcomeOK {
		t.Fatalf("probe's begin: %+v", res)
	}
	r.clock.Advance(11 * time.Second)
	res := begin(b.ID, "alive", 0)
	if res.Outcome != retrystate.OutcomeOK || !res.Started.Crashed {
		t.Fatalf("begin after the crash: %+v; want the attempt resumed as the probe", res)
	}
}

// TestBreakerProbeRunCancelled: a cancelled run's running probe frees the
// probe slot: another run probes at once.
func TestBreakerProbeRunCancelled(t *testing.T) {
	t.Parallel()
	r, begin := probeRig(t)
	b := mustStart(t, r.client, "probe", nil)
	if res := begin(b.ID, "gone", 0); res.Outcome != retrystate.OutcomeOK {
		t.Fatalf("probe's begin: %+v", res)
	}
	if _, err := r.client.Cancel(ctxb, b.ID, nil); err != nil {
		t.Fatal(err)
	}
	c := mustStart(t, r.client, "probe", nil)
	if res := begin(c.ID, "next", 0); res.Outcome != retrystate.OutcomeOK {
		t.Fatalf("another run's begin after the probe's run was cancelled: %+v; want it to probe", res)
	}
}
