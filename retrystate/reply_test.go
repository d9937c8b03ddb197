package retrystate_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// allOutcomes lists every Outcome constant: TestRepliesRoundTrip drives the
// scripts into each.
var allOutcomes = []retrystate.Outcome{
	retrystate.OutcomeOK, retrystate.OutcomeGone, retrystate.OutcomeEnded, retrystate.OutcomeStale,
	retrystate.OutcomeBusy, retrystate.OutcomeEarly, retrystate.OutcomeRunFailed, retrystate.OutcomeCreated,
	retrystate.OutcomeExists, retrystate.OutcomeNext, retrystate.OutcomeRunSucceeded, retrystate.OutcomeFenced,
	retrystate.OutcomeDone, retrystate.OutcomeRetry, retrystate.OutcomeReleased, retrystate.OutcomeCancelled,
	retrystate.OutcomeAlreadyCancelled, retrystate.OutcomeDispatch, retrystate.OutcomeAttention,
	retrystate.OutcomeNoop, retrystate.OutcomeRefused, retrystate.OutcomeRecheck, retrystate.OutcomeCrashed,
}

// show prints a result with the values behind its pointers.
func show(r any) string {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Sprintf("%+v (%v)", r, err)
	}
	return fmt.Sprintf("%T%s", r, b)
}

// outcome returns the Outcome of a typed result.
func outcome(r any) retrystate.Outcome {
	return reflect.ValueOf(r).FieldByName("Outcome").Interface().(retrystate.Outcome) //nolint:forcetypeassert // every result has one
}

// TestRepliesRoundTrip drives each state script into each of its outcomes
// on a real Redis, and compares the whole typed result with the one
// expected.
func TestRepliesRoundTrip(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	const minute = time.Minute
	at := t0.Add
	n := 0
	newID := func() string { n++; return runID(5000 + n) }
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// start creates a run of the steps; a step named "opt:<name>" is
	// optional. timeout is the run's timeout (0: none).
	start := func(timeout time.Duration, maxCrashes int, steps ...string) string {
		t.Helper()
		id := newID()
		nr := retrystate.NewRun{ID: id, Workflow: "wf", Owner: "o", Input: `{"in":1}`,
			RunTimeout: timeout, Now: t0}
		for _, name := range steps {
			name, opt := strings.CutPrefix(name, "opt:")
			nr.Steps = append(nr.Steps, retrystate.NewStep{Name: name, Optional: opt, MaxAttempts: 3,
				MaxCrashes: maxCrashes, Timeout: minute, Policy: `{"p":1}`})
		}
		must(s.CreateRun(ctxb, nr))
		return id
	}
	run := func(steps ...string) string { t.Helper(); return start(0, 1, steps...) }
	// check is Store.CheckTasks of one run, with a grace of 10s.
	check := func(id string, now time.Time) (retrystate.CheckResult, error) {
		cs, err := s.CheckTasks(ctxb, []string{id}, retrystate.CheckParams{Grace: 10 * time.Second, MaxAuto: 3, Now: now})
		if err != nil {
			return retrystate.CheckResult{}, err
		}
		return cs[0].Result, cs[0].Err
	}
	begun := func(id string, idx int, token string, now time.Time) {
		t.Helper()
		if b := begin(t, s, id, idx, tasks.ID(id, idx, 1, 0), token, now); b.Outcome != retrystate.OutcomeOK {
			t.Fatalf("begin: %s", show(b))
		}
	}
	complete := func(id string, idx int, token, output string, now time.Time) (retrystate.CompleteResult, error) {
		return s.Complete(ctxb, retrystate.CompleteParams{RunID: id, Index: idx, Token: token, Output: output,
			Retention: time.Hour, Now: now})
	}
	fail := func(id, token, class string, delay time.Duration) (retrystate.FailResult, error) {
		return s.Fail(ctxb, retrystate.FailParams{RunID: id, Index: 0, Token: token, Error: "boom", Class: class,
			Delay: delay, Retention: time.Hour, Now: t0})
	}
	// retrying is a run whose step a failed at t0 and retries at t0+3s.
	retrying := func() string {
		t.Helper()
		id := run("a")
		begun(id, 0, "tok", t0)
		must(fail(id, "tok", retrystate.ClassTransient, 3*time.Second))
		return id
	}
	// failed is a run whose only step failed with a permanent error.
	failed := func() string {
		t.Helper()
		id := run("a")
		begun(id, 0, "tok", t0)
		must(fail(id, "tok", retrystate.ClassPermanent, 0))
		return id
	}
	succeeded := func() string {
		t.Helper()
		id := run("a")
		begun(id, 0, "tok", t0)
		must(complete(id, 0, "tok", `"out"`, t0))
		return id
	}

	type reply struct {
		name string
		// do prepares the state and calls the Store once more; it returns
		// what it expects with the result.
		do      func() (want, got any, err error)
		wantErr error
		// drives is the outcome of a script that the Store returns as the
		// error wantErr.
		drives retrystate.Outcome
	}
	var id string // the run of the current case
	cases := []reply{
		// create.lua
		{name: "create/created", do: func() (any, any, error) {
			id = newID()
			got, err := s.CreateRun(ctxb, retrystate.NewRun{ID: id, Workflow: "wf", Input: "{}", Now: t0,
				Steps: []retrystate.NewStep{{Name: "a", MaxAttempts: 1, Timeout: minute}, {Name: "b", MaxAttempts: 1}}})
			return retrystate.CreateResult{Outcome: retrystate.OutcomeCreated, RunID: id, Task: tasks.ID(id, 0, 1, 0),
				Next: retrystate.Next{Dispatch: &retrystate.Dispatch{Index: 0, Name: "a", Attempt: 1, Timeout: minute}}}, got, err
		}},
		{name: "create/exists", do: func() (any, any, error) {
			first := newID()
			nr := retrystate.NewRun{ID: first, Workflow: "wf", Owner: "o", IdempotencyKey: "k", Input: "{}",
				Now: t0, Steps: []retrystate.NewStep{{Name: "a", MaxAttempts: 1}}}
			must(s.CreateRun(ctxb, nr))
			nr.ID = newID()
			got, err := s.CreateRun(ctxb, nr)
			return retrystate.CreateResult{Outcome: retrystate.OutcomeExists, RunID: first}, got, err
		}},

		// begin.lua
		{name: "begin/ok", do: func() (any, any, error) {
			id = run("a", "b")
			got := begin(t, s, id, 0, tasks.ID(id, 0, 1, 0), "tok", t0)
			return retrystate.BeginResult{Outcome: retrystate.OutcomeOK, Started: &retrystate.Started{Attempt: 1,
				Input: `{"in":1}`, Policy: `{"p":1}`, Used: 1,
				Next: &retrystate.Dispatch{Index: 1, Name: "b", Attempt: 1, Timeout: minute}}}, got, nil
		}},
		{name: "begin/ok, resumed after a crash, with an earlier output", do: func() (any, any, error) {
			id = run("a", "b")
			begun(id, 0, "tok", t0)
			must(complete(id, 0, "tok", `"out"`, t0))
			begun(id, 1, "tok1", at(time.Second))
			got := begin(t, s, id, 1, tasks.ID(id, 1, 1, 0), "tok2", at(20*time.Second)) // the fence (10s) expired
			return retrystate.BeginResult{Outcome: retrystate.OutcomeOK, Started: &retrystate.Started{Attempt: 1,
				Crashes: 1, Crashed: true, Input: `{"in":1}`, Policy: `{"p":1}`, Used: 1,
				Earlier: []retrystate.Checkpoint{{Name: "a", Output: `"out"`}}}}, got, nil
		}},
		{name: "begin/ok, with a deadline", do: func() (any, any, error) {
			id = start(5*time.Second, 1, "a")
			got := begin(t, s, id, 0, tasks.ID(id, 0, 1, 0), "tok", t0)
			return retrystate.BeginResult{Outcome: retrystate.OutcomeOK, Started: &retrystate.Started{Attempt: 1,
				Input: `{"in":1}`, Policy: `{"p":1}`, Used: 1, Deadline: at(5 * time.Second)}}, got, nil
		}},
		{name: "begin/gone", do: func() (any, any, error) {
			id = newID()
			got := begin(t, s, id, 0, tasks.ID(id, 0, 1, 0), "tok", t0)
			return retrystate.BeginResult{Outcome: retrystate.OutcomeGone}, got, nil
		}},
		{name: "begin/ended", do: func() (any, any, error) {
			id = run("a")
			must(s.Cancel(ctxb, retrystate.CancelParams{RunID: id, Actor: "me", Retention: time.Hour, Now: t0}))
			got := begin(t, s, id, 0, tasks.ID(id, 0, 1, 0), "tok", t0)
			return retrystate.BeginResult{Outcome: retrystate.OutcomeEnded, RunStatus: retrystate.StatusCancelled}, got, nil
		}},
		{name: "begin/stale, with the dispatch the run waits for", do: func() (any, any, error) {
			id = retrying()
			got := begin(t, s, id, 0, tasks.ID(id, 0, 1, 0), "tok2", at(time.Second))
			return retrystate.BeginResult{Outcome: retrystate.OutcomeStale, Dispatch: &retrystate.Dispatch{Index: 0, Name: "a",
				Attempt: 2, DueAt: at(3 * time.Second), Timeout: minute}}, got, nil
		}},
		{name: "begin/stale, while the step runs", do: func() (any, any, error) {
			id = run("a")
			begun(id, 0, "tok", t0)
			got := begin(t, s, id, 0, tasks.ID(id, 0, 1, 1), "tok2", t0)
			return retrystate.BeginResult{Outcome: retrystate.OutcomeStale}, got, nil
		}},
		{name: "begin/busy", do: func() (any, any, error) {
			id = run("a")
			begun(id, 0, "tok", t0)
			got := begin(t, s, id, 0, tasks.ID(id, 0, 1, 0), "tok2", at(4*time.Second))
			return retrystate.BeginResult{Outcome: retrystate.OutcomeBusy, Wait: 6 * time.Second}, got, nil
		}},
		{name: "begin/early", do: func() (any, any, error) {
			id = retrying()
			got := begin(t, s, id, 0, tasks.ID(id, 0, 2, 0), "tok2", at(time.Second))
			return retrystate.BeginResult{Outcome: retrystate.OutcomeEarly, Wait: 2 * time.Second}, got, nil
		}},
		{name: "begin/failed", do: func() (any, any, error) {
			id = start(5*time.Second, 1, "a")
			got := begin(t, s, id, 0, tasks.ID(id, 0, 1, 0), "tok", at(6*time.Second))
			return retrystate.BeginResult{Outcome: retrystate.OutcomeRunFailed, RunFailure: retrystate.RunFailure{
				Code:   retrystate.CodeRunTimeout,
				Reason: `run passed its deadline (run_timeout 5s) before step "a" attempt 1`}}, got, nil
		}},

		// complete.lua
		{name: "complete/next, enqueued", do: func() (any, any, error) {
			id = run("a", "b")
			begun(id, 0, "tok", t0)
			next := tasks.Step{RunID: id, Workflow: "wf", Index: 1, Name: "b", Attempt: 1}
			got, err := s.Complete(ctxb, retrystate.CompleteParams{RunID: id, Index: 0, Token: "tok", Output: "1",
				Now: t0, NextTaskID: next.ID(), NextMessage: next.AsynqMessage(s.Queue(), minute)})
			return retrystate.CompleteResult{Outcome: retrystate.OutcomeNext, Next: retrystate.Next{Enqueued: true,
				Dispatch: &retrystate.Dispatch{Index: 1, Name: "b", Attempt: 1, Timeout: minute}}}, got, err
		}},
		{name: "complete/succeeded", do: func() (any, any, error) {
			id = run("a")
			begun(id, 0, "tok", t0)
			got, err := complete(id, 0, "tok", "1", t0)
			return retrystate.CompleteResult{Outcome: retrystate.OutcomeRunSucceeded}, got, err
		}},
		{name: "complete/fenced", do: func() (any, any, error) {
			id = run("a")
			begun(id, 0, "tok", t0)
			got, err := complete(id, 0, "other", "1", t0)
			return retrystate.CompleteResult{Outcome: retrystate.OutcomeFenced, Why: "fence lost"}, got, err
		}},
		{name: "complete/done", do: func() (any, any, error) {
			id = run("a", "b")
			begun(id, 0, "tok", t0)
			must(complete(id, 0, "tok", "1", t0))
			got, err := complete(id, 0, "tok", "1", at(time.Second))
			return retrystate.CompleteResult{Outcome: retrystate.OutcomeDone, RunStatus: retrystate.StatusRunning}, got, err
		}},

		// fail.lua
		{name: "fail/retry, enqueued", do: func() (any, any, error) {
			id = run("a")
			begun(id, 0, "tok", t0)
			retry := tasks.Step{RunID: id, Workflow: "wf", Index: 0, Name: "a", Attempt: 2}
			got, err := s.Fail(ctxb, retrystate.FailParams{RunID: id, Index: 0, Token: "tok", Error: "boom",
				Class: retrystate.ClassTransient, Delay: 2 * time.Second, Now: t0, RetryTaskID: retry.ID(),
				RetryMessage: retry.AsynqMessage(s.Queue(), minute)})
			return retrystate.FailResult{Outcome: retrystate.OutcomeRetry, Next: retrystate.Next{Enqueued: true,
				Dispatch: &retrystate.Dispatch{Index: 0, Attempt: 2, DueAt: at(2 * time.Second), Timeout: minute}}}, got, err
		}},
		{name: "fail/failed", do: func() (any, any, error) {
			id = run("a")
			begun(id, 0, "tok", t0)
			got, err := fail(id, "tok", retrystate.ClassPermanent, 0)
			return retrystate.FailResult{Outcome: retrystate.OutcomeRunFailed, RunFailure: retrystate.RunFailure{
				Code:   retrystate.CodePermanentError,
				Reason: `step "a" failed with a permanent error on attempt 1: boom`}}, got, err
		}},
		{name: "fail/fenced", do: func() (any, any, error) {
			id = run("a")
			begun(id, 0, "tok", t0)
			got, err := fail(id, "other", retrystate.ClassTransient, 0)
			return retrystate.FailResult{Outcome: retrystate.OutcomeFenced, Why: "fence lost"}, got, err
		}},
		{name: "fail/done", do: func() (any, any, error) {
			id = failed()
			got, err := fail(id, "tok", retrystate.ClassPermanent, 0)
			return retrystate.FailResult{Outcome: retrystate.OutcomeDone, RunStatus: retrystate.StatusFailed,
				RunFailure: retrystate.RunFailure{Code: retrystate.CodePermanentError}}, got, err
		}},

		// release.lua
		{name: "release/released", do: func() (any, any, error) {
			id = run("a")
			begun(id, 0, "tok", t0)
			got, err := s.Release(ctxb, retrystate.ReleaseParams{RunID: id, Index: 0, Token: "tok", Now: at(time.Second)})
			return retrystate.ReleaseResult{Outcome: retrystate.OutcomeReleased,
				Next: retrystate.Next{Dispatch: &retrystate.Dispatch{Index: 0, Name: "a", Attempt: 1, Gen: 1, Timeout: minute}}}, got, err
		}},
		{name: "release/fenced", do: func() (any, any, error) {
			id = run("a")
			begun(id, 0, "tok", t0)
			got, err := s.Release(ctxb, retrystate.ReleaseParams{RunID: id, Index: 0, Token: "other", Now: at(time.Second)})
			return retrystate.ReleaseResult{Outcome: retrystate.OutcomeFenced, Why: "fence lost"}, got, err
		}},

		// cancel.lua
		{name: "cancel/cancelled", do: func() (any, any, error) {
			id = run("a")
			got, err := s.Cancel(ctxb, retrystate.CancelParams{RunID: id, Actor: "me", Retention: time.Hour, Now: t0})
			return retrystate.CancelResult{Outcome: retrystate.OutcomeCancelled, Task: tasks.ID(id, 0, 1, 0),
				StepStatus: retrystate.StepPending}, got, err
		}},
		{name: "cancel/already", do: func() (any, any, error) {
			id = run("a")
			must(s.Cancel(ctxb, retrystate.CancelParams{RunID: id, Actor: "me", Retention: time.Hour, Now: t0}))
			got, err := s.Cancel(ctxb, retrystate.CancelParams{RunID: id, Actor: "me", Retention: time.Hour, Now: t0})
			return retrystate.CancelResult{Outcome: retrystate.OutcomeAlreadyCancelled, RunStatus: retrystate.StatusCancelled}, got, err
		}},
		{name: "cancel/ended", drives: retrystate.OutcomeEnded,
			wantErr: &retrystate.RunEndedError{Status: retrystate.StatusSucceeded}, do: func() (any, any, error) {
				id = succeeded()
				got, err := s.Cancel(ctxb, retrystate.CancelParams{RunID: id, Actor: "me", Retention: time.Hour, Now: t0})
				return retrystate.CancelResult{}, got, err
			}},
		{name: "cancel/gone", wantErr: retrystate.ErrRunNotFound, do: func() (any, any, error) {
			got, err := s.Cancel(ctxb, retrystate.CancelParams{RunID: newID(), Actor: "me", Retention: time.Hour, Now: t0})
			return retrystate.CancelResult{}, got, err
		}},

		// redispatch.lua
		{name: "redispatch/redispatched", do: func() (any, any, error) {
			id = run("a")
			begun(id, 0, "tok", t0)
			got, err := s.Redispatch(ctxb, retrystate.RedispatchParams{RunID: id, MaxAuto: 3, Retention: time.Hour,
				Now: at(11 * time.Second)})
			return retrystate.RedispatchResult{Outcome: retrystate.OutcomeDispatch, Kind: "crashed_attempt", Crashes: 1, Workflow: "wf",
				Dispatch: &retrystate.Dispatch{Index: 0, Name: "a", Attempt: 1, Gen: 1, Timeout: minute}}, got, err
		}},
		{name: "redispatch/failed", do: func() (any, any, error) {
			id = start(0, 0, "a")
			begun(id, 0, "tok", t0)
			got, err := s.Redispatch(ctxb, retrystate.RedispatchParams{RunID: id, MaxAuto: 3, Retention: time.Hour,
				Now: at(11 * time.Second)})
			return retrystate.RedispatchResult{Outcome: retrystate.OutcomeRunFailed, Kind: "crashed_attempt",
				RunFailure: retrystate.RunFailure{Code: retrystate.CodeCrashBudgetExhausted,
					Reason: `step "a": worker crashed 1 times during attempt 1 (max_crashes 0)`}}, got, err
		}},
		{name: "redispatch/attention", do: func() (any, any, error) {
			id = run("a")
			begun(id, 0, "tok", t0)
			got, err := s.Redispatch(ctxb, retrystate.RedispatchParams{RunID: id, Retention: time.Hour,
				Now: at(11 * time.Second)})
			return retrystate.RedispatchResult{Outcome: retrystate.OutcomeAttention, Kind: "crashed_attempt",
				Reason: "repaired automatically 0 times (max_auto_recoveries 0); left for an operator (last: crashed attempt)"}, got, err
		}},
		{name: "redispatch/noop", do: func() (any, any, error) {
			id = run("a")
			begun(id, 0, "tok", t0)
			got, err := s.Redispatch(ctxb, retrystate.RedispatchParams{RunID: id, MaxAuto: 3, Retention: time.Hour,
				Now: at(time.Second)})
			return retrystate.RedispatchResult{Outcome: retrystate.OutcomeNoop, Reason: "fence alive"}, got, err
		}},

		// repair.lua
		{name: "repair/repair, archived", do: func() (any, any, error) {
			id = run("a")
			got, err := s.RepairTask(ctxb, retrystate.RepairParams{RunID: id, TaskID: tasks.ID(id, 0, 1, 0),
				Trouble: retrystate.TaskArchived, MaxAuto: 3, Now: at(time.Second)})
			return retrystate.RepairResult{Outcome: retrystate.OutcomeDispatch, Kind: "task_archived", Workflow: "wf",
				Next: retrystate.Next{Enqueued: true,
					Dispatch: &retrystate.Dispatch{Index: 0, Name: "a", Attempt: 1, Gen: 1, Timeout: minute}}}, got, err
		}},
		{name: "repair/repair, a retry's task missing", do: func() (any, any, error) {
			id = retrying()
			got, err := s.RepairTask(ctxb, retrystate.RepairParams{RunID: id, TaskID: tasks.ID(id, 0, 2, 0),
				Trouble: retrystate.TaskMissing, MaxAuto: 3, Now: at(time.Second)})
			return retrystate.RepairResult{Outcome: retrystate.OutcomeDispatch, Kind: "retry_task_missing", Workflow: "wf",
				Next: retrystate.Next{Enqueued: true,
					Dispatch: &retrystate.Dispatch{Index: 0, Name: "a", Attempt: 2, DueAt: at(3 * time.Second), Timeout: minute}}}, got, err
		}},
		{name: "repair check/recheck", do: func() (any, any, error) {
			id = run("a") // written at t0, its task not in asynq
			got, err := check(id, at(time.Second))
			return retrystate.CheckResult{RepairResult: retrystate.RepairResult{Outcome: retrystate.OutcomeRecheck},
				RecheckAt: at(10 * time.Second)}, got, err
		}},
		{name: "repair check/crashed", do: func() (any, any, error) {
			id = run("a")
			begun(id, 0, "tok", t0)
			got, err := check(id, at(11*time.Second))
			return retrystate.CheckResult{RepairResult: retrystate.RepairResult{Outcome: retrystate.OutcomeCrashed}}, got, err
		}},
		{name: "repair check/repair", do: func() (any, any, error) {
			id = run("a")
			got, err := check(id, at(10*time.Second))
			return retrystate.CheckResult{RepairResult: retrystate.RepairResult{Outcome: retrystate.OutcomeDispatch,
				Kind: "task_missing", Workflow: "wf", Next: retrystate.Next{Enqueued: true,
					Dispatch: &retrystate.Dispatch{Index: 0, Name: "a", Attempt: 1, Timeout: minute}}}}, got, err
		}},
		{name: "repair/attention", do: func() (any, any, error) {
			id = run("a")
			got, err := s.RepairTask(ctxb, retrystate.RepairParams{RunID: id, TaskID: tasks.ID(id, 0, 1, 0),
				Trouble: retrystate.TaskMissing, Now: at(time.Second)})
			return retrystate.RepairResult{Outcome: retrystate.OutcomeAttention,
				Reason: "repaired automatically 0 times (max_auto_recoveries 0); left for an operator (last: task_missing)"}, got, err
		}},
		{name: "repair/noop", do: func() (any, any, error) {
			id = run("a")
			got, err := s.RepairTask(ctxb, retrystate.RepairParams{RunID: id, TaskID: tasks.ID(id, 0, 1, 1),
				Trouble: retrystate.TaskMissing, MaxAuto: 3, Now: at(time.Second)})
			return retrystate.RepairResult{Outcome: retrystate.OutcomeNoop, Reason: "state moved on"}, got, err
		}},

		// timeout.lua
		{name: "timeout/failed", do: func() (any, any, error) {
			id = start(5*time.Second, 1, "a")
			got, err := s.ExpireDeadline(ctxb, retrystate.ExpireParams{RunID: id, Retention: time.Hour,
				Now: at(6 * time.Second)})
			return retrystate.ExpireResult{Outcome: retrystate.OutcomeRunFailed, Kind: "deadline",
				Task: tasks.ID(id, 0, 1, 0), StepStatus: retrystate.StepPending,
				RunFailure: retrystate.RunFailure{Code: retrystate.CodeRunTimeout,
					Reason: `run passed its deadline (run_timeout 5s) during step "a" (attempt 1)`}}, got, err
		}},
		{name: "timeout/noop", do: func() (any, any, error) {
			id = run("a")
			got, err := s.ExpireDeadline(ctxb, retrystate.ExpireParams{RunID: id, Retention: time.Hour,
				Now: at(6 * time.Second)})
			return retrystate.ExpireResult{Outcome: retrystate.OutcomeNoop, Reason: "no deadline"}, got, err
		}},

		// operate.lua
		{name: "operate/dispatch", do: func() (any, any, error) {
			id = failed()
			got, err := s.Operate(ctxb, retrystate.OperateParams{RunID: id, Action: retrystate.ActionRecover,
				Actor: "me", Retention: time.Hour, Now: at(time.Second)})
			return retrystate.OperateResult{Outcome: retrystate.OutcomeDispatch, Workflow: "wf",
				Dispatch: &retrystate.Dispatch{Index: 0, Name: "a", Attempt: 2, Timeout: minute}}, got, err
		}},
		{name: "operate/succeeded", do: func() (any, any, error) {
			id = run("a", "opt:b")
			begun(id, 0, "tok", t0)
			must(complete(id, 0, "tok", "1", t0))
			begun(id, 1, "tok", t0)
			must(s.Fail(ctxb, retrystate.FailParams{RunID: id, Index: 1, Token: "tok", Error: "boom",
				Class: retrystate.ClassPermanent, Now: t0}))
			got, err := s.Operate(ctxb, retrystate.OperateParams{RunID: id, Action: retrystate.ActionSkip, Step: "b",
				Actor: "me", Retention: time.Hour, Now: at(time.Second)})
			return retrystate.OperateResult{Outcome: retrystate.OutcomeRunSucceeded}, got, err
		}},
		{name: "operate/refused", drives: retrystate.OutcomeRefused, wantErr: &retrystate.RefusedError{
			Reason: "run is pending; only a failed run or one needing attention can be recovered"}, do: func() (any, any, error) {
			id = run("a")
			got, err := s.Operate(ctxb, retrystate.OperateParams{RunID: id, Action: retrystate.ActionRecover,
				Actor: "me", Retention: time.Hour, Now: t0})
			return retrystate.OperateResult{}, got, err
		}},
		{name: "operate/gone", wantErr: retrystate.ErrRunNotFound, do: func() (any, any, error) {
			got, err := s.Operate(ctxb, retrystate.OperateParams{RunID: newID(), Action: retrystate.ActionRecover,
				Actor: "me", Retention: time.Hour, Now: t0})
			return retrystate.OperateResult{}, got, err
		}},

		// restore.lua
		{name: "restore/dispatch", do: func() (any, any, error) {
			id = succeeded()
			got, err := s.Restore(ctxb, retrystate.RestoreParams{RunID: id, FromStep: "a", Actor: "me",
				Now: at(time.Second)})
			return retrystate.RestoreResult{Outcome: retrystate.OutcomeDispatch, Workflow: "wf",
				Dispatch: &retrystate.Dispatch{Index: 0, Name: "a", Attempt: 2, Timeout: minute}}, got, err
		}},
		{name: "restore/refused", drives: retrystate.OutcomeRefused, wantErr: &retrystate.RefusedError{
			Reason: "run is pending; only a finished run (succeeded, failed, cancelled or compensated) can be restored"},
			do: func() (any, any, error) {
				id = run("a")
				got, err := s.Restore(ctxb, retrystate.RestoreParams{RunID: id, FromStep: "a", Actor: "me", Now: t0})
				return retrystate.RestoreResult{}, got, err
			}},
		{name: "restore/gone", wantErr: retrystate.ErrRunNotFound, do: func() (any, any, error) {
			got, err := s.Restore(ctxb, retrystate.RestoreParams{RunID: newID(), FromStep: "a", Actor: "me", Now: t0})
			return retrystate.RestoreResult{}, got, err
		}},
	}
	// The cases run in order, on the test's goroutine: their helpers stop
	// the whole test when a step that prepares a state fails.
	seen := map[retrystate.Outcome]bool{}
	for _, c := range cases {
		want, got, err := c.do()
		switch {
		case c.wantErr != nil:
			if !errors.Is(err, c.wantErr) || !reflect.ValueOf(got).IsZero() {
				t.Errorf("%s: got %s, %v; want the error %v", c.name, show(got), err, c.wantErr)
			} else if c.drives != "" {
				seen[c.drives] = true
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !reflect.DeepEqual(got, want):
			t.Errorf("%s (run %s):\ngot  %s\nwant %s", c.name, id, show(got), show(want))
		default:
			seen[outcome(want)] = true
		}
	}
	for _, o := range allOutcomes {
		if !seen[o] {
			t.Errorf("no case drives a script into %q", o)
		}
	}
}

// TestPeekRoundTrip: peek.lua's reply decoded whole.
func TestPeekRoundTrip(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	id := runID(1)
	create(t, s, id, t0, "a", "b")
	begin(t, s, id, 0, tasks.ID(id, 0, 1, 0), "tok", t0)
	got, err := s.Peek(ctxb, id)
	want := retrystate.Current{Status: retrystate.StatusRunning, UpdatedAt: t0, StepStatus: retrystate.StepRunning,
		Task: tasks.ID(id, 0, 1, 0), FenceExpiresAt: t0.Add(10 * time.Second),
		Dispatch: retrystate.Dispatch{Index: 0, Name: "a", Attempt: 1, Timeout: time.Minute}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("peek: %+v, %v\nwant %+v", got, err, want)
	}
	if _, err := s.Peek(ctxb, runID(2)); !errors.Is(err, retrystate.ErrRunNotFound) {
		t.Errorf("peek of an unknown run: %v", err)
	}
}

// TestRenewRoundTrip: renew.lua's three replies.
func TestRenewRoundTrip(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	id := runID(1)
	create(t, s, id, t0, "a")
	begin(t, s, id, 0, tasks.ID(id, 0, 1, 0), "tok", t0)
	for _, c := range []struct {
		token string
		want  retrystate.Renewal
	}{{"tok", retrystate.Renewed}, {"other", retrystate.FenceLost}} {
		if got, err := s.Renew(ctxb, retrystate.RenewParams{RunID: id, Token: c.token, TTL: 10 * time.Second,
			Now: t0.Add(time.Second)}); err != nil || got != c.want {
			t.Errorf("renew with %s: %v, %v; want %v", c.token, got, err, c.want)
		}
	}
	if _, err := s.Cancel(ctxb, retrystate.CancelParams{RunID: id, Actor: "me", Retention: time.Hour, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Renew(ctxb, retrystate.RenewParams{RunID: id, Token: "tok", TTL: 10 * time.Second,
		Now: t0.Add(time.Second)}); err != nil || got != retrystate.RunStopped {
		t.Errorf("renew of a cancelled run: %v, %v; want %v", got, err, retrystate.RunStopped)
	}
}
