package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestPauseResume: enqueue pause and resume, their no-ops, the paused
// state in status and list (and list --paused), a finished run refused
// with exit 1, bad arguments with exit 2.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A long backoff keeps the retry pending while the test pauses.
	e.startWorker(workflow.Policy{InitialInterval: 5 * time.Second, MaxInterval: 10 * time.Second,
		Jitter: workflow.JitterNone})
	r := e.run("start", "demo", "--input", `{"fail_step":"fetch","fail_times":1}`)
	mustSucceed(t, r)
	id := runID(t, r)
	other := runID(t, e.run("start", "demo", "--input", `{"fail_step":"fetch","fail_times":1}`))
	testkit.Eventually(t, 10*time.Second, "the retry of fetch to be scheduled", func() bool {
		st := e.get(id).Step("fetch")
		return st != nil && st.RetryState == workflow.RetryScheduled
	})

	r = e.run("pause", id)
	mustSucceed(t, r)
	if !strings.HasPrefix(r.stdout, "paused "+id+": it begins no new attempt") || r.stderr != "" {
		t.Errorf("pause printed %v", r)
	}
	r = e.run("pause", id, "--json")
	mustSucceed(t, r)
	var run workflow.Run
	decode(t, r.stdout, &run)
	if run.Paused == nil || run.Paused.By != "cli" || run.Status != workflow.StatusRunning {
		t.Errorf("paused twice: %+v", run.Paused)
	}
	r = e.run("status", id)
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, "paused:") || !strings.Contains(r.stdout, "by cli since") {
		t.Errorf("status of a paused run:\n%s", r.stdout)
	}
	r = e.run("list", "--paused")
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, id) || strings.Contains(r.stdout, other) || !strings.Contains(r.stdout, "paused") {
		t.Errorf("list --paused:\n%s", r.stdout)
	}
	var evs []workflow.Event
	decode(t, e.run("events", id, "--json").stdout, &evs)
	if n := testkit.CountEvents(evs, workflow.EventPaused, ""); n != 1 {
		t.Errorf("%d paused entries, want 1", n)
	}

	r = e.run("resume", id)
	mustSucceed(t, r)
	if r.stdout != "resumed "+id+": running\n" {
		t.Errorf("resume printed %v", r)
	}
	mustSucceed(t, e.run("resume", id)) // not paused: a no-op
	if e.get(id).Paused != nil {
		t.Error("the run is still paused")
	}

	// A finished run is refused (exit 1) and left as it was.
	r = e.run("start", "demo", "--wait")
	mustSucceed(t, r)
	done := runID(t, r)
	for _, cmd := range []string{"pause", "resume"} {
		r = e.run(cmd, done)
		checkOneErrorLine(t, r, 1, cmd+" refused: run "+done+" already finished (succeeded)")
	}
	if got := e.get(done); got.Status != workflow.StatusSucceeded || got.Paused != nil {
		t.Errorf("a refused pause left the run %s %+v", got.Status, got.Paused)
	}
	// Usage errors: exit 2.
	for _, args := range [][]string{{"pause"}, {"resume", id, "extra"}, {"pause", "not-a-run-id!"}} {
		if r := e.run(args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
	mustSucceed(t, e.run("cancel", other))
}
