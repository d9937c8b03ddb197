package workflow_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// waitFor receives from ch, failing the test after a generous deadline.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// parkedEvent is the run's dispatch_parked entry of step, once journaled.
func (e *env) parkedEvent(id, step string) workflow.Event {
	e.t.Helper()
	var found workflow.Event
	e.eventually(30*time.Second, "a parked dispatch of "+step, func() bool {
		for _, ev := range e.events(id) {
			if ev.Type == workflow.EventDispatchParked && ev.Step == step {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// typesAfter is the event types of evs from the first of type typ on.
func typesAfter(evs []workflow.Event, typ string) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type == typ || len(out) > 0 {
			out = append(out, ev.Type+":"+ev.Step)
		}
	}
	return out
}

// TestPauseLetsTheAttemptInFlightFinish: a run paused while its step runs
// finishes that attempt and checkpoints it; its next step does not begin
// until the resume (inline or not), and then runs once.
func TestPauseLetsTheAttemptInFlightFinish(t *testing.T) {
	t.Parallel()
	for _, inline := range []bool{false, true} {
		name := "tasks"
		if inline {
			name = "inline"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			started, release := make(chan struct{}, 1), make(chan struct{})
			var bRuns atomic.Int32
			def := workflow.Definition{Name: "pz", Inline: inline, Steps: []workflow.Step{
				{Name: "a", Run: func(ctx context.Context, _ *workflow.StepContext) (any, error) {
					started <- struct{}{}
					select {
					case <-release:
						return "a-out", nil
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}},
				{Name: "b", Run: func(context.Context, *workflow.StepContext) (any, error) {
					bRuns.Add(1)
					return "b-out", nil
				}},
				{Name: "c", Run: noop},
			}}
			e.startWorker(workflow.WorkerConfig{}, def)
			id := mustStart(t, e.client, "pz", nil).ID
			waitFor(t, started, "step a to start")

			run, err := e.client.Pause(ctxb, id, &workflow.ActionOptions{Actor: "ops"})
			if err != nil {
				t.Fatal(err)
			}
			if run.Paused == nil || run.Paused.By != "ops" || run.Paused.Parked {
				t.Fatalf("paused run: %+v", run.Paused)
			}
			// Pausing again changes nothing.
			if _, err := e.client.Pause(ctxb, id, &workflow.ActionOptions{Actor: "other"}); err != nil {
				t.Fatal(err)
			}
			close(release)
			e.parkedEvent(id, "b")

			run, err = e.client.Get(ctxb, id)
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != workflow.StatusRunning || run.Paused == nil || !run.Paused.Parked || run.Paused.By != "ops" {
				t.Fatalf("run after the parked dispatch: %s %+v", run.Status, run.Paused)
			}
			if s := run.Steps[0]; s.Status != workflow.StepSucceeded || string(s.Output) != `"a-out"` {
				t.Errorf("step a was not checkpointed: %+v", s)
			}
			if s := run.Steps[1]; s.Status != workflow.StepPending || bRuns.Load() != 0 {
				t.Errorf("step b began while the run was paused: %+v, %d runs", s, bRuns.Load())
			}
			if n := countEvents(e.events(id), workflow.EventPaused, ""); n != 1 {
				t.Errorf("%d paused entries, want 1", n)
			}

			if _, err := e.client.Resume(ctxb, id, &workflow.ActionOptions{Actor: "ops"}); err != nil {
				t.Fatal(err)
			}
			run = e.wait(id, 30*time.Second)
			if run.Status != workflow.StatusSucceeded || run.Paused != nil {
				t.Fatalf("run after the resume: %s %s %+v", run.Status, run.FailureReason, run.Paused)
			}
			if bRuns.Load() != 1 || run.Steps[1].Attempts != 1 {
				t.Errorf("step b ran %d times, %d attempts; want once", bRuns.Load(), run.Steps[1].Attempts)
			}
			after := typesAfter(e.events(id), workflow.EventResumed)
			if len(after) < 2 || after[1] != workflow.EventAttemptStarted+":b" {
				t.Errorf("after the resume: %v; want b's attempt to start", after)
			}
			// A run that ended is neither paused nor resumed.
			for _, act := range []func(context.Context, string, *workflow.ActionOptions) (*workflow.Run, error){
				e.client.Pause, e.client.Resume} {
				if _, err := act(ctxb, id, nil); !errors.Is(err, workflow.ErrRunFinished) {
					t.Errorf("action on a succeeded run: %v, want ErrRunFinished", err)
				}
			}
		})
	}
}

// TestPauseHoldsARetry: a retry that comes due while the run is paused
// waits for the resume.
func TestPauseHoldsARetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started, release := make(chan struct{}, 1), make(chan struct{})
	var attempts atomic.Int32
	def := workflow.Definition{Name: "pzr", Policy: fastPolicy(), Steps: []workflow.Step{
		{Name: "a", Run: func(context.Context, *workflow.StepContext) (any, error) {
			if attempts.Add(1) > 1 {
				return "ok", nil
			}
			started <- struct{}{}
			<-release
			return nil, workflow.Transient(errors.New("not yet"))
		}},
	}}
	e.startWorker(workflow.WorkerConfig{}, def)
	id := mustStart(t, e.client, "pzr", nil).ID
	waitFor(t, started, "step a to start")
	if _, err := e.client.Pause(ctxb, id, nil); err != nil {
		t.Fatal(err)
	}
	close(release)
	ev := e.parkedEvent(id, "a")
	if ev.Attempt != 2 {
		t.Errorf("parked attempt %d, want the retry, 2", ev.Attempt)
	}
	run, err := e.client.Get(ctxb, id)
	if err != nil {
		t.Fatal(err)
	}
	if attempts.Load() != 1 || run.Status != workflow.StatusRunning || run.Paused == nil || !run.Paused.Parked {
		t.Fatalf("the retry began while paused (%d attempts), or the run is %s %+v", attempts.Load(), run.Status, run.Paused)
	}
	if _, err := e.client.Resume(ctxb, id, nil); err != nil {
		t.Fatal(err)
	}
	if run := e.wait(id, 30*time.Second); run.Status != workflow.StatusSucceeded || attempts.Load() != 2 {
		t.Fatalf("after the resume: %s, %d attempts", run.Status, attempts.Load())
	}
}

// TestPauseHoldsASleep: a sleep whose time comes while the run is paused
// wakes only after the resume.
func TestPauseHoldsASleep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var cRuns atomic.Int32
	def := workflow.Definition{Name: "pzs", Steps: []workflow.Step{
		{Name: "a", Run: noop},
		{Name: "nap", Sleep: &workflow.Sleep{For: 3 * time.Second}},
		{Name: "c", Run: func(context.Context, *workflow.StepContext) (any, error) {
			cRuns.Add(1)
			return nil, nil
		}},
	}}
	e.startWorker(workflow.WorkerConfig{}, def)
	id := mustStart(t, e.client, "pzs", nil).ID
	e.eventually(30*time.Second, "the sleep to begin", func() bool {
		return countEvents(e.events(id), workflow.EventTimerSet, "nap") == 1
	})
	if _, err := e.client.Pause(ctxb, id, &workflow.ActionOptions{Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	e.parkedEvent(id, "nap")
	run, err := e.client.Get(ctxb, id)
	if err != nil {
		t.Fatal(err)
	}
	if run.Steps[1].Status != workflow.StepWaiting || cRuns.Load() != 0 {
		t.Fatalf("the sleep woke while paused: %+v, c ran %d times", run.Steps[1], cRuns.Load())
	}
	if _, err := e.client.Resume(ctxb, id, &workflow.ActionOptions{Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	if run := e.wait(id, 30*time.Second); run.Status != workflow.StatusSucceeded || cRuns.Load() != 1 {
		t.Fatalf("after the resume: %s, c ran %d times", run.Status, cRuns.Load())
	}
	types := typesAfter(e.events(id), workflow.EventPaused)
	if !slices.Contains(types, workflow.EventTimerFired+":nap") {
		t.Errorf("no timer_fired after the pause: %v", types)
	}
}

// TestPausedRunParkedAndLeftAlone: a delivery of a paused run is parked;
// the reconciler leaves the parked dispatch alone (no task, on purpose);
// the paused filter lists the run; the resume writes the task again, under
// a new ID while asynq still holds the old one.
func TestPausedRunParkedAndLeftAlone(t *testing.T) {
	t.Parallel()
	def := workflow.Definition{Name: "pzl", Steps: []workflow.Step{{Name: "a", Run: noop}, {Name: "b", Run: noop}}}
	r := newRig(t, def)
	run := mustStart(t, r.client, "pzl", nil)
	other := mustStart(t, r.client, "pzl", nil)
	if _, err := r.client.Pause(ctxb, run.ID, &workflow.ActionOptions{Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	if err := r.deliver(run.ID, "pzl", 0, "a", 1, 0); err != nil {
		t.Fatal(err)
	}
	first := tasks.ID(run.ID, 0, 1, 0)
	r.deleteTask(first) // as the delivery's acknowledgement does
	got := r.get(run.ID)
	if got.Paused == nil || !got.Paused.Parked || got.Step("a").Status != workflow.StepPending || got.Step("a").Attempts != 0 {
		t.Fatalf("after the parked delivery: %+v, step %+v", got.Paused, got.Step("a"))
	}
	if countEvents(r.events(run.ID), workflow.EventAttemptStarted, "a") != 0 {
		t.Fatal("the paused run began an attempt")
	}
	r.clock.Advance(time.Minute)
	if rep := r.pass(); rep.Total() != 0 {
		t.Fatalf("the reconciler repaired a paused run: %v", rep)
	}
	if _, ok := r.taskExists(first); ok {
		t.Fatal("the reconciler wrote the parked dispatch's task")
	}
	runs, _, err := r.client.List(ctxb, workflow.ListOptions{Paused: true})
	if err != nil || len(runs) != 1 || runs[0].ID != run.ID || runs[0].Paused == nil {
		t.Fatalf("paused runs: %+v, %v; want only %s", runs, err, run.ID)
	}

	if _, err := r.client.Resume(ctxb, run.ID, &workflow.ActionOptions{Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	if info, ok := r.taskExists(first); !ok || info.State != asynq.TaskStatePending {
		t.Fatalf("the parked dispatch's task after the resume: %+v", info)
	}
	if runs, _, err := r.client.List(ctxb, workflow.ListOptions{Paused: true}); err != nil || len(runs) != 0 {
		t.Fatalf("paused runs after the resume: %+v, %v", runs, err)
	}
	ev := lastEvent(r.events(run.ID), workflow.EventResumed)
	if ev == nil || ev.Details["actor"] != "ops" || ev.Details["task"] != first {
		t.Fatalf("resumed entry: %+v", ev)
	}

	// Paused again, the run's next delivery parks; resumed before asynq
	// lets go of that task, the dispatch gets a new task ID.
	if _, err := r.client.Pause(ctxb, other.ID, nil); err != nil {
		t.Fatal(err)
	}
	// The delivery takes the task, as a dequeue does (active), and
	// parks it; its acknowledgement has not come yet.
	q, old := tasks.QueueKeys(r.queue), tasks.ID(other.ID, 0, 1, 0)
	r.rdb.LRem(ctxb, q.Pending(), 0, old)
	r.rdb.LPush(ctxb, q.Active(), old)
	r.rdb.HSet(ctxb, q.Task(old), "state", "active")
	if err := r.deliver(other.ID, "pzl", 0, "a", 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Resume(ctxb, other.ID, nil); err != nil {
		t.Fatal(err)
	}
	next := tasks.ID(other.ID, 0, 1, 1)
	if info, ok := r.taskExists(next); !ok || info.State != asynq.TaskStatePending {
		t.Fatalf("the new dispatch's task %s: %+v", next, info)
	}
	if err := r.deliver(other.ID, "pzl", 0, "a", 1, 0); err != nil { // the old task: stale now
		t.Fatal(err)
	}
	if err := r.deliver(other.ID, "pzl", 0, "a", 1, 1); err != nil {
		t.Fatal(err)
	}
	if s := r.get(other.ID).Step("a"); s.Status != workflow.StepSucceeded || s.Attempts != 1 {
		t.Fatalf("step a after the resume: %+v", s)
	}
}

// TestPausedRunsWorkerDies: a worker that dies mid-attempt while the run
// is paused loses nothing: the sweep re-dispatches the attempt as after
// any crash, its delivery is parked (the paused run begins nothing), and
// the resume lets the same attempt resume, the crash counted once.
func TestPausedRunsWorkerDies(t *testing.T) {
	t.Parallel()
	r := newRig(t, twoSteps(noop))
	run := mustStart(t, r.client, "two", nil)
	r.dieMidAttempt(run.ID)
	if _, err := r.client.Pause(ctxb, run.ID, nil); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(11 * time.Second) // the dead worker's fence expires
	if rep, err := r.rec.Sweep(ctxb); err != nil || rep.Repairs["crashed_attempt"] != 1 {
		t.Fatalf("sweep: %v %v", rep, err)
	}
	redispatched := tasks.ID(run.ID, 0, 1, 1)
	if err := r.deliver(run.ID, "two", 0, "a", 1, 1); err != nil {
		t.Fatal(err)
	}
	r.deleteTask(redispatched) // as the parked delivery's acknowledgement does
	got := r.get(run.ID)
	if a := got.Step("a"); a.Status != workflow.StepPending || a.Crashes != 1 || got.Paused == nil || !got.Paused.Parked {
		t.Fatalf("after the parked re-dispatch: step %+v, paused %+v", a, got.Paused)
	}
	r.clock.Advance(time.Minute)
	if rep := r.pass(); rep.Total() != 0 {
		t.Fatalf("the reconciler repaired the paused run: %v", rep)
	}
	if _, err := r.client.Resume(ctxb, run.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.taskExists(redispatched); !ok {
		t.Fatalf("the resume did not write the parked task %s again", redispatched)
	}
	if err := r.deliver(run.ID, "two", 0, "a", 1, 1); err != nil {
		t.Fatal(err)
	}
	a := r.get(run.ID).Step("a")
	if a.Status != workflow.StepSucceeded || a.Attempts != 1 || a.Crashes != 1 {
		t.Errorf("step a after the resume: %+v", a)
	}
	if ev := lastEvent(r.events(run.ID), workflow.EventAttemptStarted); ev == nil || ev.Details["resumed"] != "1" {
		t.Errorf("resumed attempt_started %+v", ev)
	}
}
