package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestSignalCommand: status shows what a run waits for, signal delivers,
// start --wait shows the wait and its end.
func TestSignalCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy(), workflow.Definition{Name: "approve", Steps: []workflow.Step{
		{Name: "approval", Await: &workflow.Await{Signal: "approved", Timeout: 48 * time.Hour}},
		{Name: "done", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
			var v struct{ By string }
			if err := sc.DecodeOutput("approval", &v); err != nil {
				return nil, err
			}
			return v.By, nil
		}},
	}})
	id := runID(t, e.run("start", "approve"))
	testkit.Eventually(t, 30*time.Second, "the await to wait", func() bool {
		return e.get(id).Step("approval").Status == workflow.StepWaiting
	})
	st := e.run("status", id)
	mustSucceed(t, st)
	if !strings.Contains(st.stdout, `waiting for:      signal "approved" until `) || !strings.Contains(st.stdout, "(in 4") {
		t.Errorf("status:\n%s", st.stdout)
	}

	checkOneErrorLine(t, e.run("signal", id), 2, "want a run ID and a signal name")
	checkOneErrorLine(t, e.run("signal", id, "approved", "--payload", "{nope"), 2, "--payload is not valid JSON")
	checkOneErrorLine(t, e.run("signal", id, "rejected"), 1, `signal refused: no step of the run awaits signal "rejected"`)
	checkOneErrorLine(t, e.run("signal", workflow.NewRunID(time.Now()), "approved"), 2, "run not found")

	r := e.invoke(invocation{args: []string{"signal", id, "approved", "--payload", "@-", "--id", "k1"},
		stdin: `{"by":"ann"}`, environ: e.environ()})
	mustSucceed(t, r)
	if !strings.HasPrefix(r.stdout, "delivered approved to "+id+": step approval done") {
		t.Errorf("signal printed %q", r.stdout)
	}
	run := e.waitStatus(id, workflow.StatusSucceeded)
	if out := string(run.Step("done").Output); out != `"ann"` {
		t.Errorf("done read %s", out)
	}
	checkOneErrorLine(t, e.run("signal", id, "approved", "--id", "k1"), 1, "signal refused: run already finished")

	// start --wait shows the wait; a signal sent meanwhile ends it.
	done := make(chan result, 1)
	go func() {
		done <- invoke(t, invocation{args: []string{"start", "approve", "--wait"}, environ: e.environ()})
	}()
	var waiting *workflow.Run
	testkit.Eventually(t, 30*time.Second, "a second run to wait", func() bool {
		runs, _, err := e.client.List(context.Background(), workflow.ListOptions{Status: workflow.StatusRunning})
		if err != nil || len(runs) == 0 {
			return false
		}
		waiting = e.get(runs[0].ID)
		return waiting.Step("approval").Status == workflow.StepWaiting
	})
	mustSucceed(t, e.run("signal", waiting.ID, "approved", "--payload", `{"by":"bob"}`))
	res := <-done
	mustSucceed(t, res)
	for _, want := range []string{"approval: waiting for signal approved until ", "approval: signal approved received",
		"run " + waiting.ID + " succeeded"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("start --wait: no %q in\n%s", want, res.stderr)
		}
	}
}
