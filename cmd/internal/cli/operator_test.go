package cli_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// startOptionalWorker runs a worker with the demo workflow and a workflow
// "notifying" whose last step, notify, is optional and always fails
// permanently.
func (e *env) startOptionalWorker() {
	e.t.Helper()
	e.startWorker(fastPolicy(), workflow.Definition{Name: "notifying", Steps: []workflow.Step{
		{Name: "work", Run: func(context.Context, *workflow.StepContext) (any, error) { return "done", nil }},
		{Name: "notify", Optional: true, Run: func(context.Context, *workflow.StepContext) (any, error) {
			return nil, workflow.Permanent(errors.New("webhook returned 410 Gone"))
		}},
	}})
}

func (e *env) waitStatus(id string, status workflow.RunStatus) *workflow.Run {
	e.t.Helper()
	var run *workflow.Run
	testkit.Eventually(e.t, 30*time.Second, "run "+id+" to be "+string(status), func() bool {
		run = e.get(id)
		return run.Status == status
	})
	return run
}

func TestRecoverRetrySkip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startOptionalWorker()

	// fetch fails on its first 5 attempts: the run fails after 4.
	id := runID(t, e.run("start", "demo", "--input", `{"fail_step":"fetch","fail_times":5}`))
	e.waitStatus(id, workflow.StatusFailed)
	checkOneErrorLine(t, e.run("skip", id, "--step", "fetch"), 1, "not optional")
	checkOneErrorLine(t, e.run("retry", id, "--step", "deliver"), 1, `only the step the run stopped at ("fetch")`)
	checkOneErrorLine(t, e.run("retry", id), 2, "retry needs --step NAME")
	if e.get(id).Status != workflow.StatusFailed {
		t.Fatal("a refused action changed the run")
	}

	// recover: a fresh budget of 4 from attempt 5; fetch succeeds on 6.
	r := e.run("recover", id)
	mustSucceed(t, r)
	if !strings.HasPrefix(r.stdout, "recovered "+id+": running, at step fetch") {
		t.Errorf("recover printed %q", r.stdout)
	}
	// A second recover is refused: the run is running again, or has
	// already succeeded (its steps are quick), but no longer failed.
	again := e.run("recover", id)
	checkOneErrorLine(t, again, 1, "refused: run is ")
	if !strings.Contains(again.stderr, "run is running") && !strings.Contains(again.stderr, "run is succeeded") {
		t.Errorf("second recover: %q; want a refusal of a running or succeeded run", again.stderr)
	}
	run := e.waitStatus(id, workflow.StatusSucceeded)
	if f := run.Step("fetch"); f.Attempts != 6 {
		t.Errorf("fetch attempts %d, want 6", f.Attempts)
	}

	// retry --step: the same with the step named.
	id2 := runID(t, e.run("start", "demo", "--input", `{"fail_step":"transform","fail_times":4}`))
	e.waitStatus(id2, workflow.StatusFailed)
	mustSucceed(t, e.run("retry", id2, "--step", "transform"))
	if run := e.waitStatus(id2, workflow.StatusSucceeded); run.Step("fetch").Attempts != 1 {
		t.Errorf("retry re-ran fetch: %d attempts", run.Step("fetch").Attempts)
	}

	// skip of a failed optional step ends the run successfully.
	id3 := runID(t, e.run("start", "notifying"))
	e.waitStatus(id3, workflow.StatusFailed)
	r = e.run("skip", "--json", id3, "--step", "notify")
	mustSucceed(t, r)
	var skipped workflow.Run
	decode(t, r.stdout, &skipped)
	if skipped.Status != workflow.StatusSucceeded || skipped.Step("notify").Status != workflow.StepSkipped {
		t.Errorf("after skip: %s, notify %s", skipped.Status, skipped.Step("notify").Status)
	}

	// The journal names the actor.
	evs, err := e.client.Events(context.Background(), id3)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range evs {
		found = found || (ev.Type == workflow.EventStepSkipped && ev.Details["actor"] == "cli")
	}
	if !found {
		t.Error("no step_skipped event with actor cli")
	}

	// Unknown and malformed run IDs.
	checkOneErrorLine(t, e.run("recover", workflow.NewRunID(time.Now())), 2, "run not found")
	checkOneErrorLine(t, e.run("skip", "not-a-run", "--step", "x"), 2, "invalid run ID")
}

// lastAttemptFailed returns the attempt number of the run's last
// attempt_failed journal entry of step.
func (e *env) lastAttemptFailed(id, step string) int {
	e.t.Helper()
	evs, err := e.client.Events(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == workflow.EventAttemptFailed && ev.Step == step {
			n = ev.Attempt
		}
	}
	return n
}

// TestRecoverWaitAttemptNumbers: after recover, retry --step and a fresh
// budget, the failure that ends the run names the step's attempt as the
// journal and the progress lines do, and says which of the new budget it
// was; before, it counted only the attempts since the action ("attempt 1"
// where the journal said attempt 2).
func TestRecoverWaitAttemptNumbers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())

	id := runID(t, e.run("start", "demo", "--input", `{"fail_step":"fetch","permanent":true}`))
	run := e.waitStatus(id, workflow.StatusFailed)
	if want := `step "fetch" failed with a permanent error on attempt 1: `; !strings.HasPrefix(run.FailureReason, want) {
		t.Errorf("first failure %q, want it to start %q", run.FailureReason, want)
	}
	for i, args := range [][]string{{"recover", id, "--wait"}, {"retry", id, "--step", "fetch", "--wait"}} {
		attempt := i + 2
		r := e.run(args...)
		if r.code != 1 {
			t.Fatalf("%s: exit %d, want 1 (the run fails again): %v", args[0], r.code, r)
		}
		if got := e.lastAttemptFailed(id, "fetch"); got != attempt {
			t.Errorf("%s: the journal's last failed attempt is %d, want %d", args[0], got, attempt)
		}
		if !strings.Contains(r.stderr, fmt.Sprintf("fetch: attempt %d failed permanently: ", attempt)) {
			t.Errorf("%s: the progress does not show attempt %d failing:\n%s", args[0], attempt, r.stderr)
		}
		want := fmt.Sprintf(`failed with a permanent error on attempt %d (the first since it was started again): `, attempt)
		if last := lastLine(r.stderr); !strings.HasPrefix(last, "enqueue: run "+id+" failed: ") || !strings.Contains(last, want) {
			t.Errorf("%s: last line %q, want it to say %q", args[0], last, want)
		}
	}

	// A budget used up after a recover: attempts 5 to 8.
	id2 := runID(t, e.run("start", "demo", "--input", `{"fail_step":"fetch","fail_times":100}`))
	if run := e.waitStatus(id2, workflow.StatusFailed); !strings.Contains(run.FailureReason, `failed after 4 attempts (max_attempts 4)`) {
		t.Errorf("first failure %q, want after 4 attempts", run.FailureReason)
	}
	r := e.run("recover", id2, "--wait")
	if r.code != 1 {
		t.Fatalf("recover --wait: exit %d, want 1: %v", r.code, r)
	}
	if got := e.lastAttemptFailed(id2, "fetch"); got != 8 {
		t.Errorf("the journal's last failed attempt is %d, want 8", got)
	}
	want := `step "fetch" failed after 4 attempts since it was started again, attempts 5 to 8 (max_attempts 4): `
	if last := lastLine(r.stderr); !strings.Contains(last, want) {
		t.Errorf("last line %q, want it to say %q", last, want)
	}
}
