package e2e

import (
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestKillWorkerWhilePaused: a run is paused while its step's body runs on
// worker a, and a is killed with SIGKILL. The other worker's sweep finds
// the crash as for any run, and its re-dispatch is parked, not begun: the
// run stays paused, nothing of it runs, and the parked state is in Redis.
// The resume lets the same attempt resume on the live worker, once, and
// the run succeeds with the crash counted and the retry budget untouched.
func TestKillWorkerWhilePaused(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	bin := proctest.Build(t, workerPkg)
	const queue = "killpaused"
	env := workerEnv(srv, queue, "CAIRN_DEMO_CHAOS=true")
	cfg := workerConfig(t, env)
	rdb := srv.Client(t)
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue})
	const step = "s1"

	a := startWorker(t, bin, env)
	run, err := client.Start(ctxb, demo.ChaosName, demo.ChaosInput{BlockStep: step}, nil)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Premise(t, 60*time.Second, step+"'s attempt to be running on worker a", func() bool {
		evs, err := client.Events(ctxb, run.ID)
		audit := readAudit(t, rdb, queue, run.ID)
		return err == nil && testkit.CountEvents(evs, workflow.EventAttemptStarted, step) == 1 &&
			len(audit) == 1 && audit[0].Step == step && audit[0].Phase == "start" && audit[0].PID == a.PID()
	})
	if _, err := client.Pause(ctxb, run.ID, &workflow.ActionOptions{Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	b := startWorker(t, bin, env)
	a.Kill(t)
	if err := rdb.Set(ctxb, demo.ReleaseKey(queue, run.ID), "1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	// As in TestKillWorkerMidStep, a ceiling only a broken sweep misses.
	ceiling := max(4*(cfg.FenceTTL+cfg.SweepInterval+outageGrace), asynqFallback) + 30*time.Second
	testkit.Eventually(t, ceiling, step+"'s re-dispatch to be parked", func() bool {
		evs, err := client.Events(ctxb, run.ID)
		return err == nil && testkit.CountEvents(evs, workflow.EventAttemptCrashed, step) == 1 &&
			testkit.CountEvents(evs, workflow.EventDispatchParked, step) >= 1
	})
	got, err := client.Get(ctxb, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := client.Events(ctxb, run.ID)
	if got.Paused == nil || !got.Paused.Parked || got.Status != workflow.StatusRunning ||
		testkit.CountEvents(evs, workflow.EventAttemptStarted, step) != 1 {
		t.Fatalf("while paused after the crash: %s %+v\n%s", got.Status, got.Paused, journalText(evs))
	}

	if _, err := client.Resume(ctxb, run.ID, &workflow.ActionOptions{Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	final := testkit.WaitRun(t, client, run.ID, 60*time.Second)
	evs, err = client.Events(ctxb, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != workflow.StatusSucceeded || final.Paused != nil {
		t.Fatalf("run %s %+v: %s\n%s\n%s", final.Status, final.Paused, final.FailureReason, journalText(evs), b.Output())
	}
	f := final.Step(step)
	if f.Crashes != 1 || f.Attempts != 1 || f.RetryAttempts != 0 {
		t.Errorf("%s: crashes %d attempts %d retries %d; want 1, 1, 0", step, f.Crashes, f.Attempts, f.RetryAttempts)
	}
	// Begun twice in all: on a, and resumed on b after the resume.
	if n := testkit.CountEvents(evs, workflow.EventAttemptStarted, step); n != 2 {
		t.Errorf("%s began %d times, want 2 (on a, then resumed)\n%s", step, n, journalText(evs))
	}
}
