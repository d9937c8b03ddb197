package workflow_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// TestAsynqmonActions holds docs/dashboard.md's table of what asynqmon's
// actions (asynq's Inspector, which its buttons call) do to a Cairn run. A
// scheduled retry's task deleted is written again by the reconciler, for
// the same due time (a repair, retry_task_missing); archived, it is
// written again under a new dispatch (task_archived), and running the
// archived one then delivers a stale task, acknowledged without running. A
// running step's task cancelled (CancelProcessing) ends its attempt as a
// failure (context canceled), retried by the step's policy. (Run on a
// scheduled retry: TestRetryNow; on another scheduled task:
// TestAsynqRunTaskOfASleep; a paused queue: tasks' TestDequeue*.)
func TestAsynqmonActions(t *testing.T) {
	t.Parallel()
	for _, action := range []string{"delete", "archive", "cancel"} {
		t.Run(action, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ins := asynq.NewInspectorFromRedisClient(e.rdb)
			started := make(chan struct{}, 1)
			// block's first attempt runs until its context ends; the
			// retry succeeds.
			block := workflow.Definition{Name: "block", Policy: workflow.Policy{MaxAttempts: 3,
				InitialInterval: 50 * time.Millisecond, Jitter: workflow.JitterNone},
				Steps: []workflow.Step{{Name: "wait", Run: func(ctx context.Context, sc *workflow.StepContext) (any, error) {
					if sc.Attempt > 1 {
						return "ok", nil
					}
					started <- struct{}{}
					<-ctx.Done()
					return nil, ctx.Err()
				}}}}
			// The reconciler's pass looks every 200ms at the runs idle for
			// 100ms: a lost task is written again within a second or so.
			e.startWorker(workflow.WorkerConfig{Reconciler: workflow.ReconcilerConfig{Interval: 200 * time.Millisecond,
				Grace: 100 * time.Millisecond}}, backoffDef(), block)
			if action == "cancel" {
				run := mustStart(t, e.client, "block", nil)
				<-started
				// CancelProcessing publishes on asynq's cancel channel, which
				// drops a message no subscriber hears (the worker's
				// subscription may still be on its way): sent until heard.
				e.eventually(30*time.Second, "the attempt cancelled", func() bool {
					if err := ins.CancelProcessing(tasks.ID(run.ID, 0, 1, 0)); err != nil {
						t.Fatal(err)
					}
					return lastEvent(e.events(run.ID), workflow.EventAttemptFailed) != nil
				})
				if end := e.wait(run.ID, 30*time.Second); end.Status != workflow.StatusSucceeded {
					t.Fatalf("run %s: %s", end.Status, end.FailureReason)
				}
				failed := lastEvent(e.events(run.ID), workflow.EventAttemptFailed)
				if failed == nil || failed.Attempt != 1 || !strings.Contains(failed.Details["error"], "context canceled") {
					t.Errorf("the cancelled attempt: %+v, want attempt 1 failed with context canceled", failed)
				}
				return
			}
			run := e.scheduledRetry()
			due := *run.Step("flaky").NextAttemptAt
			id := tasks.ID(run.ID, 0, 2, 0)
			want, kind := id, "retry_task_missing"
			if action == "delete" {
				if err := ins.DeleteTask(e.queue, id); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := ins.ArchiveTask(e.queue, id); err != nil {
					t.Fatal(err)
				}
				want, kind = tasks.ID(run.ID, 0, 2, 1), "task_archived"
			}
			e.eventually(30*time.Second, "the reconciler's repair", func() bool {
				return lastEvent(e.events(run.ID), workflow.EventRepair) != nil
			})
			if ev := lastEvent(e.events(run.ID), workflow.EventRepair); ev.Details["kind"] != kind || ev.Details["task"] != want {
				t.Errorf("repair %+v, want %s of %s", ev, kind, want)
			}
			info, err := ins.GetTaskInfo(e.queue, want)
			if err != nil || info.State != asynq.TaskStateScheduled || !info.NextProcessAt.Equal(tasks.CeilSecond(due)) {
				t.Fatalf("the task written again: %+v %v, want scheduled at %s", info, err, tasks.CeilSecond(due))
			}
			if action == "archive" {
				// asynqmon's Run on the archived task: delivered, stale,
				// acknowledged; the run still waits for its retry.
				if err := ins.RunTask(e.queue, id); err != nil {
					t.Fatal(err)
				}
				e.eventually(30*time.Second, "the archived task's delivery acknowledged", func() bool {
					_, err := ins.GetTaskInfo(e.queue, id)
					return err != nil
				})
			}
			r, err := e.client.Get(ctxb, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if st := r.Step("flaky"); r.Status != workflow.StatusRunning || st.Attempts != 1 || st.NextAttemptAt == nil ||
				!st.NextAttemptAt.Equal(due) {
				t.Errorf("run %s, step %+v; want running, its retry still due at %s", r.Status, st, due)
			}
		})
	}
}
