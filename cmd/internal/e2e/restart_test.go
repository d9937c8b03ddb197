package e2e

import (
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// TestRestartMidBackoff: a worker binary is killed with SIGKILL while a retry
// is scheduled; a new worker process runs the retry at its due time (not
// before), the run succeeds, and no step runs twice.
func TestRestartMidBackoff(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	bin := proctest.Build(t, workerPkg)
	const queue = "restart"
	env := workerEnv(srv, queue, "CAIRN_RETRY_INITIAL_INTERVAL=4s", "CAIRN_RETRY_JITTER=none")
	cfg := workerConfig(t, env)
	client := workflow.NewClient(srv.Client(t), workflow.ClientConfig{Queue: queue})

	w1 := startWorker(t, bin, env)
	run, err := client.Start(ctxb, demo.Name, demo.Input{FailStep: "transform", FailTimes: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var scheduled *workflow.Run
	testkit.Premise(t, 20*time.Second, "transform's retry to be scheduled", func() bool {
		r, err := client.Get(ctxb, run.ID)
		scheduled = r
		return err == nil && r.Step("transform").RetryState == workflow.RetryScheduled
	})
	due := *scheduled.Step("transform").NextAttemptAt
	// Mid-backoff: the retry's task is in asynq's schedule too. (The
	// engine enqueues it right after it records the retry; a kill between
	// the two loses the task, which the reconciler repairs once the run's
	// grace has passed: another case.)
	insp := asynq.NewInspectorFromRedisClient(srv.Client(t))
	retryTask := tasks.ID(run.ID, 1, 2, 0)
	testkit.Premise(t, 10*time.Second, "the retry's asynq task to exist", func() bool {
		info, err := insp.GetTaskInfo(queue, retryTask)
		return err == nil && info.State == asynq.TaskStateScheduled
	})
	w1.Kill(t)
	if !time.Now().Before(due) {
		t.Fatalf("premise: the worker was killed after the retry was due (%s), not mid-backoff", due)
	}
	if r, _ := client.Get(ctxb, run.ID); r.Status != workflow.StatusRunning || r.Warning != workflow.WarningRetryPending {
		t.Fatalf("after the kill: %s, warning %q", r.Status, r.Warning)
	}

	w2 := startWorker(t, bin, env)
	// The retry is late by the time the new worker took to start, if it
	// started after the retry was due: that is not the worker's lateness.
	from := due
	if up := time.Now(); up.After(from) {
		from = up
	}
	final := testkit.WaitRun(t, client, run.ID, 60*time.Second)
	if final.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s: %s\n%s", final.Status, final.FailureReason, w2.Output())
	}
	evs, err := client.Events(ctxb, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for step, want := range map[string]int{"fetch": 1, "transform": 2, "deliver": 1} {
		if got := testkit.CountEvents(evs, workflow.EventAttemptStarted, step); got != want {
			t.Errorf("%s started %d times, want %d", step, got, want)
		}
		if got := testkit.CountEvents(evs, workflow.EventAttemptSucceeded, step); got != 1 {
			t.Errorf("%s succeeded %d times, want 1", step, got)
		}
	}
	if n := testkit.CountEvents(evs, workflow.EventAttemptCrashed, ""); n != 0 {
		t.Errorf("%d crashes recorded; the kill came between attempts", n)
	}
	lateCeiling := dueCeiling(cfg)
	for _, ev := range evs {
		if ev.Type == workflow.EventAttemptStarted && ev.Step == "transform" && ev.Attempt == 2 {
			if ev.At.Before(due) {
				t.Errorf("retry started at %s, before its due time %s", ev.At, due)
			}
			if late := ev.At.Sub(from); late > lateCeiling {
				t.Errorf("retry started %s after its due time or the new worker's start, whichever was later; want within %s",
					late, lateCeiling)
			}
		}
	}
	if tr := final.Step("transform"); tr.Attempts != 2 || tr.RetryAttempts != 1 {
		t.Errorf("transform: attempts %d retries %d", tr.Attempts, tr.RetryAttempts)
	}
}
