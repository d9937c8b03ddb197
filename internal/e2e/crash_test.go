package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/tasks/demo"
	"github.com/cairnhq/cairn/workflow"
)

// TestKillWorkerMidStep: a worker process is killed with SIGKILL while a step
// runs. Another worker resumes and finishes the step within 30 s, with
// default settings; the crash is counted and journaled, and the step's retry
// budget is untouched.
func TestKillWorkerMidStep(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	bin := proctest.Build(t, workerPkg)
	const queue = "killmid"
	env := workerEnv(srv, queue)
	client := workflow.NewClient(srv.Client(t), workflow.ClientConfig{Queue: queue})

	a := startWorker(t, bin, env)
	run, err := client.Start(ctxb, demo.Name, demo.Input{StepSleepMS: 3000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "fetch to be running", func() bool {
		r, err := client.Get(ctxb, run.ID)
		return err == nil && r.Step("fetch").Status == workflow.StepRunning
	})
	b := startWorker(t, bin, env)
	a.Kill(t)
	killed := time.Now()

	var resumedIn time.Duration
	testkit.Eventually(t, 45*time.Second, "fetch to succeed on the other worker", func() bool {
		r, err := client.Get(ctxb, run.ID)
		if err == nil && r.Step("fetch").Status == workflow.StepSucceeded {
			resumedIn = time.Since(killed)
			return true
		}
		return false
	})
	if resumedIn > 30*time.Second {
		t.Errorf("the killed step finished %s after the kill; want within 30s", resumedIn)
	}
	final := testkit.WaitRun(t, client, run.ID, 60*time.Second)
	if final.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s: %s\n%s", final.Status, final.FailureReason, b.Output())
	}
	f := final.Step("fetch")
	if f.Crashes != 1 || f.Attempts != 1 || f.RetryAttempts != 0 || f.LastError != "" {
		t.Errorf("fetch: crashes %d attempts %d retries %d last error %q; want 1, 1, 0, none",
			f.Crashes, f.Attempts, f.RetryAttempts, f.LastError)
	}
	evs, _ := client.Events(ctxb, run.ID)
	if n := testkit.CountEvents(evs, workflow.EventAttemptCrashed, "fetch"); n != 1 {
		t.Errorf("%d crash records for fetch, want 1", n)
	}
	if n := testkit.CountEvents(evs, workflow.EventAttemptSucceeded, "fetch"); n != 1 {
		t.Errorf("fetch succeeded %d times", n)
	}
	t.Logf("fetch finished %s after its worker was killed", resumedIn.Round(100*time.Millisecond))
}

// TestRedisRestart: redis-server (appendonly yes, appendfsync always) is
// killed while runs are in flight and started again on the same port and
// data: every run in flight makes progress within 15s of the restart, and
// every run completes, each step succeeding exactly once, with no crash
// counted (no worker died).
func TestRedisRestart(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	bin := proctest.Build(t, workerPkg)
	const queue = "redisrestart"
	env := workerEnv(srv, queue, "CAIRN_RETRY_INITIAL_INTERVAL=200ms", "CAIRN_RETRY_MAX_INTERVAL=1s", "CAIRN_LOG_LEVEL=info")
	client := workflow.NewClient(srv.Client(t), workflow.ClientConfig{Queue: queue})
	startWorker(t, bin, env)
	startWorker(t, bin, env)

	const n = 20
	ids := make([]string, n)
	for i := range ids {
		in := demo.Input{StepSleepMS: 150}
		if i%3 == 0 {
			in.FailStep, in.FailTimes = "transform", 1
		}
		r, err := client.Start(ctxb, demo.Name, in, &workflow.StartOptions{IdempotencyKey: fmt.Sprint("r", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
	}
	testkit.Eventually(t, 30*time.Second, "some runs to make progress", func() bool {
		done, _, err := client.List(ctxb, workflow.ListOptions{Status: workflow.StatusSucceeded})
		running, _, err2 := client.List(ctxb, workflow.ListOptions{Status: workflow.StatusRunning})
		return err == nil && err2 == nil && len(done) >= 1 && len(running) >= 1
	})
	srv.Kill(t)
	killed := time.Now()
	srv.Restart(t)
	assertProgress(t, client, ids, killed, time.Now())

	for _, id := range ids {
		r := testkit.WaitRun(t, client, id, 120*time.Second)
		if r.Status != workflow.StatusSucceeded {
			t.Errorf("run %s: %s %s", id, r.Status, r.FailureReason)
			continue
		}
		evs, err := client.Events(ctxb, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, step := range []string{"fetch", "transform", "deliver"} {
			if c := testkit.CountEvents(evs, workflow.EventAttemptSucceeded, step); c != 1 {
				t.Errorf("run %s: %s succeeded %d times", id, step, c)
			}
		}
		if c := testkit.CountEvents(evs, workflow.EventAttemptCrashed, ""); c != 0 {
			t.Errorf("run %s: %d crashes counted\n%s", id, c, journalText(evs))
		}
	}
}
