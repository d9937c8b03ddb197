package workflow_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// TestDirectEnqueueMatchesAsynq: the task that complete.lua creates for the
// next step (tasks.AsynqMessage, written as asynq's enqueue writes it) is the
// task asynq's own client makes from tasks.Options: asynq reads every field
// back the same.
func TestDirectEnqueueMatchesAsynq(t *testing.T) {
	t.Parallel()
	for _, timeout := range []time.Duration{0, 90 * time.Second} {
		e := newEnv(t)
		store := retrystate.New(e.rdb, e.queue)
		ins := asynq.NewInspectorFromRedisClient(e.rdb)
		id := "0000000000000000000000000" + "1"
		now := time.Now()
		_, err := store.CreateRun(ctxb, retrystate.NewRun{ID: id, Workflow: "wf", Input: "{}", Definition: "{}", Now: now,
			Steps: []retrystate.NewStep{{Name: "a", MaxAttempts: 1, MaxCrashes: 1, Policy: "{}"},
				{Name: "b", MaxAttempts: 1, MaxCrashes: 1, Policy: "{}", Timeout: timeout}}})
		if err != nil {
			t.Fatal(err)
		}
		// The queue exists for asynq once anything was enqueued through it.
		first := tasks.Step{RunID: id, Workflow: "wf", Index: 0, Name: "a", Attempt: 1}
		if _, err := asynq.NewClientFromRedisClient(e.rdb).Enqueue(asynq.NewTask(tasks.TypeStep, first.Encode()),
			tasks.Options(e.queue, first.ID(), 0, time.Time{}, now)...); err != nil {
			t.Fatal(err)
		}
		b, err := store.Begin(ctxb, retrystate.BeginArgs{RunID: id, Index: 0, TaskID: first.ID(), Token: "t",
			FenceTTL: time.Minute, Now: now})
		if err != nil || b.Next == nil || b.Next.Name != "b" || b.Next.Attempt != 1 || b.Next.Timeout != timeout {
			t.Fatalf("begin: %+v %v", b, err)
		}
		next := tasks.Step{RunID: id, Workflow: "wf", Index: 1, Name: "b", Attempt: 1}
		c, err := store.Complete(ctxb, retrystate.CompleteArgs{RunID: id, Index: 0, Token: "t", Output: "1", Now: now,
			NextTaskID: next.ID(), NextMessage: next.AsynqMessage(e.queue, b.Next.Timeout)})
		if err != nil || !c.Enqueued {
			t.Fatalf("complete: %+v %v", c, err)
		}
		direct, err := ins.GetTaskInfo(e.queue, next.ID())
		if err != nil {
			t.Fatalf("the directly written task is not readable by asynq: %v", err)
		}
		if err := ins.DeleteTask(e.queue, next.ID()); err != nil {
			t.Fatal(err)
		}
		if _, err := asynq.NewClientFromRedisClient(e.rdb).Enqueue(asynq.NewTask(tasks.TypeStep, next.Encode()),
			tasks.Options(e.queue, next.ID(), timeout, time.Time{}, now)...); err != nil {
			t.Fatal(err)
		}
		viaAsynq, err := ins.GetTaskInfo(e.queue, next.ID())
		if err != nil {
			t.Fatal(err)
		}
		direct.NextProcessAt, viaAsynq.NextProcessAt = time.Time{}, time.Time{}
		if !reflect.DeepEqual(direct, viaAsynq) {
			t.Errorf("timeout %s:\ndirect:     %+v\nasynq's:    %+v", timeout, direct, viaAsynq)
		}
		if direct.State != asynq.TaskStatePending || direct.MaxRetry != tasks.DefaultMaxDeliveries {
			t.Errorf("direct task: %+v", direct)
		}
	}
}
