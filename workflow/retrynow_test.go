package workflow_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// backoffDef is a workflow whose one step fails its first attempt and then
// waits an hour for its retry, which succeeds: a run that ends within the
// test's deadline had its retry made due now.
func backoffDef() workflow.Definition {
	var failed atomic.Bool
	return workflow.Definition{Name: "backoff",
		Policy: workflow.Policy{MaxAttempts: 3, InitialInterval: time.Hour, MaxInterval: time.Hour,
			Jitter: workflow.JitterNone},
		Steps: []workflow.Step{{Name: "flaky", Run: func(context.Context, *workflow.StepContext) (any, error) {
			if !failed.Swap(true) {
				return nil, errors.New("503 from upstream")
			}
			return "ok", nil
		}}}}
}

// scheduledRetry starts a run of backoffDef and waits until its retry is
// scheduled (an hour away).
func (e *env) scheduledRetry() *workflow.Run {
	e.t.Helper()
	run := mustStart(e.t, e.client, "backoff", nil)
	e.eventually(30*time.Second, "the retry scheduled", func() bool {
		r, err := e.client.Get(ctxb, run.ID)
		return err == nil && r.Step("flaky").RetryState == workflow.RetryScheduled
	})
	r, err := e.client.Get(ctxb, run.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	if due := r.Step("flaky").NextAttemptAt; due == nil || time.Until(*due) < 50*time.Minute {
		e.t.Fatalf("premise: the retry is due at %v, not in an hour", due)
	}
	return r
}

// TestRetryNow: a step waiting out its backoff is made due at once, by an
// operator (Client.RetryNow) or by asynq's Inspector.RunTask (asynqmon's
// "Run"), on Cairn's own dequeue and on asynq's: the run goes on with its
// attempt 2, which is begun once (no second task), and the journal says
// who. A refusal writes nothing.
func TestRetryNow(t *testing.T) {
	t.Parallel()
	for _, dq := range []string{workflow.DequeueCairn, workflow.DequeueAsynq} {
		for _, by := range []string{"client", "asynq RunTask"} {
			t.Run(dq+"/"+by, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t)
				e.startWorker(workflow.WorkerConfig{Dequeue: dq}, backoffDef())
				run := e.scheduledRetry()
				before := len(e.events(run.ID))
				for _, step := range []string{"nope", ""} {
					if _, err := e.client.RetryNow(ctxb, run.ID, step, nil); !errors.Is(err, workflow.ErrActionRefused) {
						t.Errorf("retry now of step %q: %v, want ErrActionRefused", step, err)
					}
				}
				if n := len(e.events(run.ID)); n != before {
					t.Errorf("a refused retry now wrote %d journal entries", n-before)
				}
				actor := "alice"
				switch by {
				case "client":
					after, err := e.client.RetryNow(ctxb, run.ID, "flaky", &workflow.ActionOptions{Actor: actor})
					if err != nil {
						t.Fatal(err)
					}
					if after.ID != run.ID {
						t.Errorf("RetryNow returned run %s", after.ID)
					}
				default:
					actor = workflow.AsynqRunTaskActor
					ins := asynq.NewInspectorFromRedisClient(e.rdb)
					if err := ins.RunTask(e.queue, tasks.ID(run.ID, 0, 2, 0)); err != nil {
						t.Fatalf("asynq's RunTask: %v", err)
					}
				}
				// The backoff is an hour: only a retry made due now ends the
				// run within the deadline.
				if end := e.wait(run.ID, time.Minute); end.Status != workflow.StatusSucceeded {
					t.Fatalf("run %s: %s", end.Status, end.FailureReason)
				}
				started, nows := 0, 0
				for _, ev := range e.events(run.ID) {
					switch ev.Type {
					case workflow.EventAttemptStarted:
						started++
					case workflow.EventRetryNow:
						nows++
						if ev.Step != "flaky" || ev.Attempt != 2 || ev.Details["actor"] != actor || ev.Details["due_at"] == "" {
							t.Errorf("retry_now entry: %+v", ev)
						}
						via := map[string]string{"client": "operator", "asynq RunTask": "asynq_run_task"}[by]
						if ev.Details["via"] != via {
							t.Errorf("retry_now via %q, want %q", ev.Details["via"], via)
						}
					}
				}
				if started != 2 || nows != 1 {
					t.Errorf("%d attempts started, %d retry_now entries; want 2 and 1", started, nows)
				}
				if _, err := e.client.RetryNow(ctxb, run.ID, "flaky", nil); !errors.Is(err, workflow.ErrActionRefused) {
					t.Errorf("retry now of a succeeded run: %v, want ErrActionRefused", err)
				}
			})
		}
	}
}

// TestAsynqRunTaskOfASleep: asynq's RunTask on a task Cairn cannot run
// early (a sleep's wake-up: not a retry) leaves it in asynq's retry set,
// with a last error that says why and when it is due, and the run keeps
// sleeping.
func TestAsynqRunTaskOfASleep(t *testing.T) {
	t.Parallel()
	for _, dq := range []string{workflow.DequeueCairn, workflow.DequeueAsynq} {
		t.Run(dq, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.startWorker(workflow.WorkerConfig{Dequeue: dq}, workflow.Definition{Name: "nap",
				Steps: []workflow.Step{{Name: "nap", Sleep: &workflow.Sleep{For: time.Hour}}}})
			run := mustStart(t, e.client, "nap", nil)
			ins := asynq.NewInspectorFromRedisClient(e.rdb)
			var wake string
			e.eventually(30*time.Second, "the sleep's wake-up scheduled", func() bool {
				ts, err := ins.ListScheduledTasks(e.queue)
				if err == nil && len(ts) == 1 {
					wake = ts[0].ID
				}
				return wake != ""
			})
			if err := ins.RunTask(e.queue, wake); err != nil {
				t.Fatalf("asynq's RunTask: %v", err)
			}
			var info *asynq.TaskInfo
			e.eventually(30*time.Second, "the wake-up handed back to asynq's retry set", func() bool {
				var err error
				info, err = ins.GetTaskInfo(e.queue, wake)
				return err == nil && info.State == asynq.TaskStateRetry
			})
			if !strings.Contains(info.LastErr, "not due until") || !strings.Contains(info.LastErr, "Retry now") {
				t.Errorf("the task's last error says %q", info.LastErr)
			}
			if time.Until(info.NextProcessAt) < 50*time.Minute {
				t.Errorf("handed back until %s, before the sleep's end", info.NextProcessAt)
			}
			r, err := e.client.Get(ctxb, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if st := r.Step("nap"); r.Status != workflow.StatusRunning || st.Status != workflow.StepWaiting {
				t.Errorf("run %s, step %s; want running and waiting", r.Status, st.Status)
			}
			for _, ev := range e.events(run.ID) {
				if ev.Type == workflow.EventRetryNow {
					t.Errorf("journaled %+v", ev)
				}
			}
		})
	}
}
