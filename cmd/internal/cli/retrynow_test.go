package cli_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestRetryNow: retry --now makes a running run's scheduled retry (an
// hour away) due at once, and --wait follows the run to its end; it is
// refused (exit 1, one line, nothing written) for a step that does not
// wait out a backoff, and completion offers the step that does.
func TestRetryNow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(workflow.Policy{}, workflow.Definition{Name: "backoff",
		Policy: workflow.Policy{MaxAttempts: 3, InitialInterval: time.Hour, MaxInterval: time.Hour,
			Jitter: workflow.JitterNone},
		Steps: []workflow.Step{{Name: "call", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
			if sc.Attempt == 1 {
				return nil, errors.New("503 from upstream")
			}
			return "ok", nil
		}}}})
	id := runID(t, e.run("start", "backoff"))
	testkit.Eventually(t, 30*time.Second, "the retry to be scheduled", func() bool {
		return e.get(id).Step("call").RetryState == workflow.RetryScheduled
	})
	answers, _ := completions(t, e.environ(), "retry", id, "--now", "--step", "")
	if values(answers) != "call" || !strings.Contains(answers[0], "retry due ") {
		t.Errorf("retry --now --step completes %q, want call", answers)
	}
	events := func() int {
		evs, err := e.client.Events(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	journal := events()
	checkOneErrorLine(t, e.run("retry", id, "--step", "nope", "--now"), 1, "retry --now refused: step \"nope\" is not waiting out")
	if n := events(); n != journal {
		t.Errorf("a refused retry --now wrote %d journal entries", n-journal)
	}
	r := e.run("retry", id, "--step", "call", "--now", "--wait")
	mustSucceed(t, r)
	if !strings.HasPrefix(r.stdout, "retrying now "+id+": running, at step call") {
		t.Errorf("retry --now printed %q", r.stdout)
	}
	run := e.get(id)
	if run.Status != workflow.StatusSucceeded || run.Step("call").Attempts != 2 {
		t.Errorf("run %s with %d attempts, want succeeded with 2", run.Status, run.Step("call").Attempts)
	}
	checkOneErrorLine(t, e.run("retry", id, "--step", "call", "--now"), 1, "run is succeeded")
}
