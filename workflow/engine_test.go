package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/engine"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

var ctxb = context.Background()

func mustStart(t *testing.T, c *workflow.Client, wf string, input any) *workflow.Run {
	t.Helper()
	run, err := c.Start(ctxb, wf, input, nil)
	if err != nil {
		t.Fatalf("start %s: %v", wf, err)
	}
	return run
}

func delayOf(t *testing.T, ev workflow.Event) time.Duration {
	t.Helper()
	ms, err := strconv.Atoi(ev.Details["delay_ms"])
	if err != nil {
		t.Fatalf("event %+v has no delay_ms", ev)
	}
	return time.Duration(ms) * time.Millisecond
}

// retryLateCeiling bounds how late a due retry starts on a worker with the
// default intervals: asynq's schedule keeps whole seconds (1s), its
// forwarder moves due tasks to the queue every DelayedTaskCheckInterval
// (200ms) and an idle worker fetches every TaskCheckInterval (20ms); ten
// times each, and 2s of slack for a loaded machine. A retry left to the
// reconciler's pass (every 30s) misses it.
const retryLateCeiling = time.Second + 10*(200*time.Millisecond+20*time.Millisecond) + 2*time.Second

// TestRetryThenSuccess: a step fails transiently twice, then succeeds. The
// attempts are counted, every delay is within the policy's bounds, no attempt
// starts before its due time, and the journal shows every attempt and every
// scheduled timer.
func TestRetryThenSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := workflow.Policy{MaxAttempts: 4, InitialInterval: 300 * time.Millisecond, BackoffCoefficient: 2,
		MaxInterval: 10 * time.Second, Jitter: workflow.JitterEqual}
	e.startWorker(workflow.WorkerConfig{}, demo.Definition(pol))
	run := mustStart(t, e.client, demo.Name, demo.Input{FailStep: "transform", FailTimes: 2})
	run = e.wait(run.ID, 20*time.Second)
	if run.Status != workflow.StatusSucceeded || run.Warning != "" || run.NeedsAttention {
		t.Fatalf("run ended %s warning=%q attention=%v: %s", run.Status, run.Warning, run.NeedsAttention, run.FailureReason)
	}
	tr := run.Step("transform")
	if tr.Attempts != 3 || tr.RetryAttempts != 2 || tr.RetryState != workflow.RetryNone || tr.NextAttemptAt != nil {
		t.Errorf("transform: attempts %d retry_attempts %d retry_state %s next %v; want 3, 2, none, nil",
			tr.Attempts, tr.RetryAttempts, tr.RetryState, tr.NextAttemptAt)
	}
	if !strings.Contains(tr.LastError, "injected failure on attempt 2") || tr.LastErrorClass != workflow.ClassTransient {
		t.Errorf("transform last error %q class %q", tr.LastError, tr.LastErrorClass)
	}
	for _, name := range []string{"fetch", "deliver"} {
		if s := run.Step(name); s.Attempts != 1 || s.RetryAttempts != 0 {
			t.Errorf("%s: attempts %d retries %d; want 1, 0", name, s.Attempts, s.RetryAttempts)
		}
	}

	evs := e.events(run.ID)
	if got := countEvents(evs, workflow.EventAttemptStarted, "transform"); got != 3 {
		t.Errorf("transform attempt_started events: %d, want 3", got)
	}
	if got := countEvents(evs, workflow.EventAttemptFailed, "transform"); got != 2 {
		t.Errorf("transform attempt_failed events: %d, want 2", got)
	}
	if got := countEvents(evs, workflow.EventRetryScheduled, "transform"); got != 2 {
		t.Errorf("retry_scheduled events: %d, want 2", got)
	}
	for _, typ := range []string{workflow.EventRunStarted, workflow.EventRunSucceeded} {
		if countEvents(evs, typ, "") != 1 {
			t.Errorf("want one %s event", typ)
		}
	}
	// Each retry_scheduled names the next attempt, a delay within
	// [base/2, base] (equal jitter) and a due time; that attempt starts at or
	// after its due time.
	due := map[int]time.Time{}
	n := 0
	for _, ev := range evs {
		switch {
		case ev.Type == workflow.EventRetryScheduled:
			n++
			base := pol.BaseDelay(n)
			if d := delayOf(t, ev); d < base/2 || d > base {
				t.Errorf("retry %d: delay %s outside [%s, %s]", n, d, base/2, base)
			}
			at, ok := ev.DueAt()
			if !ok {
				t.Fatalf("retry_scheduled without due_at: %+v", ev)
			}
			if want := ev.At.Add(delayOf(t, ev)); !at.Equal(want) {
				t.Errorf("retry %d: due_at %s, want scheduled time + delay = %s", n, at, want)
			}
			if ev.Attempt != n+1 || ev.Details["task"] != tasks.ID(run.ID, 1, n+1, 0) {
				t.Errorf("retry %d: attempt %d task %q", n, ev.Attempt, ev.Details["task"])
			}
			due[ev.Attempt] = at
		case ev.Type == workflow.EventAttemptStarted && ev.Step == "transform" && ev.Attempt > 1:
			d, ok := due[ev.Attempt]
			if !ok {
				t.Fatalf("attempt %d started with no retry scheduled before it", ev.Attempt)
			}
			if ev.At.Before(d) {
				t.Errorf("attempt %d started at %s, before its due time %s", ev.Attempt, ev.At, d)
			}
			if late := ev.At.Sub(d); late > retryLateCeiling {
				t.Errorf("attempt %d started %s after its due time; want within %s", ev.Attempt, late, retryLateCeiling)
			}
		}
	}
	// The outputs were checkpointed and passed on.
	var out demo.DeliverOutput
	if err := jsonUnmarshal(run.Step("deliver").Output, &out); err != nil || out.Delivered != 3 {
		t.Errorf("deliver output %s: %v", run.Step("deliver").Output, err)
	}
	if want := workflow.IdempotencyKey(run.ID, "deliver", 1); out.IdempotencyKey != want {
		t.Errorf("idempotency key %q, want %q", out.IdempotencyKey, want)
	}
}

// TestRetryPendingWarning: while a retry is scheduled the run says so.
func TestRetryPendingWarning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(workflow.WorkerConfig{}, demo.Definition(workflow.Policy{InitialInterval: 30 * time.Second, MaxInterval: time.Minute, Jitter: workflow.JitterNone}))
	run := mustStart(t, e.client, demo.Name, demo.Input{FailStep: "fetch", FailTimes: 1})
	var got *workflow.Run
	e.eventually(10*time.Second, "a scheduled retry", func() bool {
		r, err := e.client.Get(ctxb, run.ID)
		got = r
		return err == nil && r.Step("fetch").RetryState == workflow.RetryScheduled
	})
	f := got.Step("fetch")
	if got.Status != workflow.StatusRunning || got.Warning != workflow.WarningRetryPending {
		t.Errorf("status %s warning %q; want running, retry_pending", got.Status, got.Warning)
	}
	if f.Status != workflow.StepPending || f.Attempts != 1 || f.NextAttemptAt == nil {
		t.Fatalf("fetch: %+v", f)
	}
	// Exactly 30s (no jitter) from the failure, as the journal's
	// retry_scheduled says: its delay, and its due time, which the run
	// shows. (From the attempt's start the failure is a body's run and a
	// script's round trip later: a moment, longer when loaded.)
	var sched *workflow.Event
	for _, ev := range e.events(run.ID) {
		if ev.Type == workflow.EventRetryScheduled {
			sched = &ev
		}
	}
	if sched == nil {
		t.Fatal("no retry_scheduled in the journal")
	}
	due, ok := sched.DueAt()
	if d := delayOf(t, *sched); d != 30*time.Second || !ok || !due.Equal(sched.At.Add(d)) || !f.NextAttemptAt.Equal(due) {
		t.Errorf("retry scheduled at %s with delay %s, due %s; the run's next attempt at %s; want a 30s delay, due then",
			sched.At, d, due, f.NextAttemptAt)
	}
	if f.NextAttemptAt.Before(f.StartedAt.Add(30 * time.Second)) {
		t.Errorf("next attempt %s after the first started; want 30s after the failure", f.NextAttemptAt.Sub(*f.StartedAt))
	}
}

// TestExhaustion: a step that keeps failing transiently uses its whole budget
// and fails the run, needing attention, with a reason naming the step, its
// attempts and its last error, and a notification.
func TestExhaustion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(workflow.WorkerConfig{}, demo.Definition(workflow.Policy{MaxAttempts: 3, InitialInterval: 50 * time.Millisecond, MaxInterval: 100 * time.Millisecond}))
	run := mustStart(t, e.client, demo.Name, demo.Input{FailStep: "transform", FailTimes: 100})
	run = e.wait(run.ID, 20*time.Second)
	if run.Status != workflow.StatusFailed || !run.NeedsAttention || run.FailureCode != workflow.CodeRetriesExhausted {
		t.Fatalf("run: status %s attention %v code %q", run.Status, run.NeedsAttention, run.FailureCode)
	}
	for _, want := range []string{`"transform"`, "3 attempts", "injected failure on attempt 3"} {
		if !strings.Contains(run.FailureReason, want) {
			t.Errorf("failure reason %q lacks %q", run.FailureReason, want)
		}
	}
	tr := run.Step("transform")
	if tr.Status != workflow.StepFailed || tr.Attempts != 3 || tr.RetryState != workflow.RetryExhausted {
		t.Errorf("transform: %s, %d attempts, retry_state %s", tr.Status, tr.Attempts, tr.RetryState)
	}
	if s := run.Step("deliver"); s.Status != workflow.StepPending || s.Attempts != 0 {
		t.Errorf("deliver ran: %+v", s)
	}
	if run.FinishedAt == nil || run.Warning != "" {
		t.Errorf("finished_at %v warning %q", run.FinishedAt, run.Warning)
	}
	evs := e.events(run.ID)
	var failed *workflow.Event
	for i := range evs {
		if evs[i].Type == workflow.EventRunFailed {
			failed = &evs[i]
		}
	}
	if failed == nil || failed.Details["message"] != "step failed after multiple attempts" ||
		failed.Step != "transform" || failed.Details["code"] != workflow.CodeRetriesExhausted {
		t.Fatalf("run_failed event: %+v", failed)
	}
	if got := countEvents(evs, workflow.EventRetryScheduled, ""); got != 2 {
		t.Errorf("retry_scheduled: %d, want 2", got)
	}
	ns, err := e.client.Notifications(ctxb, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	// Two retries scheduled, then the step failed, then the run failed.
	if types := notificationTypes(ns); types != "retry_scheduled retry_scheduled step_failed run_failed" { //nolint:dupword // two retries, each notified
		t.Errorf("notification types %q: %+v", types, ns)
	}
	if last := ns[len(ns)-1]; last.RunID != run.ID ||
		last.Details["message"] != "step failed after multiple attempts" || last.Details["step"] != "transform" {
		t.Errorf("run_failed notification: %+v", last)
	}
	if sf := ns[len(ns)-2]; sf.Details["step"] != "transform" || sf.Details["code"] != workflow.CodeRetriesExhausted {
		t.Errorf("step_failed notification: %+v", sf)
	}
	failedRuns, _, err := e.client.List(ctxb, workflow.ListOptions{Status: workflow.StatusFailed})
	if err != nil || len(failedRuns) != 1 || failedRuns[0].ID != run.ID {
		t.Errorf("list failed: %v %v", failedRuns, err)
	}
}

// TestPermanentFailsFast: a permanent error fails after one attempt whatever
// the budget.
func TestPermanentFailsFast(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(workflow.WorkerConfig{}, demo.Definition(workflow.Policy{MaxAttempts: 10}))
	run := mustStart(t, e.client, demo.Name, demo.Input{FailStep: "fetch", Permanent: true})
	run = e.wait(run.ID, 10*time.Second)
	f := run.Step("fetch")
	if run.Status != workflow.StatusFailed || run.FailureCode != workflow.CodePermanentError || !run.NeedsAttention {
		t.Fatalf("run %s code %q attention %v", run.Status, run.FailureCode, run.NeedsAttention)
	}
	if f.Attempts != 1 || f.RetryAttempts != 0 || f.LastErrorClass != workflow.ClassPermanent || f.RetryState != workflow.RetryNone {
		t.Errorf("fetch: %+v", f)
	}
	if !strings.Contains(run.FailureReason, `step "fetch" failed with a permanent error on attempt 1`) {
		t.Errorf("reason %q", run.FailureReason)
	}
	evs := e.events(run.ID)
	if countEvents(evs, workflow.EventRetryScheduled, "") != 0 || countEvents(evs, workflow.EventRunFailed, "fetch") != 1 {
		t.Errorf("journal: %+v", evs)
	}
	ns, _ := e.client.Notifications(ctxb, "", 10)
	if types := notificationTypes(ns); types != "step_failed run_failed" || ns[1].Details["code"] != workflow.CodePermanentError {
		t.Errorf("notifications %q: %+v", types, ns)
	}
}

// TestUnknownErrorsPermanentPolicy: a policy can make unclassified errors fail fast.
func TestUnknownErrorsPermanentPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var calls atomic.Int32
	def := workflow.Definition{Name: "strict", Policy: workflow.Policy{UnknownErrors: workflow.UnknownPermanent},
		Steps: []workflow.Step{
			{Name: "plain", Run: func(context.Context, *workflow.StepContext) (any, error) {
				calls.Add(1)
				return nil, errors.New("boom")
			}},
		}}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := e.wait(mustStart(t, e.client, "strict", nil).ID, 10*time.Second)
	if run.FailureCode != workflow.CodePermanentError || calls.Load() != 1 {
		t.Errorf("code %q after %d calls", run.FailureCode, calls.Load())
	}
}

// TestRetryAfterOverridesBackoff: a step's RetryAfter sets the next delay.
func TestRetryAfterOverridesBackoff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var calls atomic.Int32
	def := workflow.Definition{Name: "ratelimited", Policy: workflow.Policy{InitialInterval: time.Hour, MaxInterval: time.Hour},
		Steps: []workflow.Step{
			{Name: "call", Run: func(context.Context, *workflow.StepContext) (any, error) {
				if calls.Add(1) == 1 {
					return nil, workflow.RetryAfter(errors.New("429 too many requests"), 700*time.Millisecond)
				}
				return "ok", nil
			}},
		}}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := e.wait(mustStart(t, e.client, "ratelimited", nil).ID, 10*time.Second)
	if run.Status != workflow.StatusSucceeded {
		t.Fatalf("status %s: %s", run.Status, run.FailureReason)
	}
	evs := e.events(run.ID)
	for _, ev := range evs {
		if ev.Type == workflow.EventRetryScheduled && delayOf(t, ev) != 700*time.Millisecond {
			t.Errorf("delay %s, want 700ms", delayOf(t, ev))
		}
	}
}

// blocker is a step that signals when it starts and blocks until released
// or its context ends.
type blocker struct {
	started chan int // attempt numbers
	release chan struct{}
	ended   chan error // ctx.Err() when the context ended, nil when released
	calls   atomic.Int32
}

func newBlocker() *blocker {
	return &blocker{started: make(chan int, 16), release: make(chan struct{}), ended: make(chan error, 16)}
}

func (b *blocker) run(ctx context.Context, sc *workflow.StepContext) (any, error) {
	b.calls.Add(1)
	b.started <- sc.Attempt
	select {
	case <-b.release:
		b.ended <- nil
		return map[string]int{"attempt": sc.Attempt}, nil
	case <-ctx.Done():
		b.ended <- ctx.Err()
		return nil, ctx.Err()
	}
}

func recv[T any](t *testing.T, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
	var zero T
	return zero
}

// TestCancelRunningStep: cancelling a run cancels its running step's
// context, and the step's result is discarded.
func TestCancelRunningStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := newBlocker()
	def := workflow.Definition{Name: "blocking", Steps: []workflow.Step{{Name: "wait", Run: b.run}, {Name: "after", Run: noop}}}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := mustStart(t, e.client, "blocking", nil)
	recv(t, b.started, 10*time.Second, "the step to start")
	got, err := e.client.Cancel(ctxb, run.ID, &workflow.ActionOptions{Actor: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != workflow.StatusCancelled || got.FailureCode != workflow.CodeCancelled {
		t.Errorf("after cancel: %s %q", got.Status, got.FailureCode)
	}
	if err := recv(t, b.ended, 10*time.Second, "the step's context to end"); !errors.Is(err, context.Canceled) {
		t.Errorf("step ended with %v, want context.Canceled", err)
	}
	// The discarded result changes nothing.
	e.eventually(15*time.Second, "the worker to finish the task", func() bool {
		info, err := asynq.NewInspectorFromRedisClient(e.rdb).GetQueueInfo(e.queue)
		return err == nil && info.Active == 0 && info.Pending == 0
	})
	final, _ := e.client.Get(ctxb, run.ID)
	if final.Status != workflow.StatusCancelled || final.Step("wait").Status != workflow.StepCancelled ||
		final.Step("after").Attempts != 0 {
		t.Errorf("final: %s, wait %s, after attempts %d", final.Status, final.Step("wait").Status, final.Step("after").Attempts)
	}
	evs := e.events(run.ID)
	if countEvents(evs, workflow.EventRunCancelled, "") != 1 || countEvents(evs, workflow.EventAttemptSucceeded, "") != 0 {
		t.Errorf("journal: %+v", evs)
	}
	for _, ev := range evs {
		if ev.Type == workflow.EventRunCancelled && ev.Details["actor"] != "tester" {
			t.Errorf("cancel actor %q", ev.Details["actor"])
		}
	}
}

// TestCancelMidBackoff: a run cancelled while a retry is scheduled makes no
// further attempt, even after the due time and even when the retry's task is
// delivered anyway.
func TestCancelMidBackoff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var calls atomic.Int32
	def := workflow.Definition{Name: "flaky", Policy: workflow.Policy{InitialInterval: 3 * time.Second, MaxInterval: 4 * time.Second, Jitter: workflow.JitterNone},
		Steps: []workflow.Step{{Name: "call", Run: func(context.Context, *workflow.StepContext) (any, error) {
			calls.Add(1)
			return nil, errors.New("503 service unavailable")
		}}}}
	e.startWorker(workflow.WorkerConfig{}, def,
		workflow.Definition{Name: "quick", Steps: []workflow.Step{{Name: "call", Run: noop}}})
	run := mustStart(t, e.client, "flaky", nil)
	var before *workflow.Run
	e.eventually(10*time.Second, "a scheduled retry", func() bool {
		r, err := e.client.Get(ctxb, run.ID)
		before = r
		return err == nil && r.Step("call").RetryState == workflow.RetryScheduled
	})
	due := *before.Step("call").NextAttemptAt
	retryTask := tasks.ID(run.ID, 0, 2, 0)
	ins := asynq.NewInspectorFromRedisClient(e.rdb)
	// The engine enqueues the retry's task right after writing the state.
	e.eventually(5*time.Second, "the retry's task to be scheduled", func() bool {
		info, err := ins.GetTaskInfo(e.queue, retryTask)
		return err == nil && info.State == asynq.TaskStateScheduled
	})

	got, err := e.client.Cancel(ctxb, run.ID, nil)
	if err != nil || got.Status != workflow.StatusCancelled {
		t.Fatalf("cancel: %v %+v", err, got)
	}
	// A retry never starts before its due time: cancelled before it, the
	// run was cancelled mid-backoff.
	if now := time.Now(); !now.Before(due) {
		t.Fatalf("premise: the cancel returned at %s, after the retry was due (%s), not mid-backoff", now, due)
	}
	s := got.Step("call")
	if s.RetryState != workflow.RetryNone || s.NextAttemptAt != nil || got.Warning != "" {
		t.Errorf("after cancel: retry_state %s next %v warning %q", s.RetryState, s.NextAttemptAt, got.Warning)
	}
	if _, err := ins.GetTaskInfo(e.queue, retryTask); !errors.Is(err, asynq.ErrTaskNotFound) {
		t.Errorf("scheduled retry task still exists after cancel: %v", err)
	}
	// Cancel is idempotent.
	if again, err := e.client.Cancel(ctxb, run.ID, nil); err != nil || again.Status != workflow.StatusCancelled {
		t.Errorf("second cancel: %v", err)
	}

	// A late delivery of the retry's task is acknowledged without running.
	p := tasks.Step{RunID: run.ID, Workflow: "flaky", Index: 0, Name: "call", Attempt: 2}
	if _, err := asynq.NewClientFromRedisClient(e.rdb).Enqueue(asynq.NewTask(tasks.TypeStep, p.Encode()),
		tasks.Options(e.queue, retryTask, time.Minute, time.Time{}, time.Now())...); err != nil {
		t.Fatal(err)
	}
	e.eventually(10*time.Second, "the late delivery to be processed", func() bool {
		_, err := ins.GetTaskInfo(e.queue, retryTask)
		return errors.Is(err, asynq.ErrTaskNotFound)
	})
	// And nothing happens after the due time either.
	e.eventually(10*time.Second, "the retry's due time to pass", func() bool { return time.Now().After(due.Add(time.Second)) })
	if n := calls.Load(); n != 1 {
		t.Errorf("step ran %d times, want 1", n)
	}
	final, _ := e.client.Get(ctxb, run.ID)
	if final.Status != workflow.StatusCancelled || final.Step("call").Attempts != 1 {
		t.Errorf("final: %s attempts %d", final.Status, final.Step("call").Attempts)
	}
	if countEvents(e.events(run.ID), workflow.EventAttemptStarted, "") != 1 {
		t.Errorf("more than one attempt started")
	}
	// A finished run cannot be cancelled.
	ok := e.wait(mustStart(t, e.client, "quick", nil).ID, 30*time.Second)
	if _, err := e.client.Cancel(ctxb, ok.ID, nil); !errors.Is(err, workflow.ErrRunFinished) {
		t.Errorf("cancel of a %s run: %v, want ErrRunFinished", ok.Status, err)
	}
}

func noop(context.Context, *workflow.StepContext) (any, error) { return nil, nil }

// TestDuplicateDeliveries drives an engine directly: a second delivery of an
// attempt that is running is handed back without running the step body, and
// a delivery of a completed attempt is acknowledged without running it.
func TestDuplicateDeliveries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := newBlocker()
	def := workflow.Definition{Name: "dup", Steps: []workflow.Step{{Name: "one", Run: b.run}, {Name: "two", Run: noop}}}
	const fenceTTL = 10 * time.Second
	eng, err := workflow.NewEngine(e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log, FenceTTL: fenceTTL})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(def); err != nil {
		t.Fatal(err)
	}
	if err := eng.Publish(ctxb); err != nil {
		t.Fatal(err)
	}
	run := mustStart(t, e.client, "dup", nil)
	first := tasks.Step{RunID: run.ID, Workflow: "dup", Index: 0, Name: "one", Attempt: 1}
	task := asynq.NewTask(tasks.TypeStep, first.Encode())

	// Delivery 1 runs the body and blocks in it.
	res1 := make(chan error, 1)
	go func() { res1 <- eng.ProcessTask(ctxb, task) }()
	recv(t, b.started, 10*time.Second, "the first delivery to start the step")

	// Delivery 2 of the same task, concurrently: handed back to asynq.
	sent := time.Now()
	res2 := make(chan error, 1)
	go func() { res2 <- eng.ProcessTask(ctxb, task) }()
	var err2 error
	select {
	case err2 = <-res2:
	case <-b.started:
		close(b.release)
		t.Fatal("a concurrent duplicate delivery entered the step body")
	case <-time.After(10 * time.Second):
		t.Fatal("a concurrent duplicate delivery did not return")
	}
	back := time.Now()
	if err2 == nil || engine.IsFailure(err2) {
		t.Fatalf("concurrent duplicate: %v; want a redelivery that is not a failure", err2)
	}
	// It comes back once the fence may have expired, and 500ms more: the
	// fence, taken when the attempt began and renewed since, expires a
	// TTL after the begin at the earliest, and a TTL after delivery 2 was
	// sent at the latest (a renewal can run between its clock reading and
	// its script).
	cur, err := e.client.Get(ctxb, run.ID)
	if err != nil || cur.Step("one").StartedAt == nil {
		t.Fatalf("the running attempt: %+v, %v", cur, err)
	}
	lo := cur.Step("one").StartedAt.Add(fenceTTL).Sub(back) + 500*time.Millisecond
	hi := fenceTTL + back.Sub(sent) + 500*time.Millisecond
	if d := engine.RetryDelay(0, err2, task); d < lo || d > hi {
		t.Errorf("duplicate asks to come back in %s; want the fence's time left, %s to %s", d, lo, hi)
	}
	if n := b.calls.Load(); n != 1 {
		t.Fatalf("step body ran %d times concurrently", n)
	}

	close(b.release)
	if err := recv(t, res1, 10*time.Second, "delivery 1 to return"); err != nil {
		t.Fatalf("delivery 1: %v", err)
	}
	// Delivery 3, after completion: acknowledged, body not run.
	if err := eng.ProcessTask(ctxb, task); err != nil {
		t.Fatalf("delivery after completion: %v", err)
	}
	if n := b.calls.Load(); n != 1 {
		t.Errorf("step body ran %d times", n)
	}
	got, _ := e.client.Get(ctxb, run.ID)
	if s := got.Step("one"); s.Status != workflow.StepSucceeded || s.Attempts != 1 {
		t.Errorf("step one: %s attempts %d", s.Status, s.Attempts)
	}
	if got.Step("two").Status != workflow.StepPending {
		t.Errorf("step two: %s", got.Step("two").Status)
	}
	// A delivery with a task ID the run never dispatched is stale too.
	bogus := tasks.Step{RunID: run.ID, Workflow: "dup", Index: 1, Name: "two", Attempt: 7}
	if err := eng.ProcessTask(ctxb, asynq.NewTask(tasks.TypeStep, bogus.Encode())); err != nil {
		t.Fatalf("bogus delivery: %v", err)
	}
	if got, _ := e.client.Get(ctxb, run.ID); got.Step("two").Attempts != 0 {
		t.Errorf("a bogus attempt ran step two")
	}
}

// TestEarlyDelivery: a retry delivered before its due time does not run
// early: slightly early, the engine waits; far too early, it hands the task
// back to asynq.
func TestEarlyDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The engines' clock runs with real time, shifted by the test: the
	// retry is due an hour after the failure, so a delivery is early
	// however slow the machine, until the test moves the clock to just
	// before the due time.
	clock := &shiftClock{}
	var starts []time.Time
	var mu sync.Mutex
	var calls atomic.Int32
	def := workflow.Definition{Name: "early",
		Policy: workflow.Policy{InitialInterval: time.Hour, MaxInterval: 2 * time.Hour, Jitter: workflow.JitterNone},
		Steps: []workflow.Step{{Name: "s", Run: func(context.Context, *workflow.StepContext) (any, error) {
			mu.Lock()
			starts = append(starts, clock.Now())
			mu.Unlock()
			if calls.Add(1) == 1 {
				return nil, errors.New("transient")
			}
			return nil, nil
		}}}}
	eng := publishedEngine(t, e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log, Clock: clock,
		MaxEarlyWait: 1500 * time.Millisecond}, def)
	run := mustStart(t, e.client, "early", nil)
	a1 := tasks.Step{RunID: run.ID, Workflow: "early", Index: 0, Name: "s", Attempt: 1}
	if err := eng.ProcessTask(ctxb, asynq.NewTask(tasks.TypeStep, a1.Encode())); err != nil {
		t.Fatal(err)
	}
	r, _ := e.client.Get(ctxb, run.ID)
	due := *r.Step("s").NextAttemptAt
	a2 := asynq.NewTask(tasks.TypeStep, tasks.Step{RunID: run.ID, Workflow: "early", Index: 0, Name: "s", Attempt: 2}.Encode())

	// Far too early (an hour; more than either engine's MaxEarlyWait):
	// handed back, for the time left before due.
	strict, err := workflow.NewEngine(e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log, Clock: clock,
		MaxEarlyWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := strict.Register(def); err != nil {
		t.Fatal(err)
	}
	for _, eg := range []*workflow.Engine{strict, eng} {
		err := eg.ProcessTask(ctxb, a2)
		if err == nil || engine.IsFailure(err) {
			t.Fatalf("early delivery: %v, want a redelivery", err)
		}
		if d := engine.RetryDelay(0, err, a2); d <= 59*time.Minute || d > time.Hour {
			t.Errorf("early delivery asks to come back in %s; want the time left before due (about 1h)", d)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("early delivery ran the step")
	}
	// Slightly early (within MaxEarlyWait): the engine waits for the due
	// time, then runs.
	clock.Set(due.Add(-300 * time.Millisecond))
	if err := eng.ProcessTask(ctxb, a2); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 2 || starts[1].Before(due) {
		t.Fatalf("second attempt started at %v, due %s", starts, due)
	}
	if r, _ := e.client.Get(ctxb, run.ID); r.Status != workflow.StatusSucceeded {
		t.Errorf("status %s", r.Status)
	}
}

// shiftClock is real time moved by a shift the test sets: it runs at real
// speed (an engine that waits for a due time sees it come), from where the
// test puts it.
type shiftClock struct {
	mu    sync.Mutex
	shift time.Duration
}

func (c *shiftClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.shift)
}

// Set makes the clock read t now.
func (c *shiftClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shift = time.Until(t)
}

// TestIdempotentStart: the same idempotency key returns the same run, also
// under concurrent starts, and only one run exists.
func TestIdempotentStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(workflow.WorkerConfig{}, demo.Definition(fastPolicy()),
		workflow.Definition{Name: "other", Steps: []workflow.Step{{Name: "x", Run: noop}}})
	var wg sync.WaitGroup
	ids := make([]string, 8)
	errs := make([]error, 8)
	for i := range ids {
		wg.Go(func() {
			r, err := e.client.Start(ctxb, demo.Name, map[string]int{"n": i}, &workflow.StartOptions{IdempotencyKey: "order-42"})
			if err == nil {
				ids[i] = r.ID
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("start %d: %q %v; want %q", i, ids[i], errs[i], ids[0])
		}
	}
	e.wait(ids[0], 10*time.Second)
	again, err := e.client.Start(ctxb, demo.Name, nil, &workflow.StartOptions{IdempotencyKey: "order-42"})
	if err != nil || again.ID != ids[0] || again.Status != workflow.StatusSucceeded {
		t.Fatalf("start after success: %+v %v", again, err)
	}
	runs, _, err := e.client.List(ctxb, workflow.ListOptions{})
	if err != nil || len(runs) != 1 {
		t.Fatalf("%d runs exist (%v), want 1", len(runs), err)
	}
	if countEvents(e.events(ids[0]), workflow.EventAttemptStarted, "fetch") != 1 {
		t.Errorf("fetch ran more than once")
	}
	if _, err := e.client.Start(ctxb, "other", nil, &workflow.StartOptions{IdempotencyKey: "order-42"}); !errors.Is(err, workflow.ErrIdempotencyConflict) {
		t.Errorf("key reused for another workflow: %v, want ErrIdempotencyConflict", err)
	}
	other, err := e.client.Start(ctxb, demo.Name, nil, &workflow.StartOptions{IdempotencyKey: "order-43"})
	if err != nil || other.ID == ids[0] {
		t.Errorf("another key: %v %v", other, err)
	}
}

// TestBadClientInput: bad input gets a clear error and writes nothing.
func TestBadClientInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(workflow.WorkerConfig{}, demo.Definition(fastPolicy()))
	small := workflow.NewClient(e.rdb, workflow.ClientConfig{Queue: e.queue, MaxInputBytes: 64, Logger: e.log})
	cases := []struct {
		name  string
		start func() error
		want  error
	}{
		{"unknown workflow", func() error { _, err := e.client.Start(ctxb, "nope", nil, nil); return err }, workflow.ErrUnknownWorkflow},
		{"bad workflow name", func() error { _, err := e.client.Start(ctxb, "a b{c}", nil, nil); return err }, workflow.ErrUnknownWorkflow},
		{"malformed JSON", func() error {
			_, err := e.client.Start(ctxb, demo.Name, []byte(`{"fail_step":`), nil)
			return err
		}, workflow.ErrInvalidInput},
		{"unmarshalable input", func() error { _, err := e.client.Start(ctxb, demo.Name, make(chan int), nil); return err }, workflow.ErrInvalidInput},
		{"oversize input", func() error {
			_, err := small.Start(ctxb, demo.Name, map[string]string{"x": strings.Repeat("y", 100)}, nil)
			return err
		}, workflow.ErrInvalidInput},
	}
	for _, c := range cases {
		if err := c.start(); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	keys, err := e.rdb.Keys(ctxb, fmt.Sprintf("cairn:{%s}:run:*", e.queue)).Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("rejected starts wrote %v (%v)", keys, err)
	}
	info, err := asynq.NewInspectorFromRedisClient(e.rdb).GetQueueInfo(e.queue)
	if err == nil && info.Size != 0 {
		t.Errorf("rejected starts enqueued %d tasks", info.Size)
	}

	valid := workflow.NewRunID(time.Now())
	for _, id := range []string{"", "x", "01jd-bad", strings.Repeat("u", 26)} {
		if _, err := e.client.Get(ctxb, id); !errors.Is(err, workflow.ErrInvalidRunID) {
			t.Errorf("Get(%q): %v", id, err)
		}
		if _, err := e.client.Cancel(ctxb, id, nil); !errors.Is(err, workflow.ErrInvalidRunID) {
			t.Errorf("Cancel(%q): %v", id, err)
		}
		if _, err := e.client.Events(ctxb, id); !errors.Is(err, workflow.ErrInvalidRunID) {
			t.Errorf("Events(%q): %v", id, err)
		}
	}
	if _, err := e.client.Get(ctxb, valid); !errors.Is(err, workflow.ErrRunNotFound) {
		t.Errorf("Get(unknown): %v", err)
	}
	if _, err := e.client.Cancel(ctxb, valid, nil); !errors.Is(err, workflow.ErrRunNotFound) {
		t.Errorf("Cancel(unknown): %v", err)
	}
	if _, err := e.client.Events(ctxb, valid); !errors.Is(err, workflow.ErrRunNotFound) {
		t.Errorf("Events(unknown): %v", err)
	}
	if _, _, err := e.client.List(ctxb, workflow.ListOptions{Status: "done"}); !errors.Is(err, workflow.ErrInvalidStatus) {
		t.Errorf("List(bad status): %v", err)
	}
	if keys, _ := e.rdb.Keys(ctxb, fmt.Sprintf("cairn:{%s}:run:*", e.queue)).Result(); len(keys) != 0 {
		t.Errorf("lookups wrote %v", keys)
	}
}

// TestRunKeepsItsDefinition: a run keeps the step list and policy it started
// with after the worker is redeployed with a changed definition.
func TestRunKeepsItsDefinition(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var bCalls atomic.Int32
	failingB := func(context.Context, *workflow.StepContext) (any, error) {
		bCalls.Add(1)
		return nil, errors.New("still broken")
	}
	v1 := workflow.Definition{Name: "deploy", Policy: workflow.Policy{MaxAttempts: 2, InitialInterval: 50 * time.Millisecond},
		Steps: []workflow.Step{{Name: "a", Run: noop}, {Name: "b", Run: failingB}}}
	// v1 is published by an engine that is not processing: the run is created
	// with v1 and waits.
	eng, _ := workflow.NewEngine(e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log})
	if err := eng.Register(v1); err != nil {
		t.Fatal(err)
	}
	if err := eng.Publish(ctxb); err != nil {
		t.Fatal(err)
	}
	run := mustStart(t, e.client, "deploy", nil)
	if p := run.Step("b").EffectivePolicy; p == nil || p.MaxAttempts != 2 {
		t.Fatalf("effective policy of b: %+v", p)
	}
	// v2 adds a step and a bigger budget; its worker runs the old run.
	v2 := workflow.Definition{Name: "deploy", Policy: workflow.Policy{MaxAttempts: 9, InitialInterval: 50 * time.Millisecond},
		Steps: []workflow.Step{{Name: "a", Run: noop}, {Name: "b", Run: failingB}, {Name: "c", Run: noop}}}
	e.startWorker(workflow.WorkerConfig{}, v2)
	got := e.wait(run.ID, 20*time.Second)
	if len(got.Steps) != 2 || got.Status != workflow.StatusFailed || got.Step("b").Attempts != 2 || bCalls.Load() != 2 {
		t.Fatalf("old run under v2: %d steps, %s, b attempts %d (calls %d); want 2 steps, failed after 2",
			len(got.Steps), got.Status, got.Step("b").Attempts, bCalls.Load())
	}
	// New runs get v2.
	fresh := mustStart(t, e.client, "deploy", nil)
	if len(fresh.Steps) != 3 || fresh.Step("b").EffectivePolicy.MaxAttempts != 9 {
		t.Errorf("new run: %d steps, policy %+v", len(fresh.Steps), fresh.Step("b").EffectivePolicy)
	}
}

// TestStepTimeoutIsTransient: an attempt that outlives its step timeout fails
// transiently and is retried.
func TestStepTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var calls atomic.Int32
	def := workflow.Definition{Name: "slow", Policy: workflow.Policy{StepTimeout: 100 * time.Millisecond, InitialInterval: 50 * time.Millisecond},
		Steps: []workflow.Step{{Name: "s", Run: func(ctx context.Context, _ *workflow.StepContext) (any, error) {
			if calls.Add(1) == 1 {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return nil, nil
		}}}}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := e.wait(mustStart(t, e.client, "slow", nil).ID, 10*time.Second)
	s := run.Step("s")
	if run.Status != workflow.StatusSucceeded || s.Attempts != 2 || s.LastErrorClass != workflow.ClassTransient ||
		!strings.Contains(s.LastError, "deadline exceeded") {
		t.Errorf("run %s, attempts %d, last error %q (%s)", run.Status, s.Attempts, s.LastError, s.LastErrorClass)
	}
}

// TestPanicIsAFailedAttempt: a panicking step is a failed attempt, not a
// crashed worker.
func TestPanicIsAFailedAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var calls atomic.Int32
	def := workflow.Definition{Name: "panicky", Policy: workflow.Policy{InitialInterval: 50 * time.Millisecond},
		Steps: []workflow.Step{{Name: "s", Run: func(context.Context, *workflow.StepContext) (any, error) {
			if calls.Add(1) == 1 {
				panic("nil map")
			}
			return nil, nil
		}}}}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := e.wait(mustStart(t, e.client, "panicky", nil).ID, 10*time.Second)
	if s := run.Step("s"); run.Status != workflow.StatusSucceeded || s.Attempts != 2 || !strings.Contains(s.LastError, "panicked: nil map") {
		t.Errorf("run %s: %+v", run.Status, s)
	}
}

// Register checks the policies in force after precedence.
func TestRegisterChecksEffectivePolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	eng, err := workflow.NewEngine(e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	// Valid alone: a 1m initial interval. Invalid with the default 30s cap.
	slow := workflow.Definition{Name: "slow", Policy: workflow.Policy{InitialInterval: time.Minute},
		Steps: []workflow.Step{{Name: "s", Run: noop}}}
	err = eng.Register(slow)
	if !errors.Is(err, workflow.ErrInvalidDefinition) || !errors.Is(err, workflow.ErrInvalidPolicy) ||
		!strings.Contains(err.Error(), "max_interval 30s is shorter than initial_interval 1m0s") {
		t.Errorf("register: %v", err)
	}
	negative := workflow.Definition{Name: "negative",
		Steps: []workflow.Step{{Name: "s", Run: noop, Policy: workflow.Policy{RunTimeout: -time.Hour}}}}
	if err := eng.Register(negative); !errors.Is(err, workflow.ErrInvalidPolicy) {
		t.Errorf("register with a negative step-level run timeout: %v", err)
	}
	ok := workflow.Definition{Name: "ok", Policy: workflow.Policy{InitialInterval: time.Minute, MaxInterval: time.Hour},
		Steps: []workflow.Step{{Name: "s", Run: noop}}}
	if err := eng.Register(ok); err != nil {
		t.Errorf("register: %v", err)
	}
	if err := eng.Register(ok); !errors.Is(err, workflow.ErrInvalidDefinition) {
		t.Errorf("registering a name twice: %v", err)
	}
}

// notificationTypes lists the types of notifications, space-separated.
func notificationTypes(ns []workflow.Notification) string {
	types := make([]string, len(ns))
	for i, n := range ns {
		types[i] = n.Type
	}
	return strings.Join(types, " ")
}
