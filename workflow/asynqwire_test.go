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
		_, err := store.CreateRun(ctxb, retrystate.NewRun{ID: id, Workflow: "wf", Input: "{}", Now: now,
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
		b, err := store.Begin(ctxb, retrystate.BeginParams{RunID: id, Index: 0, TaskID: first.ID(), Token: "t",
			FenceTTL: time.Minute, Now: now})
		if err != nil || b.Outcome != retrystate.OutcomeOK || b.Started.Next == nil || b.Started.Next.Name != "b" ||
			b.Started.Next.Attempt != 1 || b.Started.Next.Timeout != timeout {
			t.Fatalf("begin: %+v %v", b, err)
		}
		next := tasks.Step{RunID: id, Workflow: "wf", Index: 1, Name: "b", Attempt: 1}
		c, err := store.Complete(ctxb, retrystate.CompleteParams{RunID: id, Index: 0, Token: "t", Output: "1", Now: now,
			NextTaskID: next.ID(), NextMessage: next.AsynqMessage(e.queue, b.Started.Next.Timeout)})
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

// TestDirectRetryMatchesAsynq: the retry task that fail.lua writes with the
// retry (scheduled for its due time, or pending when due at once) is the
// task asynq's own client makes from tasks.Options for the same dispatch.
func TestDirectRetryMatchesAsynq(t *testing.T) {
	t.Parallel()
	// A minute and a half-second: asynq's client, given the due time
	// below, decides scheduled or pending by its own clock, so the retry
	// must still be in the future however long the machine takes to get
	// there; the half-second exercises the rounding to whole seconds.
	for _, delay := range []time.Duration{0, time.Minute + 500*time.Millisecond} {
		e := newEnv(t)
		store := retrystate.New(e.rdb, e.queue)
		ins := asynq.NewInspectorFromRedisClient(e.rdb)
		id := "0000000000000000000000000" + "2"
		now := time.Now()
		const timeout = 90 * time.Second
		if _, err := store.CreateRun(ctxb, retrystate.NewRun{ID: id, Workflow: "wf", Input: "{}", Now: now,
			Steps: []retrystate.NewStep{{Name: "a", MaxAttempts: 3, MaxCrashes: 1, Policy: "{}", Timeout: timeout}}}); err != nil {
			t.Fatal(err)
		}
		first := tasks.Step{RunID: id, Workflow: "wf", Index: 0, Name: "a", Attempt: 1}
		if _, err := asynq.NewClientFromRedisClient(e.rdb).Enqueue(asynq.NewTask(tasks.TypeStep, first.Encode()),
			tasks.Options(e.queue, first.ID(), timeout, time.Time{}, now)...); err != nil {
			t.Fatal(err)
		}
		if b, err := store.Begin(ctxb, retrystate.BeginParams{RunID: id, Index: 0, TaskID: first.ID(), Token: "t",
			FenceTTL: time.Minute, Now: now}); err != nil || b.Outcome != retrystate.OutcomeOK {
			t.Fatalf("begin: %+v %v", b, err)
		}
		retry := tasks.Step{RunID: id, Workflow: "wf", Index: 0, Name: "a", Attempt: 2}
		res, err := store.Fail(ctxb, retrystate.FailParams{RunID: id, Index: 0, Token: "t", Error: "boom",
			Class: retrystate.ClassTransient, Delay: delay, Now: now,
			RetryTaskID: retry.ID(), RetryMessage: retry.AsynqMessage(e.queue, timeout)})
		if err != nil || !res.Enqueued || res.Outcome != retrystate.OutcomeRetry {
			t.Fatalf("fail: %+v %v", res, err)
		}
		direct, err := ins.GetTaskInfo(e.queue, retry.ID())
		if err != nil {
			t.Fatalf("delay %s: the directly written retry is not readable by asynq: %v", delay, err)
		}
		if err := ins.DeleteTask(e.queue, retry.ID()); err != nil {
			t.Fatal(err)
		}
		if _, err := asynq.NewClientFromRedisClient(e.rdb).Enqueue(asynq.NewTask(tasks.TypeStep, retry.Encode()),
			tasks.Options(e.queue, retry.ID(), timeout, res.Dispatch.DueAt, now)...); err != nil {
			t.Fatal(err)
		}
		viaAsynq, err := ins.GetTaskInfo(e.queue, retry.ID())
		if err != nil {
			t.Fatal(err)
		}
		if delay == 0 {
			// A pending task's NextProcessAt is the time of the read.
			direct.NextProcessAt, viaAsynq.NextProcessAt = time.Time{}, time.Time{}
		}
		if !reflect.DeepEqual(direct, viaAsynq) {
			t.Errorf("delay %s:\ndirect:  %+v\nasynq's: %+v", delay, direct, viaAsynq)
		}
		want := asynq.TaskStateScheduled
		if delay == 0 {
			want = asynq.TaskStatePending
		}
		if direct.State != want {
			t.Errorf("delay %s: the retry is %v, want %v", delay, direct.State, want)
		}
	}
}

// TestRepairedTaskMatchesAsynq: the task the reconciler's check writes for
// a retry whose task is missing (repair.lua's put_now, scheduled for its due
// time, or pending once due) is the task asynq's own client makes from
// tasks.Options for the same dispatch, down to the message's bytes.
func TestRepairedTaskMatchesAsynq(t *testing.T) {
	t.Parallel()
	for _, delay := range []time.Duration{0, 2*time.Minute + 500*time.Millisecond} {
		e := newEnv(t)
		store := retrystate.New(e.rdb, e.queue)
		ins := asynq.NewInspectorFromRedisClient(e.rdb)
		id := "0000000000000000000000000" + "3"
		now := time.Now()
		const timeout = 90 * time.Second
		if _, err := store.CreateRun(ctxb, retrystate.NewRun{ID: id, Workflow: "wf", Input: "{}", Now: now,
			Steps: []retrystate.NewStep{{Name: "a", MaxAttempts: 3, MaxCrashes: 1, Policy: "{}", Timeout: timeout}}}); err != nil {
			t.Fatal(err)
		}
		first := tasks.Step{RunID: id, Workflow: "wf", Index: 0, Name: "a", Attempt: 1}
		if _, err := asynq.NewClientFromRedisClient(e.rdb).Enqueue(asynq.NewTask(tasks.TypeStep, first.Encode()),
			tasks.Options(e.queue, first.ID(), timeout, time.Time{}, now)...); err != nil {
			t.Fatal(err)
		}
		if b, err := store.Begin(ctxb, retrystate.BeginParams{RunID: id, Index: 0, TaskID: first.ID(), Token: "t",
			FenceTTL: time.Minute, Now: now}); err != nil || b.Outcome != retrystate.OutcomeOK {
			t.Fatalf("begin: %+v %v", b, err)
		}
		// The retry is scheduled without its task (no predicted ID).
		res, err := store.Fail(ctxb, retrystate.FailParams{RunID: id, Index: 0, Token: "t", Error: "boom",
			Class: retrystate.ClassTransient, Delay: delay, Now: now})
		if err != nil || res.Enqueued || res.Outcome != retrystate.OutcomeRetry {
			t.Fatalf("fail: %+v %v", res, err)
		}
		later := now.Add(time.Minute)
		cs, err := store.CheckTasks(ctxb, []string{id}, retrystate.CheckParams{Grace: 10 * time.Second, MaxAuto: 3,
			Now: later})
		if err != nil || cs[0].Err != nil || cs[0].Result.Kind != "retry_task_missing" || !cs[0].Result.Enqueued {
			t.Fatalf("check: %+v %v", cs, err)
		}
		retry := tasks.Step{RunID: id, Workflow: "wf", Index: 0, Name: "a", Attempt: 2}
		msg := e.rdb.HGet(ctxb, tasks.QueueKeys(e.queue).Task(retry.ID()), "msg").Val()
		if msg != string(retry.AsynqMessage(e.queue, timeout)) {
			t.Errorf("delay %s: message\n%q\nwant\n%q", delay, msg, retry.AsynqMessage(e.queue, timeout))
		}
		direct, err := ins.GetTaskInfo(e.queue, retry.ID())
		if err != nil {
			t.Fatalf("delay %s: the repaired task is not readable by asynq: %v", delay, err)
		}
		if err := ins.DeleteTask(e.queue, retry.ID()); err != nil {
			t.Fatal(err)
		}
		if _, err := asynq.NewClientFromRedisClient(e.rdb).Enqueue(asynq.NewTask(tasks.TypeStep, retry.Encode()),
			tasks.Options(e.queue, retry.ID(), timeout, cs[0].Result.Dispatch.DueAt, later)...); err != nil {
			t.Fatal(err)
		}
		viaAsynq, err := ins.GetTaskInfo(e.queue, retry.ID())
		if err != nil {
			t.Fatal(err)
		}
		want := asynq.TaskStateScheduled
		if delay < time.Minute {
			want = asynq.TaskStatePending
			// A pending task's NextProcessAt is the time of the read.
			direct.NextProcessAt, viaAsynq.NextProcessAt = time.Time{}, time.Time{}
		}
		if !reflect.DeepEqual(direct, viaAsynq) {
			t.Errorf("delay %s:\ndirect:  %+v\nasynq's: %+v", delay, direct, viaAsynq)
		}
		if direct.State != want {
			t.Errorf("delay %s: the repaired task is %v, want %v", delay, direct.State, want)
		}
	}
}
