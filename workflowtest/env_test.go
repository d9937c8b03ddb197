package workflowtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflowtest"
)

func ok(out any) workflow.StepFunc {
	return func(context.Context, *workflow.StepContext) (any, error) { return out, nil }
}

// A transient failure injected on attempt 1: the retry is scheduled for
// now + the backoff, exactly, and runs when the clock gets there.
func TestRetryAfterTransientFailure(t *testing.T) {
	def := workflow.Definition{
		Name:   "order",
		Policy: workflow.Policy{InitialInterval: 1500 * time.Millisecond, Jitter: workflow.JitterNone},
		Steps: []workflow.Step{
			{Name: "reserve", Run: ok("r1")},
			{Name: "charge", Run: ok("ch_1")},
		},
	}
	env := workflowtest.New(t, def)
	env.FailStep("charge", 1, workflow.Transient(errors.New("gateway timeout")))

	start := env.Now()
	run, err := env.Start("order", map[string]int{"id": 42}, nil)
	if err != nil {
		t.Fatal(err)
	}
	charge := run.Step("charge")
	if run.Status != workflow.StatusRunning && run.Status != workflow.StatusPending {
		t.Fatalf("run %s", run.Status)
	}
	if charge.RetryState != workflow.RetryScheduled || charge.NextAttemptAt == nil ||
		!charge.NextAttemptAt.Equal(start.Add(1500*time.Millisecond)) {
		t.Fatalf("charge: %+v", charge)
	}
	if err := env.Advance(1499 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	env.RequireStatus(t, run.ID, run.Status)
	if err := env.Advance(time.Millisecond); err != nil {
		t.Fatal(err)
	}
	env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
	var out string
	env.RequireOutput(t, run.ID, "charge", &out)
	if out != "ch_1" {
		t.Errorf("output %q", out)
	}
	ev := env.RequireEvent(t, run.ID, workflow.EventAttemptSucceeded, "charge")
	if ev.Attempt != 2 || !ev.At.Equal(start.Add(1500*time.Millisecond)) {
		t.Errorf("succeeded %+v", ev)
	}
	evs, _ := env.Events(run.ID)
	t.Log("\n" + workflowtest.FormatEvents(evs))
}
