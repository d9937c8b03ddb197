package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// limit is one policy field, for the precedence table: set writes a value
// of level n (1 global, 2 workflow, 3 step) into a policy, get reads it
// back as text.
type limit struct {
	name string
	set  func(p *workflow.Policy, n int)
	get  func(p workflow.Policy) string
}

var limits = []limit{
	{"max_attempts", func(p *workflow.Policy, n int) { p.MaxAttempts = 10 + n },
		func(p workflow.Policy) string { return fmt.Sprint(p.MaxAttempts) }},
	{"initial_interval", func(p *workflow.Policy, n int) { p.InitialInterval = time.Duration(n) * time.Second },
		func(p workflow.Policy) string { return p.InitialInterval.String() }},
	{"backoff_coefficient", func(p *workflow.Policy, n int) { p.BackoffCoefficient = 1 + float64(n)/10 },
		func(p workflow.Policy) string { return fmt.Sprint(p.BackoffCoefficient) }},
	{"max_interval", func(p *workflow.Policy, n int) { p.MaxInterval = time.Duration(n) * time.Minute },
		func(p workflow.Policy) string { return p.MaxInterval.String() }},
	{"jitter", func(p *workflow.Policy, n int) {
		p.Jitter = []workflow.Jitter{workflow.JitterNone, workflow.JitterFull, workflow.JitterEqual}[n-1]
	}, func(p workflow.Policy) string { return string(p.Jitter) }},
	{"backoff", func(p *workflow.Policy, n int) {
		p.Backoff = []workflow.Backoff{workflow.BackoffFixed, workflow.BackoffLinear, workflow.BackoffExponential}[n-1]
	}, func(p workflow.Policy) string { return string(p.Backoff) }},
	{"step_timeout", func(p *workflow.Policy, n int) { p.StepTimeout = time.Duration(n) * time.Minute },
		func(p workflow.Policy) string { return p.StepTimeout.String() }},
	{"run_timeout", func(p *workflow.Policy, n int) { p.RunTimeout = time.Duration(n) * time.Hour },
		func(p workflow.Policy) string { return p.RunTimeout.String() }},
	{"max_iterations", func(p *workflow.Policy, n int) { p.MaxIterations = 100 * n },
		func(p workflow.Policy) string { return fmt.Sprint(p.MaxIterations) }},
	{"max_crashes", func(p *workflow.Policy, n int) { p.MaxCrashes = n },
		func(p workflow.Policy) string { return fmt.Sprint(p.MaxCrashes) }},
	{"non_retryable_codes", func(p *workflow.Policy, n int) { p.NonRetryableCodes = []string{fmt.Sprintf("code%d", n)} },
		func(p workflow.Policy) string { return strings.Join(p.NonRetryableCodes, ",") }},
	{"unknown_errors", func(p *workflow.Policy, n int) {
		p.UnknownErrors = []workflow.ErrorMode{workflow.UnknownPermanent, workflow.UnknownTransient, workflow.UnknownPermanent}[n-1]
	}, func(p workflow.Policy) string { return string(p.UnknownErrors) }},
}

// TestLimitPrecedence: every limit set globally (the worker's defaults),
// per workflow and per step; the most specific wins, and the run shows the
// values in force for each step as effective_policy.
func TestLimitPrecedence(t *testing.T) {
	t.Parallel()
	levels := []struct {
		name                 string
		global, wf, step     bool
		wantStep, wantOthers int // the level whose value is in force (0: built-in default)
	}{
		{"built-in default", false, false, false, 0, 0},
		{"global", true, false, false, 1, 1},
		{"workflow over global", true, true, false, 2, 2},
		{"step over workflow and global", true, true, true, 3, 2},
		{"step over global", true, false, true, 3, 1},
		{"step alone", false, false, true, 3, 0},
	}
	for _, l := range limits {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			for _, lv := range levels {
				e := newEnv(t)
				var global, wfp, stp workflow.Policy
				if lv.global {
					l.set(&global, 1)
				}
				if lv.wf {
					l.set(&wfp, 2)
				}
				if lv.step {
					l.set(&stp, 3)
				}
				eng, err := workflow.NewEngine(e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log, Defaults: global})
				if err != nil {
					t.Fatalf("%s: %v", lv.name, err)
				}
				def := workflow.Definition{Name: "prec", Policy: wfp, Steps: []workflow.Step{
					{Name: "a", Run: noop, Policy: stp}, {Name: "b", Run: noop}}}
				if err := eng.Register(def); err != nil {
					t.Fatalf("%s: register: %v", lv.name, err)
				}
				if err := eng.Publish(ctxb); err != nil {
					t.Fatal(err)
				}
				run, err := e.client.Start(ctxb, "prec", nil, nil)
				if err != nil {
					t.Fatalf("%s: start: %v", lv.name, err)
				}
				want := func(level int) string {
					if level == 0 {
						return l.get(workflow.DefaultPolicy())
					}
					var p workflow.Policy
					l.set(&p, level)
					return l.get(p)
				}
				a, b := run.Step("a").EffectivePolicy, run.Step("b").EffectivePolicy
				if a == nil || b == nil {
					t.Fatalf("%s: no effective_policy: %+v", lv.name, run.Steps)
				}
				if got := l.get(*a); got != want(lv.wantStep) {
					t.Errorf("%s: step a %s = %q, want %q", lv.name, l.name, got, want(lv.wantStep))
				}
				if got := l.get(*b); got != want(lv.wantOthers) {
					t.Errorf("%s: step b %s = %q, want %q", lv.name, l.name, got, want(lv.wantOthers))
				}
				// The JSON a user sees names the field the same way.
				if !strings.Contains(string(mustJSON(t, run)), `"effective_policy"`) {
					t.Errorf("%s: status JSON has no effective_policy", lv.name)
				}
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// alwaysFailing counts its executions and always fails transiently.
func alwaysFailing(n *atomic.Int64) workflow.StepFunc {
	return func(context.Context, *workflow.StepContext) (any, error) {
		n.Add(1)
		return nil, errors.New("downstream unavailable")
	}
}

func limitPolicy() workflow.Policy {
	return workflow.Policy{InitialInterval: 20 * time.Millisecond, MaxInterval: 50 * time.Millisecond,
		Jitter: workflow.JitterNone, MaxAttempts: 10}
}

// TestMaxAttemptsBoundary: a step makes exactly its (step-level) max
// attempts, however many the workflow allows.
func TestMaxAttemptsBoundary(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var n atomic.Int64
	e.startWorker(workflow.WorkerConfig{}, workflow.Definition{Name: "bound", Policy: limitPolicy(),
		Steps: []workflow.Step{{Name: "s", Run: alwaysFailing(&n), Policy: workflow.Policy{MaxAttempts: 3}}}})
	run := mustStart(t, e.client, "bound", nil)
	run = e.wait(run.ID, 10*time.Second)
	if run.FailureCode != workflow.CodeRetriesExhausted || n.Load() != 3 || run.Step("s").Attempts != 3 {
		t.Fatalf("code %q, executions %d, attempts %d; want retries_exhausted after exactly 3",
			run.FailureCode, n.Load(), run.Step("s").Attempts)
	}
	if !strings.Contains(run.FailureReason, "max_attempts 3") {
		t.Errorf("reason %q does not name the limit", run.FailureReason)
	}
}

// TestIterationCeiling: a run stops exactly at its iteration ceiling (step
// executions, retries included); a step-level ceiling wins over the
// workflow's.
func TestIterationCeiling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		wf, step int
		want     int64
	}{
		{"workflow ceiling", 4, 0, 4},
		{"step ceiling wins", 8, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var n atomic.Int64
			pol := limitPolicy()
			pol.MaxIterations = tc.wf
			e.startWorker(workflow.WorkerConfig{}, workflow.Definition{Name: "iter", Policy: pol,
				Steps: []workflow.Step{{Name: "s", Run: alwaysFailing(&n), Policy: workflow.Policy{MaxIterations: tc.step}}}})
			run := mustStart(t, e.client, "iter", nil)
			run = e.wait(run.ID, 10*time.Second)
			if run.FailureCode != workflow.CodeMaxIterationsExceeded || n.Load() != tc.want || run.Iterations != int(tc.want) {
				t.Fatalf("code %q, executions %d, iterations %d; want max_iterations_exceeded after exactly %d",
					run.FailureCode, n.Load(), run.Iterations, tc.want)
			}
			if !strings.Contains(run.FailureReason, fmt.Sprintf("max_iterations %d", tc.want)) {
				t.Errorf("reason %q does not name the limit", run.FailureReason)
			}
			evs := e.events(run.ID)
			last := evs[len(evs)-1]
			if last.Type != workflow.EventRunFailed || last.Details["code"] != workflow.CodeMaxIterationsExceeded ||
				!strings.Contains(last.Details["reason"], "max_iterations") {
				t.Errorf("journal's last entry %+v", last)
			}
		})
	}
}

// TestDeadlineBetweenAttempts: a run whose next attempt would start after
// its deadline fails with run_timeout when the attempt before fails, not
// later, and the reason names the limit. Time is the rig's clock: each
// attempt is delivered exactly when due, whatever the machine's load.
func TestDeadlineBetweenAttempts(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	pol := limitPolicy()
	pol.InitialInterval, pol.MaxInterval = 400*time.Millisecond, 400*time.Millisecond
	pol.RunTimeout = 1500 * time.Millisecond
	r := newRig(t, workflow.Definition{Name: "deadline", Policy: pol,
		Steps: []workflow.Step{{Name: "s", Run: alwaysFailing(&n)}}})
	run := mustStart(t, r.client, "deadline", nil)
	created := r.clock.Now()
	// Attempts at 0, 0.4, 0.8 and 1.2 s; the one after would start at
	// 1.6 s, past the 1.5 s deadline, so the fourth failure fails the run.
	for attempt := 1; attempt <= 4; attempt++ {
		if err := r.deliver(run.ID, "deadline", 0, "s", attempt, 0); err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		got := r.get(run.ID)
		if attempt < 4 {
			if got.Status != workflow.StatusRunning || got.Step("s").NextAttemptAt == nil ||
				!got.Step("s").NextAttemptAt.Equal(created.Add(time.Duration(attempt)*400*time.Millisecond).Truncate(time.Millisecond)) {
				t.Fatalf("after attempt %d: %s, next attempt at %v", attempt, got.Status, got.Step("s").NextAttemptAt)
			}
			r.clock.Advance(400 * time.Millisecond)
			continue
		}
		if got.FailureCode != workflow.CodeRunTimeout ||
			!strings.Contains(got.FailureReason, "next attempt would start after the run's deadline (run_timeout 1500ms)") {
			t.Fatalf("after attempt 4: code %q reason %q, want run_timeout", got.FailureCode, got.FailureReason)
		}
		if got.FinishedAt == nil || !got.FinishedAt.Equal(created.Add(1200*time.Millisecond).Truncate(time.Millisecond)) {
			t.Errorf("failed at %v, want when the fourth attempt failed (1.2s)", got.FinishedAt)
		}
	}
	if got := n.Load(); got != 4 {
		t.Errorf("%d executions, want 4 within a 1.5s deadline at 0.4s intervals", got)
	}
}

// TestDeadlinePassedBeforeDelivery: a retry delivered after the run's
// deadline (asynq late, the workers busy) runs nothing: its begin fails the
// run with run_timeout, and the reason names the limit.
func TestDeadlinePassedBeforeDelivery(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	pol := limitPolicy()
	pol.InitialInterval, pol.MaxInterval = 400*time.Millisecond, 400*time.Millisecond
	pol.RunTimeout = 1500 * time.Millisecond
	r := newRig(t, workflow.Definition{Name: "late", Policy: pol,
		Steps: []workflow.Step{{Name: "s", Run: alwaysFailing(&n)}}})
	run := mustStart(t, r.client, "late", nil)
	if err := r.deliver(run.ID, "late", 0, "s", 1, 0); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(1600 * time.Millisecond)
	if err := r.deliver(run.ID, "late", 0, "s", 2, 0); err != nil {
		t.Fatal(err)
	}
	got := r.get(run.ID)
	if got.FailureCode != workflow.CodeRunTimeout ||
		!strings.Contains(got.FailureReason, `run passed its deadline (run_timeout 1500ms) before step "s" attempt 2`) {
		t.Fatalf("code %q reason %q", got.FailureCode, got.FailureReason)
	}
	if n.Load() != 1 {
		t.Errorf("%d executions, want 1: the late retry must not run", n.Load())
	}
}

// TestStepRunTimeoutWins: a step-level run timeout is the run's deadline
// while that step is current: it may tighten the workflow's.
func TestStepRunTimeoutWins(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	slow := func(ctx context.Context, _ *workflow.StepContext) (any, error) {
		select {
		case <-time.After(300 * time.Millisecond):
			return "done", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	pol := limitPolicy()
	pol.RunTimeout = time.Hour
	var n atomic.Int64
	e.startWorker(workflow.WorkerConfig{}, workflow.Definition{Name: "tight", Policy: pol,
		Steps: []workflow.Step{
			{Name: "first", Run: slow},
			// The run is already older than 100ms when this step is due.
			{Name: "second", Run: alwaysFailing(&n), Policy: workflow.Policy{RunTimeout: 100 * time.Millisecond}},
		}})
	run := mustStart(t, e.client, "tight", nil)
	if run.Deadline == nil || time.Until(*run.Deadline) < 50*time.Minute {
		t.Fatalf("deadline while the first step is current: %v, want about an hour", run.Deadline)
	}
	run = e.wait(run.ID, 10*time.Second)
	if run.FailureCode != workflow.CodeRunTimeout || run.Step("first").Status != workflow.StepSucceeded || n.Load() != 0 {
		t.Fatalf("code %q, first %s, second ran %d times; want run_timeout before the second step",
			run.FailureCode, run.Step("first").Status, n.Load())
	}
	if !strings.Contains(run.FailureReason, `(run_timeout 100ms) before step "second"`) {
		t.Errorf("reason %q", run.FailureReason)
	}
	if run.Step("second").EffectivePolicy.RunTimeout != 100*time.Millisecond ||
		run.Step("first").EffectivePolicy.RunTimeout != time.Hour {
		t.Errorf("effective run timeouts: first %s, second %s", run.Step("first").EffectivePolicy.RunTimeout,
			run.Step("second").EffectivePolicy.RunTimeout)
	}
}
