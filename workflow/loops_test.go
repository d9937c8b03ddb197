package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// TestSnoozePollsUntilReady: a polling step snoozes four times and succeeds
// on its fifth visit, all one attempt with one idempotency key; the retry
// budget (MaxAttempts 1) is untouched, every snooze is journaled, no visit
// runs before its due time, and the run counts every visit.
func TestSnoozePollsUntilReady(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mu sync.Mutex
	var visits []time.Time
	keys := map[string]bool{}
	attempts := map[int]bool{}
	def := workflow.Definition{Name: "poller", Policy: workflow.Policy{MaxAttempts: 1, MaxIterations: 10},
		Steps: []workflow.Step{
			{Name: "poll", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
				mu.Lock()
				defer mu.Unlock()
				visits = append(visits, time.Now())
				keys[sc.IdempotencyKey] = true
				attempts[sc.Attempt] = true
				if len(visits) < 5 {
					return nil, fmt.Errorf("not ready: %w", workflow.Snooze(300*time.Millisecond))
				}
				return map[string]int{"visits": len(visits)}, nil
			}},
			{Name: "after", Run: func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }},
		}}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := e.wait(mustStart(t, e.client, "poller", nil).ID, 30*time.Second)
	if run.Status != workflow.StatusSucceeded {
		t.Fatalf("status %s: %s %s", run.Status, run.FailureCode, run.FailureReason)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(visits) != 5 || len(keys) != 1 || len(attempts) != 1 || !attempts[1] {
		t.Errorf("%d visits, idempotency keys %v, attempts %v; want 5 visits of attempt 1 under one key",
			len(visits), keys, attempts)
	}
	for i := 1; i < len(visits); i++ {
		if gap := visits[i].Sub(visits[i-1]); gap < 300*time.Millisecond {
			t.Errorf("visit %d came %s after the one before, before its snooze of 300ms ended", i+1, gap)
		}
	}
	st := run.Step("poll")
	if st.Attempts != 1 || st.RetryAttempts != 0 || st.Snoozes != 4 {
		t.Errorf("poll: attempts %d, retry attempts %d, snoozes %d; want 1, 0, 4", st.Attempts, st.RetryAttempts, st.Snoozes)
	}
	if run.Iterations != 6 { // 5 visits of poll, 1 of after
		t.Errorf("iterations %d, want 6", run.Iterations)
	}
	evs := e.events(run.ID)
	if n := countEvents(evs, workflow.EventStepSnoozed, "poll"); n != 4 {
		t.Errorf("%d step_snoozed events, want 4", n)
	}
	if n := countEvents(evs, workflow.EventAttemptFailed, "poll"); n != 0 {
		t.Errorf("%d attempt_failed events, want 0", n)
	}
	for _, ev := range evs {
		if ev.Type == workflow.EventStepSnoozed && delayOf(t, ev) != 300*time.Millisecond {
			t.Errorf("snooze delay %s, want 300ms", delayOf(t, ev))
		}
		if ev.Type == workflow.EventAttemptStarted && ev.Details["resumed"] == "1" {
			t.Errorf("a visit was counted as a crash: %+v", ev)
		}
	}
}

// TestSnoozeCountsAgainstMaxIterations: a step that snoozes forever fails
// the run with max_iterations_exceeded.
func TestSnoozeCountsAgainstMaxIterations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var calls atomic.Int32
	def := workflow.Definition{Name: "forever", Policy: workflow.Policy{MaxIterations: 3},
		Steps: []workflow.Step{{Name: "poll", Run: func(context.Context, *workflow.StepContext) (any, error) {
			calls.Add(1)
			return nil, workflow.Snooze(0)
		}}}}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := e.wait(mustStart(t, e.client, "forever", nil).ID, 20*time.Second)
	if run.Status != workflow.StatusFailed || run.FailureCode != workflow.CodeMaxIterationsExceeded {
		t.Fatalf("status %s code %q, want failed with max_iterations_exceeded", run.Status, run.FailureCode)
	}
	if calls.Load() != 3 {
		t.Errorf("%d visits, want 3", calls.Load())
	}
}

// TestGotoLoopHitsMaxIterations: a Goto back to the first step loops until
// the run's iteration ceiling fails it; every goto and every superseded
// checkpoint is journaled, with its output.
func TestGotoLoopHitsMaxIterations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var fetches, checks atomic.Int32
	def := workflow.Definition{Name: "gotoloop", Policy: workflow.Policy{MaxIterations: 7},
		Steps: []workflow.Step{
			{Name: "fetch", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
				return map[string]int{"n": int(fetches.Add(1)), "attempt": sc.Attempt}, nil
			}},
			{Name: "check", Run: func(context.Context, *workflow.StepContext) (any, error) {
				checks.Add(1)
				return nil, workflow.Goto("fetch")
			}},
		}}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := e.wait(mustStart(t, e.client, "gotoloop", nil).ID, 20*time.Second)
	if run.Status != workflow.StatusFailed || run.FailureCode != workflow.CodeMaxIterationsExceeded {
		t.Fatalf("status %s code %q (%s), want failed with max_iterations_exceeded", run.Status, run.FailureCode,
			run.FailureReason)
	}
	// 7 visits: fetch, check, fetch, check, fetch, check, fetch; the 8th begin fails.
	if fetches.Load() != 4 || checks.Load() != 3 || run.Gotos != 3 {
		t.Errorf("%d fetches, %d checks, %d gotos; want 4, 3, 3", fetches.Load(), checks.Load(), run.Gotos)
	}
	evs := e.events(run.ID)
	if n := countEvents(evs, workflow.EventStepGoto, "check"); n != 3 {
		t.Errorf("%d step_goto events, want 3", n)
	}
	if n := countEvents(evs, workflow.EventStepSuperseded, "fetch"); n != 3 {
		t.Errorf("%d step_superseded events of fetch, want 3", n)
	}
	for _, ev := range evs {
		if ev.Type == workflow.EventStepSuperseded && ev.Details["output"] == "" {
			t.Errorf("superseded checkpoint without its output: %+v", ev)
		}
		if ev.Type == workflow.EventStepGoto && ev.Details["to"] != "fetch" {
			t.Errorf("goto to %q, want fetch", ev.Details["to"])
		}
	}
	// Each visit of fetch is a new attempt (fresh budget, new key).
	if st := run.Step("fetch"); st.Attempts != 4 {
		t.Errorf("fetch: %d attempts, want 4", st.Attempts)
	}
}

// TestGotoThenSucceed: a goto re-runs the steps from its target and the run
// goes on; the final outputs are the latest visit's.
func TestGotoThenSucceed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var fetches atomic.Int32
	def := workflow.Definition{Name: "gotoonce", Steps: []workflow.Step{
		{Name: "fetch", Run: func(context.Context, *workflow.StepContext) (any, error) {
			return int(fetches.Add(1)), nil
		}},
		{Name: "check", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
			var n int
			raw, _ := sc.Output("fetch")
			if err := json.Unmarshal(raw, &n); err != nil {
				return nil, workflow.Permanent(err)
			}
			if n < 2 {
				return nil, workflow.Goto("fetch")
			}
			return n, nil
		}},
	}}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := e.wait(mustStart(t, e.client, "gotoonce", nil).ID, 20*time.Second)
	if run.Status != workflow.StatusSucceeded {
		t.Fatalf("status %s: %s", run.Status, run.FailureReason)
	}
	if string(run.Step("check").Output) != "2" || string(run.Step("fetch").Output) != "2" || run.Gotos != 1 {
		t.Errorf("outputs fetch %s check %s, gotos %d; want 2, 2, 1", run.Step("fetch").Output,
			run.Step("check").Output, run.Gotos)
	}
}

// TestGotoUnknownOrLaterStepFails: a goto to a later or unknown step fails
// the run permanently with invalid_goto.
func TestGotoUnknownOrLaterStepFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var lastRuns atomic.Int32
	def := workflow.Definition{Name: "badgoto", Steps: []workflow.Step{
		{Name: "first", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
			var target string
			if err := json.Unmarshal(sc.Input, &target); err != nil {
				return nil, workflow.Permanent(err)
			}
			return nil, workflow.Goto(target)
		}},
		{Name: "last", Run: func(context.Context, *workflow.StepContext) (any, error) {
			lastRuns.Add(1)
			return nil, nil
		}},
	}}
	e.startWorker(workflow.WorkerConfig{}, def)
	for _, target := range []string{"last", "nope"} {
		run := e.wait(mustStart(t, e.client, "badgoto", target).ID, 20*time.Second)
		if run.Status != workflow.StatusFailed || run.FailureCode != workflow.CodeInvalidGoto {
			t.Errorf("goto %q: status %s code %q, want failed with invalid_goto", target, run.Status, run.FailureCode)
		}
	}
	if lastRuns.Load() != 0 {
		t.Errorf("the later step ran %d times", lastRuns.Load())
	}
}

// TestSnoozedStepSurvivesALostTask: a snoozed step's next visit is a task
// scheduled in asynq for its due time and the run is in idx:scheduled; when
// the task is lost (a worker killed before asynq kept it, or deleted), the
// reconciler re-creates it for the same due time, and the visit, delivered
// early, waits; delivered when due, it resumes the same attempt.
func TestSnoozedStepSurvivesALostTask(t *testing.T) {
	t.Parallel()
	var visits atomic.Int32
	var attempts sync.Map
	def := workflow.Definition{Name: "snoozer", Steps: []workflow.Step{
		{Name: "a", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
			attempts.Store(sc.Attempt, true)
			if visits.Add(1) == 1 {
				return nil, workflow.Snooze(time.Minute)
			}
			return "ready", nil
		}},
	}}
	r := newRig(t, def)
	run := mustStart(t, r.client, "snoozer", nil)
	if err := r.deliver(run.ID, "snoozer", 0, "a", 1, 0); err != nil {
		t.Fatal(err)
	}
	st := r.get(run.ID).Step("a")
	if st.Status != workflow.StepPending || !st.Snoozed || st.Snoozes != 1 || st.NextAttemptAt == nil ||
		st.RetryAttempts != 0 || st.Attempts != 1 {
		t.Fatalf("after the snooze: %+v", st)
	}
	due := *st.NextAttemptAt
	visit := tasks.ID(run.ID, 0, 1, 1) // the same attempt, the next gen
	info, ok := r.taskExists(visit)
	if !ok || info.State != asynq.TaskStateScheduled || !info.NextProcessAt.Equal(tasks.CeilSecond(due)) {
		t.Fatalf("the next visit's task: %+v %v (want scheduled at %s)", info, ok, tasks.CeilSecond(due))
	}
	ids, err := r.store.ScheduledRetries(ctxb, 100)
	if err != nil || len(ids) != 1 || ids[0].RunID != run.ID || !ids[0].At.Equal(due) {
		t.Fatalf("idx:scheduled: %v %v", ids, err)
	}

	r.deleteTask(visit)
	r.clock.Advance(6 * time.Second)
	rep := r.pass()
	if rep.Repairs["retry_task_missing"] != 1 {
		t.Fatalf("pass: %v", rep)
	}
	info, ok = r.taskExists(visit)
	if !ok || info.State != asynq.TaskStateScheduled || !info.NextProcessAt.Equal(tasks.CeilSecond(due)) {
		t.Fatalf("re-created task: %+v %v (want scheduled at %s)", info, ok, tasks.CeilSecond(due))
	}

	// Delivered long before its time, the visit does not run.
	err = r.deliver(run.ID, "snoozer", 0, "a", 1, 1)
	if err == nil || visits.Load() != 1 {
		t.Fatalf("an early delivery: %v, %d visits", err, visits.Load())
	}
	r.clock.Advance(time.Minute)
	if err := r.deliver(run.ID, "snoozer", 0, "a", 1, 1); err != nil {
		t.Fatal(err)
	}
	got := r.get(run.ID)
	if got.Status != workflow.StatusSucceeded || visits.Load() != 2 {
		t.Fatalf("status %s after %d visits", got.Status, visits.Load())
	}
	n := 0
	attempts.Range(func(any, any) bool { n++; return true })
	if s := got.Step("a"); n != 1 || s.Attempts != 1 || s.Snoozed || got.Iterations != 2 {
		t.Errorf("attempt numbers seen %d, attempts %d, snoozed %v, iterations %d; want 1, 1, false, 2",
			n, s.Attempts, s.Snoozed, got.Iterations)
	}
}
