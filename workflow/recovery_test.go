package workflow_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// fakeClock is a Clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// rig is an engine and a reconciler on the test's queue with no asynq
// server: the test delivers tasks itself, so every state is reached on
// purpose.
type rig struct {
	*env
	clock *fakeClock
	eng   *workflow.Engine
	rec   *workflow.Reconciler
	store *retrystate.Store
	ins   *asynq.Inspector
}

func newRig(t *testing.T, defs ...workflow.Definition) *rig {
	t.Helper()
	e := newEnv(t)
	clock := newFakeClock()
	eng := publishedEngine(t, e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log, Clock: clock}, defs...)
	e.client = workflow.NewClient(e.rdb, workflow.ClientConfig{Queue: e.queue, Logger: e.log, Clock: clock})
	return &rig{env: e, clock: clock, eng: eng,
		rec:   eng.NewReconciler(workflow.ReconcilerConfig{MaxAutoRecoveries: 3, Grace: 5 * time.Second}),
		store: retrystate.New(e.rdb, e.queue), ins: asynq.NewInspectorFromRedisClient(e.rdb)}
}

// deliver hands the task of a dispatch to the engine, as asynq would.
func (r *rig) deliver(runID, wf string, idx int, name string, attempt, gen int) error {
	p := tasks.Step{RunID: runID, Workflow: wf, Index: idx, Name: name, Attempt: attempt, Gen: gen}
	return r.eng.ProcessTask(ctxb, asynq.NewTask(tasks.TypeStep, p.Encode()))
}

func (r *rig) pass() workflow.Report {
	r.t.Helper()
	rep, err := r.rec.Pass(ctxb)
	if err != nil || !rep.Locked {
		r.t.Fatalf("pass: %+v %v", rep, err)
	}
	return rep
}

func (r *rig) get(id string) *workflow.Run {
	r.t.Helper()
	run, err := r.client.Get(ctxb, id)
	if err != nil {
		r.t.Fatal(err)
	}
	return run
}

func (r *rig) taskExists(id string) (*asynq.TaskInfo, bool) {
	info, err := r.ins.GetTaskInfo(r.queue, id)
	return info, err == nil
}

func (r *rig) deleteTask(id string) {
	r.t.Helper()
	if err := r.ins.DeleteTask(r.queue, id); err != nil {
		r.t.Fatalf("delete task %s: %v", id, err)
	}
}

// dieMidAttempt begins the first attempt of the run's step 0 as a worker
// that then dies (its fence, token "dead", is not renewed) with the
// attempt's task gone.
func (r *rig) dieMidAttempt(runID string) {
	r.t.Helper()
	first := tasks.ID(runID, 0, 1, 0)
	b, err := r.store.Begin(ctxb, retrystate.BeginParams{RunID: runID, Index: 0, TaskID: first, Token: "dead",
		FenceTTL: 10 * time.Second, Now: r.clock.Now()})
	if err != nil || b.Outcome != retrystate.OutcomeOK {
		r.t.Fatalf("begin: %+v %v", b, err)
	}
	r.deleteTask(first)
}

func lastEvent(evs []workflow.Event, typ string) *workflow.Event {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return &evs[i]
		}
	}
	return nil
}

func twoSteps(first workflow.StepFunc) workflow.Definition {
	return workflow.Definition{Name: "two", Policy: workflow.Policy{InitialInterval: 10 * time.Second, MaxInterval: time.Minute, Jitter: workflow.JitterNone},
		Steps: []workflow.Step{{Name: "a", Run: first}, {Name: "b", Run: noop, Optional: true}}}
}

func failing(context.Context, *workflow.StepContext) (any, error) { return nil, errors.New("503") }

// Repair: a scheduled retry whose asynq task is missing is re-enqueued for
// its due time.
func TestRepairMissingRetryTask(t *testing.T) {
	t.Parallel()
	r := newRig(t, twoSteps(failing))
	run := mustStart(t, r.client, "two", nil)
	if err := r.deliver(run.ID, "two", 0, "a", 1, 0); err != nil {
		t.Fatal(err)
	}
	due := *r.get(run.ID).Step("a").NextAttemptAt
	retry := tasks.ID(run.ID, 0, 2, 0)
	r.deleteTask(retry)

	// Within the grace period the reconciler leaves the run to the engine.
	if rep := r.pass(); rep.Total() != 0 {
		t.Fatalf("repaired a run the engine had just written: %v", rep)
	}
	r.clock.Advance(6 * time.Second)
	rep := r.pass()
	if rep.Repairs["retry_task_missing"] != 1 || rep.Incomplete != 1 {
		t.Fatalf("pass: %v (incomplete %d)", rep, rep.Incomplete)
	}
	info, ok := r.taskExists(retry)
	if !ok || info.State != asynq.TaskStateScheduled || !info.NextProcessAt.Equal(tasks.CeilSecond(due)) {
		t.Fatalf("re-created task: %+v (want scheduled at %s)", info, tasks.CeilSecond(due))
	}
	ev := lastEvent(r.events(run.ID), workflow.EventRepair)
	if ev == nil || ev.Details["kind"] != "retry_task_missing" || ev.Details["task"] != retry || ev.Step != "a" {
		t.Errorf("repair event: %+v", ev)
	}
	// Nothing left to repair.
	if rep := r.pass(); rep.Total() != 0 {
		t.Errorf("second pass repaired again: %v", rep)
	}
}

// A pass checks at most MaxChecks runs of each index and the next goes on
// where it stopped: scheduled retries whose tasks are missing, all due at
// the same time (one score in idx:scheduled), are repaired MaxChecks a
// pass, each once, until every task exists.
func TestPassGoesOnWhereTheLastStopped(t *testing.T) {
	t.Parallel()
	r := newRig(t, twoSteps(failing))
	rec := r.eng.NewReconciler(workflow.ReconcilerConfig{MaxAutoRecoveries: 3, Grace: 5 * time.Second, MaxChecks: 2})
	const n = 5
	retries := make([]string, n)
	for i := range retries {
		run := mustStart(t, r.client, "two", nil)
		if err := r.deliver(run.ID, "two", 0, "a", 1, 0); err != nil {
			t.Fatal(err)
		}
		retries[i] = tasks.ID(run.ID, 0, 2, 0)
		r.deleteTask(retries[i])
	}
	r.clock.Advance(6 * time.Second)
	// Runs checked per pass: the last pass starts the walk again, at the
	// runs repaired first, now within their grace.
	checked := []int{2, 2, 1, 2}
	for i, want := range []int{2, 2, 1, 0} {
		rep, err := rec.Pass(ctxb)
		if err != nil || !rep.Locked {
			t.Fatalf("pass %d: %+v %v", i+1, rep, err)
		}
		if got := rep.Repairs["retry_task_missing"]; got != want || rep.Total() != want {
			t.Fatalf("pass %d: %v; want %d retry tasks repaired", i+1, rep, want)
		}
		// Each walk reads up to 2 runs: the scheduled ones, checked, then
		// the idle ones, the same, left to the scheduled walk.
		if rep.Checked != checked[i] {
			t.Errorf("pass %d checked %d runs; want %d", i+1, rep.Checked, checked[i])
		}
	}
	for _, id := range retries {
		if info, ok := r.taskExists(id); !ok || info.State != asynq.TaskStateScheduled {
			t.Errorf("retry task %s: %+v", id, info)
		}
	}
}

// A running step whose fence expired but which is not in idx:fences (so
// the sweep does not see it) is found by the pass's idle check: a crash,
// re-dispatched as the sweep would.
func TestPassFindsACrashTheSweepMissed(t *testing.T) {
	t.Parallel()
	r := newRig(t, twoSteps(noop))
	run := mustStart(t, r.client, "two", nil)
	r.dieMidAttempt(run.ID)
	if err := r.rdb.ZRem(ctxb, "cairn:{"+r.queue+"}:idx:fences", run.ID).Err(); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(11 * time.Second)
	rep := r.pass()
	if rep.Repairs["crashed_attempt"] != 1 || rep.Total() != 1 {
		t.Fatalf("pass: %v; want the crash repaired", rep)
	}
	if _, ok := r.taskExists(tasks.ID(run.ID, 0, 1, 1)); !ok {
		t.Fatal("the re-dispatched task is missing")
	}
	if a := r.get(run.ID).Step("a"); a.Crashes != 1 || a.Status != workflow.StepPending {
		t.Errorf("step a: %+v", a)
	}
}

// Repair: a step whose task asynq archived (it gave up delivering it) gets a
// new dispatch, whose task the pass's check writes; the archived one stays.
func TestRepairArchivedTask(t *testing.T) {
	t.Parallel()
	r := newRig(t, twoSteps(noop))
	run := mustStart(t, r.client, "two", nil)
	first := tasks.ID(run.ID, 0, 1, 0)
	if err := r.ins.ArchiveTask(r.queue, first); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(6 * time.Second)
	if rep := r.pass(); rep.Repairs["task_archived"] != 1 || rep.Total() != 1 {
		t.Fatalf("pass: %v", rep)
	}
	next := tasks.ID(run.ID, 0, 1, 1)
	if info, ok := r.taskExists(next); !ok || info.State != asynq.TaskStatePending {
		t.Fatalf("new dispatch %s: %+v", next, info)
	}
	if info, ok := r.taskExists(first); !ok || info.State != asynq.TaskStateArchived {
		t.Errorf("archived task: %+v", info)
	}
	if err := r.deliver(run.ID, "two", 0, "a", 1, 1); err != nil {
		t.Fatal(err)
	}
	if a := r.get(run.ID).Step("a"); a.Status != workflow.StepSucceeded {
		t.Errorf("step a after the new dispatch: %+v", a)
	}
	r.clock.Advance(6 * time.Second)
	if rep := r.pass(); rep.Repairs["task_archived"] != 0 {
		t.Errorf("second pass: %v", rep)
	}
}

// Repair: a run whose current step has no task (a crash after the state
// write, before the enqueue) gets its task.
func TestRepairLostEnqueue(t *testing.T) {
	t.Parallel()
	r := newRig(t, twoSteps(noop))
	run := mustStart(t, r.client, "two", nil)
	if err := r.deliver(run.ID, "two", 0, "a", 1, 0); err != nil { // enqueues b
		t.Fatal(err)
	}
	next := tasks.ID(run.ID, 1, 1, 0)
	r.deleteTask(next) // as if the worker died before enqueueing it
	r.clock.Advance(6 * time.Second)
	if rep := r.pass(); rep.Repairs["task_missing"] != 1 {
		t.Fatalf("pass: %v", rep)
	}
	if info, ok := r.taskExists(next); !ok || info.State != asynq.TaskStatePending {
		t.Fatalf("task %s not re-created: %+v", next, info)
	}
	if err := r.deliver(run.ID, "two", 1, "b", 1, 0); err != nil {
		t.Fatal(err)
	}
	if got := r.get(run.ID); got.Status != workflow.StatusSucceeded {
		t.Errorf("run %s", got.Status)
	}
	if ev := lastEvent(r.events(run.ID), workflow.EventRepair); ev == nil || ev.Details["kind"] != "task_missing" {
		t.Errorf("repair event %+v", ev)
	}
}

// Repair: an attempt whose worker died (its fence expired) and whose task is
// gone is re-dispatched and counted as a crash, not as a failed attempt.
func TestRepairCrashedAttempt(t *testing.T) {
	t.Parallel()
	r := newRig(t, twoSteps(noop))
	run := mustStart(t, r.client, "two", nil)
	// A worker begins the attempt and dies: the state says running, the
	// fence is set, nobody renews it, and its task is gone.
	r.dieMidAttempt(run.ID)
	if rep, _ := r.rec.Sweep(ctxb); rep.Total() != 0 {
		t.Fatalf("swept a live attempt: %v", rep)
	}
	r.clock.Advance(11 * time.Second)
	rep, err := r.rec.Sweep(ctxb)
	if err != nil || rep.Repairs["crashed_attempt"] != 1 {
		t.Fatalf("sweep: %v %v", rep, err)
	}
	redispatched := tasks.ID(run.ID, 0, 1, 1)
	if _, ok := r.taskExists(redispatched); !ok {
		t.Fatalf("re-dispatched task %s missing", redispatched)
	}
	got := r.get(run.ID)
	if a := got.Step("a"); a.Crashes != 1 || a.Attempts != 1 || a.RetryAttempts != 0 || a.Status != workflow.StepPending {
		t.Fatalf("step a after the repair: %+v", a)
	}
	evs := r.events(run.ID)
	if ev := lastEvent(evs, workflow.EventAttemptCrashed); ev == nil || ev.Details["detected_by"] != "reconciler" || ev.Attempt != 1 {
		t.Errorf("crash event %+v", ev)
	}
	// The old task, delivered late, is a stale duplicate; the new one resumes
	// the same attempt.
	if err := r.deliver(run.ID, "two", 0, "a", 1, 0); err != nil {
		t.Fatal(err)
	}
	if a := r.get(run.ID).Step("a"); a.Status != workflow.StepPending {
		t.Fatalf("the stale task ran the step: %+v", a)
	}
	if err := r.deliver(run.ID, "two", 0, "a", 1, 1); err != nil {
		t.Fatal(err)
	}
	got = r.get(run.ID)
	a := got.Step("a")
	if a.Status != workflow.StepSucceeded || a.Attempts != 1 || a.Crashes != 1 || a.RetryAttempts != 0 {
		t.Errorf("step a: %+v", a)
	}
	if ev := lastEvent(r.events(run.ID), workflow.EventAttemptStarted); ev == nil || ev.Details["resumed"] != "1" {
		t.Errorf("resumed attempt_started %+v", ev)
	}
}

// Crashes have their own budget: one crash more than max_crashes fails the
// run with crash_budget_exhausted.
func TestCrashBudget(t *testing.T) {
	t.Parallel()
	def := twoSteps(noop)
	def.Policy.MaxCrashes = 2
	r := newRig(t, def)
	r.rec = r.eng.NewReconciler(workflow.ReconcilerConfig{MaxAutoRecoveries: 100})
	run := mustStart(t, r.client, "two", nil)
	for gen := range 3 {
		b, err := r.store.Begin(ctxb, retrystate.BeginParams{RunID: run.ID, Index: 0, TaskID: tasks.ID(run.ID, 0, 1, gen),
			Token: "t", FenceTTL: time.Second, Now: r.clock.Now()})
		if err != nil || b.Outcome != retrystate.OutcomeOK {
			t.Fatalf("begin gen %d: %+v %v", gen, b, err)
		}
		r.clock.Advance(2 * time.Second)
		if _, err := r.rec.Sweep(ctxb); err != nil {
			t.Fatal(err)
		}
	}
	got := r.get(run.ID)
	if got.Status != workflow.StatusFailed || got.FailureCode != workflow.CodeCrashBudgetExhausted || !got.NeedsAttention {
		t.Fatalf("after 3 crashes: %s %q", got.Status, got.FailureCode)
	}
	if a := got.Step("a"); a.Crashes != 3 || a.Attempts != 1 || a.RetryAttempts != 0 {
		t.Errorf("step a: %+v", a)
	}
	if !strings.Contains(got.FailureReason, "crashed 3 times") {
		t.Errorf("reason %q", got.FailureReason)
	}
}

// Repair: a run past its deadline fails with run_timeout, and its task is
// deleted.
func TestRepairDeadline(t *testing.T) {
	t.Parallel()
	def := twoSteps(failing)
	def.Policy.RunTimeout = time.Hour
	def.Policy.InitialInterval = 30 * time.Minute
	def.Policy.MaxInterval = 30 * time.Minute
	r := newRig(t, def)
	run := mustStart(t, r.client, "two", nil)
	if run.Deadline == nil || !run.Deadline.Equal(run.CreatedAt.Add(time.Hour)) {
		t.Fatalf("deadline %v, created %s", run.Deadline, run.CreatedAt)
	}
	if err := r.deliver(run.ID, "two", 0, "a", 1, 0); err != nil { // retry in 30m
		t.Fatal(err)
	}
	retry := tasks.ID(run.ID, 0, 2, 0)
	r.clock.Advance(61 * time.Minute)
	if rep := r.pass(); rep.Repairs["deadline"] != 1 || rep.Failed != 1 {
		t.Fatalf("pass: %v", rep)
	}
	got := r.get(run.ID)
	if got.Status != workflow.StatusFailed || got.FailureCode != workflow.CodeRunTimeout || got.Step("a").RetryState != workflow.RetryNone {
		t.Fatalf("run %s %q, step a %+v", got.Status, got.FailureCode, got.Step("a"))
	}
	if _, ok := r.taskExists(retry); ok {
		t.Errorf("the timed-out run's retry task still exists")
	}
}

// Tasks of a finished or unknown run are acknowledged without running.
func TestTasksOfFinishedOrUnknownRuns(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	r := newRig(t, twoSteps(func(context.Context, *workflow.StepContext) (any, error) { calls.Add(1); return nil, nil }))
	run := mustStart(t, r.client, "two", nil)
	if _, err := r.client.Cancel(ctxb, run.ID, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.deliver(run.ID, "two", 0, "a", 1, 0); err != nil {
		t.Fatalf("task of a cancelled run: %v", err)
	}
	if err := r.deliver(workflow.NewRunID(time.Now()), "two", 0, "a", 1, 0); err != nil {
		t.Fatalf("task of an unknown run: %v", err)
	}
	if calls.Load() != 0 {
		t.Errorf("step ran %d times", calls.Load())
	}
	if ev := lastEvent(r.events(run.ID), workflow.EventDeliveryIgnored); ev == nil || ev.Details["reason"] != "run cancelled" {
		t.Errorf("journal entry for the ignored delivery: %+v", ev)
	}
}

// The breaker: a run repaired automatically more than MaxAutoRecoveries
// times is left needing attention instead of looping; recover clears it.
func TestAutoRecoveryBreaker(t *testing.T) {
	t.Parallel()
	r := newRig(t, twoSteps(noop))
	run := mustStart(t, r.client, "two", nil)
	task := tasks.ID(run.ID, 0, 1, 0)
	for i := 1; i <= 3; i++ {
		r.deleteTask(task)
		r.clock.Advance(6 * time.Second)
		if rep := r.pass(); rep.Repairs["task_missing"] != 1 {
			t.Fatalf("repair %d: %v", i, rep)
		}
	}
	r.deleteTask(task)
	r.clock.Advance(6 * time.Second)
	rep := r.pass()
	if rep.Total() != 0 || rep.Attention != 1 {
		t.Fatalf("fourth repair: %v", rep)
	}
	got := r.get(run.ID)
	if !got.NeedsAttention || !strings.Contains(got.AttentionReason, "repaired automatically 3 times") ||
		got.Status != workflow.StatusPending {
		t.Fatalf("run: %s attention %v %q", got.Status, got.NeedsAttention, got.AttentionReason)
	}
	// Left alone from now on.
	r.clock.Advance(6 * time.Second)
	if rep := r.pass(); rep.Total() != 0 || rep.Attention != 0 {
		t.Fatalf("pass after the breaker: %v", rep)
	}
	if _, ok := r.taskExists(task); ok {
		t.Fatal("the reconciler re-created the task of a run left for an operator")
	}
	attention, _, _ := r.client.List(ctxb, workflow.ListOptions{Status: workflow.StatusPending})
	if len(attention) != 1 || !attention[0].NeedsAttention {
		t.Errorf("list: %+v", attention)
	}
	// An operator recovers it: a fresh dispatch, the counter reset.
	rec, err := r.client.Recover(ctxb, run.ID, &workflow.ActionOptions{Actor: "ops"})
	if err != nil || rec.NeedsAttention || rec.AttentionReason != "" {
		t.Fatalf("recover: %v %+v", err, rec)
	}
	if _, ok := r.taskExists(tasks.ID(run.ID, 0, 2, 0)); !ok {
		t.Fatal("recover enqueued no task")
	}
}

// Only one replica reconciles at a time.
func TestReconcilerLock(t *testing.T) {
	t.Parallel()
	r := newRig(t, twoSteps(noop))
	other := r.eng.NewReconciler(workflow.ReconcilerConfig{})
	locked, err := r.store.TryLock(ctxb, retrystate.LockReconcile, "someone-else", time.Minute)
	if err != nil || !locked {
		t.Fatal(locked, err)
	}
	if rep, err := other.Pass(ctxb); err != nil || rep.Locked {
		t.Fatalf("pass under another replica's lock: %+v %v", rep, err)
	}
	if err := r.store.Unlock(ctxb, retrystate.LockReconcile, "someone-else"); err != nil {
		t.Fatal(err)
	}
	if rep, err := other.Pass(ctxb); err != nil || !rep.Locked {
		t.Fatalf("pass after the lock was released: %+v %v", rep, err)
	}
}

// Operator actions: recover resumes from the last checkpoint with a fresh
// budget; retry and skip act on the step the run stopped at; each is
// journaled with its actor and refused, changing nothing, in the wrong state.
func TestOperatorActions(t *testing.T) {
	t.Parallel()
	var aCalls, bCalls, cCalls atomic.Int32
	var bFails atomic.Bool
	bFails.Store(true)
	def := workflow.Definition{Name: "ops", Policy: workflow.Policy{MaxAttempts: 2, InitialInterval: time.Second, Jitter: workflow.JitterNone},
		Steps: []workflow.Step{
			{Name: "a", Run: func(context.Context, *workflow.StepContext) (any, error) { aCalls.Add(1); return "a-out", nil }},
			{Name: "b", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
				bCalls.Add(1)
				if bFails.Load() {
					return nil, errors.New("b broken")
				}
				var a string
				if err := sc.DecodeOutput("a", &a); err != nil {
					return nil, err
				}
				return a + "+b", nil
			}},
			{Name: "c", Optional: true, Run: func(context.Context, *workflow.StepContext) (any, error) {
				cCalls.Add(1)
				return nil, workflow.Permanent(errors.New("c broken"))
			}},
		}}
	r := newRig(t, def)
	run := mustStart(t, r.client, "ops", nil)
	refuse := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, workflow.ErrActionRefused) {
			t.Errorf("%s: %v, want ErrActionRefused", what, err)
		}
	}
	_, err := r.client.Recover(ctxb, run.ID, nil)
	refuse("recover of a pending run", err)

	// a succeeds, b fails twice: the run fails.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.deliver(run.ID, "ops", 0, "a", 1, 0))
	must(r.deliver(run.ID, "ops", 1, "b", 1, 0))
	r.clock.Advance(2 * time.Second)
	must(r.deliver(run.ID, "ops", 1, "b", 2, 0))
	got := r.get(run.ID)
	if got.Status != workflow.StatusFailed || got.FailureCode != workflow.CodeRetriesExhausted {
		t.Fatalf("run %s %q", got.Status, got.FailureCode)
	}

	_, err = r.client.SkipStep(ctxb, run.ID, "b", nil)
	refuse("skip of a required step", err)
	_, err = r.client.RetryStep(ctxb, run.ID, "a", nil)
	refuse("retry of a succeeded step", err)
	_, err = r.client.RetryStep(ctxb, run.ID, "nope", nil)
	refuse("retry of an unknown step", err)
	if _, err := r.client.Recover(ctxb, workflow.NewRunID(time.Now()), nil); !errors.Is(err, workflow.ErrRunNotFound) {
		t.Errorf("recover of an unknown run: %v", err)
	}
	if got2 := r.get(run.ID); got2.Status != workflow.StatusFailed || countEvents(r.events(run.ID), workflow.EventRunRecovered, "") != 0 {
		t.Fatal("a refused action changed the run")
	}

	// Recover: b runs again with a fresh budget (attempt 3, budget 2 more);
	// a does not run again.
	bFails.Store(false)
	rec, err := r.client.Recover(ctxb, run.ID, &workflow.ActionOptions{Actor: "alice"})
	if err != nil || rec.Status != workflow.StatusRunning || rec.NeedsAttention || rec.FailureReason != "" || rec.FinishedAt != nil {
		t.Fatalf("recover: %v %+v", err, rec)
	}
	_, err = r.client.Recover(ctxb, run.ID, nil)
	refuse("second recover", err)
	must(r.deliver(run.ID, "ops", 1, "b", 3, 0))
	must(r.deliver(run.ID, "ops", 2, "c", 1, 0)) // c fails permanently
	got = r.get(run.ID)
	if got.Status != workflow.StatusFailed || got.Step("b").Status != workflow.StepSucceeded || string(got.Step("b").Output) != `"a-out+b"` {
		t.Fatalf("after recover: %s, b %+v", got.Status, got.Step("b"))
	}
	if aCalls.Load() != 1 || bCalls.Load() != 3 {
		t.Errorf("a ran %d times, b %d", aCalls.Load(), bCalls.Load())
	}

	// Skip the optional c: the run succeeds.
	sk, err := r.client.SkipStep(ctxb, run.ID, "c", &workflow.ActionOptions{Actor: "bob"})
	if err != nil || sk.Status != workflow.StatusSucceeded || sk.Step("c").Status != workflow.StepSkipped {
		t.Fatalf("skip: %v %+v", err, sk)
	}
	_, err = r.client.SkipStep(ctxb, run.ID, "c", nil)
	refuse("skip of a succeeded run", err)
	evs := r.events(run.ID)
	actors := map[string]string{}
	for _, ev := range evs {
		if ev.Type == workflow.EventRunRecovered {
			actors[ev.Details["action"]] = ev.Details["actor"]
		}
	}
	if actors["recover"] != "alice" || actors["skip"] != "bob" || countEvents(evs, workflow.EventStepSkipped, "c") != 1 {
		t.Errorf("journal actors %v", actors)
	}
	if cCalls.Load() != 1 {
		t.Errorf("c ran %d times", cCalls.Load())
	}
}

// RetryStep on a failed run re-runs the failed step with a fresh budget.
func TestRetryStep(t *testing.T) {
	t.Parallel()
	var fail atomic.Bool
	fail.Store(true)
	r := newRig(t, twoSteps(func(context.Context, *workflow.StepContext) (any, error) {
		if fail.Load() {
			return nil, workflow.Permanent(errors.New("bad request"))
		}
		return nil, nil
	}))
	run := mustStart(t, r.client, "two", nil)
	if err := r.deliver(run.ID, "two", 0, "a", 1, 0); err != nil {
		t.Fatal(err)
	}
	fail.Store(false)
	got, err := r.client.RetryStep(ctxb, run.ID, "a", &workflow.ActionOptions{Actor: "carol"})
	if err != nil || got.Status != workflow.StatusRunning {
		t.Fatalf("retry: %v %+v", err, got)
	}
	if err := r.deliver(run.ID, "two", 0, "a", 2, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.deliver(run.ID, "two", 1, "b", 1, 0); err != nil {
		t.Fatal(err)
	}
	if got := r.get(run.ID); got.Status != workflow.StatusSucceeded || got.Step("a").Attempts != 2 {
		t.Errorf("run %s, a attempts %d", got.Status, got.Step("a").Attempts)
	}
	// Cancel stays correct after a recovery: it stops the run.
	run2 := mustStart(t, r.client, "two", nil)
	fail.Store(true)
	if err := r.deliver(run2.ID, "two", 0, "a", 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Recover(ctxb, run2.ID, nil); err != nil {
		t.Fatal(err)
	}
	c, err := r.client.Cancel(ctxb, run2.ID, nil)
	if err != nil || c.Status != workflow.StatusCancelled {
		t.Fatalf("cancel after recover: %v %+v", err, c)
	}
	if _, ok := r.taskExists(tasks.ID(run2.ID, 0, 2, 0)); ok {
		t.Error("cancel left the recovered attempt's task")
	}
}
