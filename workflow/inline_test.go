package workflow_test

import (
	"context"

	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// processedTasks is how many tasks asynq has processed on the queue (its
// own counter, asynq:{q}:processed).
func (e *env) processedTasks() int64 {
	n, _ := e.rdb.Get(ctxb, tasks.QueueKeys(e.queue).Processed()).Int64()
	return n
}

// TestInlineRunsTheNextStepInTheSameTask: an inline workflow's steps run one
// after another in the delivery of the first step's task: asynq processes one
// task per run; every step sees the outputs before it, is journaled as begun
// inline, and holds its own fence and attempt.
func TestInlineRunsTheNextStepInTheSameTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mu sync.Mutex
	seen := map[string]string{}
	step := func(name string) workflow.StepFunc {
		return func(_ context.Context, sc *workflow.StepContext) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			out := ""
			for _, before := range []string{"a", "b"} {
				if o, ok := sc.Output(before); ok {
					out += string(o)
				}
			}
			seen[name] = out
			return name + "-out", nil
		}
	}
	def := workflow.Definition{Name: "inl", Inline: true, Steps: []workflow.Step{
		{Name: "a", Run: step("a")}, {Name: "b", Run: step("b")}, {Name: "c", Run: step("c")}}}
	e.startWorker(workflow.WorkerConfig{}, def)
	const runs = 5
	var ids []string
	for range runs {
		ids = append(ids, mustStart(t, e.client, "inl", nil).ID)
	}
	for _, id := range ids {
		run := e.wait(id, 30*time.Second)
		if run.Status != workflow.StatusSucceeded {
			t.Fatalf("run %s: %s %s", id, run.Status, run.FailureReason)
		}
		for _, s := range run.Steps {
			if s.Attempts != 1 || s.Status != workflow.StepSucceeded {
				t.Errorf("run %s step %s: %+v", id, s.Name, s)
			}
		}
		inline := 0
		for _, ev := range e.events(id) {
			if ev.Type == workflow.EventAttemptStarted && ev.Details["inline"] == "1" {
				inline++
			}
		}
		if inline != 2 {
			t.Errorf("run %s: %d attempts begun inline, want 2 (b and c)", id, inline)
		}
	}
	mu.Lock()
	if seen["b"] != `"a-out"` || seen["c"] != `"a-out""b-out"` {
		t.Errorf("outputs seen by b %q and c %q", seen["b"], seen["c"])
	}
	mu.Unlock()
	e.eventually(10*time.Second, "asynq to count the processed tasks", func() bool { return e.processedTasks() >= runs })
	if n := e.processedTasks(); n != runs {
		t.Errorf("asynq processed %d tasks for %d runs of 3 steps; want one per run", n, runs)
	}
}

// TestInlineYields: a delivery runs at most MaxInlineSteps steps inline; the
// next gets a task of its own.
func TestInlineYields(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	def := workflow.Definition{Name: "longinl", Inline: true}
	const steps = workflow.MaxInlineSteps + 5
	for i := range steps {
		def.Steps = append(def.Steps, workflow.Step{Name: fmt.Sprintf("s%d", i), Run: noop})
	}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := e.wait(mustStart(t, e.client, "longinl", nil).ID, 60*time.Second)
	if run.Status != workflow.StatusSucceeded {
		t.Fatalf("run: %s %s", run.Status, run.FailureReason)
	}
	// No delivery ran more than MaxInlineSteps steps inline after its own:
	// a chain of begins journaled inline is never longer.
	longest, chain := 0, 0
	for _, ev := range e.events(run.ID) {
		if ev.Type != workflow.EventAttemptStarted {
			continue
		}
		if ev.Details["inline"] == "1" {
			chain++
			longest = max(longest, chain)
		} else {
			chain = 0
		}
	}
	if longest == 0 || longest > workflow.MaxInlineSteps {
		t.Errorf("the longest inline chain ran %d steps; want 1 to %d", longest, workflow.MaxInlineSteps)
	}
	e.eventually(10*time.Second, "asynq to count the processed tasks", func() bool { return e.processedTasks() >= 2 })
}

// TestInlineFallsBackForWaits: a sleep after a step of an inline workflow
// is not begun inline (it has no body); it waits as usual, and the step
// after it runs.
func TestInlineFallsBackForWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ran atomic.Bool
	def := workflow.Definition{Name: "inlwait", Inline: true, Steps: []workflow.Step{
		{Name: "a", Run: noop},
		{Name: "nap", Sleep: &workflow.Sleep{For: 10 * time.Millisecond}},
		{Name: "c", Run: func(context.Context, *workflow.StepContext) (any, error) { ran.Store(true); return nil, nil }},
	}}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := e.wait(mustStart(t, e.client, "inlwait", nil).ID, 30*time.Second)
	if run.Status != workflow.StatusSucceeded || !ran.Load() {
		t.Fatalf("run %s (c ran: %v)", run.Status, ran.Load())
	}
}

// TestInlineCancel: a run cancelled while one of its steps runs inline
// runs no step after it: the step's checkpoint is refused.
func TestInlineCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var after atomic.Bool
	def := workflow.Definition{Name: "inlcancel", Inline: true, Steps: []workflow.Step{
		{Name: "a", Run: noop},
		{Name: "b", Run: func(context.Context, *workflow.StepContext) (any, error) {
			close(entered)
			<-release
			return "late", nil
		}},
		{Name: "c", Run: func(context.Context, *workflow.StepContext) (any, error) { after.Store(true); return nil, nil }},
	}}
	e.startWorker(workflow.WorkerConfig{}, def)
	id := mustStart(t, e.client, "inlcancel", nil).ID
	<-entered
	if _, err := e.client.Cancel(ctxb, id, nil); err != nil {
		t.Fatal(err)
	}
	close(release)
	run := e.wait(id, 30*time.Second)
	e.eventually(10*time.Second, "b's late result to be discarded", func() bool {
		for _, ev := range e.events(id) {
			if ev.Type == workflow.EventRunCancelled {
				return true
			}
		}
		return false
	})
	if run.Status != workflow.StatusCancelled || after.Load() || run.Step("b").Output != nil {
		t.Errorf("status %s, c ran %v, b's output %s; want cancelled, c never run, no output", run.Status, after.Load(),
			run.Step("b").Output)
	}
}

// TestInlineCrash: the worker running an inline step dies; its fence
// expires, the sweep re-dispatches the step as a task of its own (a crash),
// and a delivery of that task resumes it. A complete that asked to go on
// inline, retried after its reply was lost, finds the step it began (begin
// with the same token answers ok again).
func TestInlineCrash(t *testing.T) {
	t.Parallel()
	def := workflow.Definition{Name: "inlcrash", Inline: true, Steps: []workflow.Step{
		{Name: "a", Run: noop}, {Name: "b", Run: noop}}}
	r := newRig(t, def)
	run := mustStart(t, r.client, "inlcrash", nil)
	first := tasks.ID(run.ID, 0, 1, 0)
	b, err := r.store.Begin(ctxb, retrystate.BeginParams{RunID: run.ID, Index: 0, TaskID: first, Token: "w1",
		FenceTTL: 10 * time.Second, Now: r.clock.Now()})
	if err != nil || b.Outcome != retrystate.OutcomeOK {
		t.Fatalf("begin: %+v %v", b, err)
	}
	args := retrystate.CompleteParams{RunID: run.ID, Index: 0, Token: "w1", Output: `"a"`, Retention: time.Hour,
		Now: r.clock.Now(), NextTaskID: tasks.ID(run.ID, 1, 1, 0), InlineToken: "w1-inline", FenceTTL: 10 * time.Second}
	c, err := r.store.Complete(ctxb, args)
	if err != nil || c.Outcome != retrystate.OutcomeInline || c.Dispatch.Name != "b" || c.Started.Attempt != 1 {
		t.Fatalf("inline complete: %+v %v", c, err)
	}
	if _, ok := r.taskExists(tasks.ID(run.ID, 1, 1, 0)); ok {
		t.Errorf("an inline step got a task")
	}
	// The reply was lost: the retry answers done, and a begin with the
	// inline token finds the step it began.
	if again, err := r.store.Complete(ctxb, args); err != nil || again.Outcome != retrystate.OutcomeDone {
		t.Fatalf("complete again: %+v %v", again, err)
	}
	bg, err := r.store.Begin(ctxb, retrystate.BeginParams{RunID: run.ID, Index: 1, TaskID: tasks.ID(run.ID, 1, 1, 0),
		Token: "w1-inline", FenceTTL: 10 * time.Second, Now: r.clock.Now()})
	if err != nil || bg.Outcome != retrystate.OutcomeOK || bg.Started.Crashed {
		t.Fatalf("begin with the inline token: %+v %v", bg, err)
	}
	// The worker dies in b.
	r.clock.Advance(11 * time.Second)
	if rep, err := r.rec.Sweep(ctxb); err != nil || rep.Repairs["crashed_attempt"] != 1 {
		t.Fatalf("sweep: %v %v", rep, err)
	}
	if _, ok := r.taskExists(tasks.ID(run.ID, 1, 1, 1)); !ok {
		t.Fatal("the crashed inline step was not re-dispatched as a task")
	}
	if err := r.deliver(run.ID, "inlcrash", 1, "b", 1, 1); err != nil {
		t.Fatal(err)
	}
	got := r.get(run.ID)
	if got.Status != workflow.StatusSucceeded || got.Step("b").Crashes != 1 || got.Step("b").Attempts != 1 {
		t.Errorf("run %s, b %+v; want succeeded, b resumed once after 1 crash", got.Status, got.Step("b"))
	}
}

// TestInlineNotPastTheDeadline: a step whose run's deadline has passed is
// not begun inline: its task is written, and its begin fails the run.
func TestInlineNotPastTheDeadline(t *testing.T) {
	t.Parallel()
	def := workflow.Definition{Name: "inldl", Inline: true, Policy: workflow.Policy{RunTimeout: time.Minute},
		Steps: []workflow.Step{{Name: "a", Run: noop}, {Name: "b", Run: noop}}}
	r := newRig(t, def)
	run := mustStart(t, r.client, "inldl", nil)
	b, err := r.store.Begin(ctxb, retrystate.BeginParams{RunID: run.ID, Index: 0, TaskID: tasks.ID(run.ID, 0, 1, 0),
		Token: "w", FenceTTL: 10 * time.Minute, Now: r.clock.Now()})
	if err != nil || b.Outcome != retrystate.OutcomeOK {
		t.Fatalf("begin: %+v %v", b, err)
	}
	r.clock.Advance(2 * time.Minute)
	c, err := r.store.Complete(ctxb, retrystate.CompleteParams{RunID: run.ID, Index: 0, Token: "w", Output: "null",
		Retention: time.Hour, Now: r.clock.Now(), InlineToken: "w2", FenceTTL: time.Minute})
	if err != nil || c.Outcome != retrystate.OutcomeNext {
		t.Fatalf("complete past the deadline: %+v %v; want next (no inline begin)", c, err)
	}
	if err := r.deliver(run.ID, "inldl", 1, "b", 1, 0); err != nil {
		t.Fatal(err)
	}
	if got := r.get(run.ID); got.Status != workflow.StatusFailed || got.FailureCode != workflow.CodeRunTimeout {
		t.Errorf("run %s %q, want failed with run_timeout", got.Status, got.FailureCode)
	}
}
