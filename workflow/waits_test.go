package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// approval is a -> approval (await "approved", 1h) -> c; c records what it
// read of the approval.
func approval(got *json.RawMessage) workflow.Definition {
	return workflow.Definition{Name: "approval", Steps: []workflow.Step{
		{Name: "a", Run: noop},
		{Name: "approval", Await: &workflow.Await{Signal: "approved", Timeout: time.Hour}},
		{Name: "c", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
			o, _ := sc.Output("approval")
			*got = o
			return "done", nil
		}},
	}}
}

// napping is a -> nap (sleep 10m) -> c.
func napping() workflow.Definition {
	return workflow.Definition{Name: "nap", Steps: []workflow.Step{
		{Name: "a", Run: noop},
		{Name: "nap", Sleep: &workflow.Sleep{For: 10 * time.Minute}},
		{Name: "c", Run: noop},
	}}
}

// mustWait delivers the task of step idx (attempt 1, gen 0) and checks the
// step now waits.
func (r *rig) mustWait(id, wf string, idx int, name string) *workflow.StepState {
	r.t.Helper()
	if err := r.deliver(id, wf, idx, name, 1, 0); err != nil {
		r.t.Fatalf("deliver %s: %v", name, err)
	}
	st := r.get(id).Step(name)
	if st.Status != workflow.StepWaiting || st.WaitingFor == nil || st.WaitingFor.Until == nil {
		r.t.Fatalf("step %s: %+v, waiting for %+v", name, st.Status, st.WaitingFor)
	}
	return st
}

func (r *rig) waitingCount(reason workflow.WaitReason) int64 {
	return r.rdb.ZCard(ctxb, "cairn:{"+r.queue+"}:idx:waiting:"+string(reason)).Val()
}

func eventTypes(evs []workflow.Event) string {
	var b []string
	for _, e := range evs {
		b = append(b, e.Type)
	}
	return strings.Join(b, " ")
}

// A signal that arrives while the await waits completes it with its
// payload, and the run goes on.
func TestSignalAfterTheAwaitBegan(t *testing.T) {
	t.Parallel()
	var got json.RawMessage
	r := newRig(t, approval(&got))
	run := mustStart(t, r.client, "approval", nil)
	if err := r.deliver(run.ID, "approval", 0, "a", 1, 0); err != nil {
		t.Fatal(err)
	}
	start := r.clock.Now()
	st := r.mustWait(run.ID, "approval", 1, "approval")
	if st.WaitingFor.Signal != "approved" || !st.WaitingFor.Until.Equal(start.Add(time.Hour).Truncate(time.Millisecond)) {
		t.Errorf("waiting for %+v, want signal approved until %s", st.WaitingFor, start.Add(time.Hour))
	}
	cur := r.get(run.ID)
	if cur.Status != workflow.StatusRunning || cur.WaitingFor == nil || cur.WaitingFor.Reason() != workflow.WaitSignal {
		t.Errorf("run %s waiting for %+v", cur.Status, cur.WaitingFor)
	}
	wake := tasks.ID(run.ID, 1, 1, 1)
	if info, ok := r.taskExists(wake); !ok || info.State != asynq.TaskStateScheduled ||
		!info.NextProcessAt.Equal(tasks.CeilSecond(*st.WaitingFor.Until)) {
		t.Fatalf("wake-up task %s: %+v", wake, info)
	}
	if n := r.waitingCount(workflow.WaitSignal); n != 1 {
		t.Errorf("%d runs in the signal index", n)
	}

	res, err := r.client.Signal(ctxb, run.ID, "approved", map[string]any{"by": "ann"}, &workflow.SignalOptions{ID: "s1"})
	if err != nil || res.Outcome != workflow.SignalDelivered || res.Step != "approval" {
		t.Fatalf("signal: %+v %v", res, err)
	}
	cur = r.get(run.ID)
	if st := cur.Step("approval"); st.Status != workflow.StepSucceeded || string(st.Output) != `{"by":"ann"}` || st.WaitingFor != nil {
		t.Fatalf("step after the signal: %+v", st)
	}
	if cur.WaitingFor != nil || cur.CurrentStep != "c" {
		t.Errorf("run after the signal: current %s, waiting for %+v", cur.CurrentStep, cur.WaitingFor)
	}
	if _, ok := r.taskExists(wake); ok {
		t.Errorf("the wake-up task is still there")
	}
	if info, ok := r.taskExists(tasks.ID(run.ID, 2, 1, 0)); !ok || info.State != asynq.TaskStatePending {
		t.Fatalf("next step's task: %+v", info)
	}
	if n := r.waitingCount(workflow.WaitSignal); n != 0 {
		t.Errorf("%d runs still in the signal index", n)
	}
	// A late delivery of the wake-up is stale.
	if err := r.deliver(run.ID, "approval", 1, "approval", 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := r.deliver(run.ID, "approval", 2, "c", 1, 0); err != nil {
		t.Fatal(err)
	}
	if cur := r.get(run.ID); cur.Status != workflow.StatusSucceeded || string(got) != `{"by":"ann"}` {
		t.Fatalf("run %s; c read %s", cur.Status, got)
	}
	evs := r.events(run.ID)
	if ev := lastEvent(evs, workflow.EventAwaitStarted); ev == nil || ev.Details["signal"] != "approved" || ev.Details["until"] == "" {
		t.Errorf("await_started: %+v", ev)
	}
	if ev := lastEvent(evs, workflow.EventSignalReceived); ev == nil || ev.Step != "approval" || ev.Details["id"] != "s1" {
		t.Errorf("signal_received: %+v (%s)", ev, eventTypes(evs))
	}
	// The same ID again, after it was consumed: a no-op.
	if _, err := r.client.Signal(ctxb, run.ID, "approved", nil, &workflow.SignalOptions{ID: "s1"}); !errors.Is(err, workflow.ErrRunFinished) {
		t.Errorf("signal to the finished run: %v", err)
	}
}

// A signal that arrives before the run reaches its await is kept and
// consumed when it does: the await never waits.
func TestSignalBeforeTheAwait(t *testing.T) {
	t.Parallel()
	var got json.RawMessage
	r := newRig(t, approval(&got))
	run := mustStart(t, r.client, "approval", nil)
	res, err := r.client.Signal(ctxb, run.ID, "approved", json.RawMessage(` {"ok": true} `), &workflow.SignalOptions{ID: "x"})
	if err != nil || res.Outcome != workflow.SignalQueued || res.Pending != 1 {
		t.Fatalf("signal: %+v %v", res, err)
	}
	again, err := r.client.Signal(ctxb, run.ID, "approved", `{"ok":false}`, &workflow.SignalOptions{ID: "x"})
	if err != nil || again.Outcome != workflow.SignalDuplicate {
		t.Fatalf("duplicate: %+v %v", again, err)
	}
	if n, err := r.store.PendingSignals(ctxb, run.ID); err != nil || n != 1 {
		t.Fatalf("mailbox holds %d (%v)", n, err)
	}
	for _, s := range []string{"a", "approval"} {
		idx := map[string]int{"a": 0, "approval": 1}[s]
		if err := r.deliver(run.ID, "approval", idx, s, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	cur := r.get(run.ID)
	if st := cur.Step("approval"); st.Status != workflow.StepSucceeded || string(st.Output) != `{"ok":true}` {
		t.Fatalf("approval: %+v", st)
	}
	if n, _ := r.store.PendingSignals(ctxb, run.ID); n != 0 {
		t.Errorf("mailbox still holds %d", n)
	}
	if err := r.deliver(run.ID, "approval", 2, "c", 1, 0); err != nil {
		t.Fatal(err)
	}
	if cur := r.get(run.ID); cur.Status != workflow.StatusSucceeded || string(got) != `{"ok":true}` {
		t.Fatalf("run %s, c read %s", cur.Status, got)
	}
	evs := r.events(run.ID)
	if countEvents(evs, workflow.EventAwaitStarted, "approval") != 0 || countEvents(evs, workflow.EventSignalConsumed, "approval") != 1 {
		t.Errorf("journal: %s", eventTypes(evs))
	}
}

// An await whose timeout passes fails the run with signal_timeout, never
// before its time; an operator's retry waits again.
func TestAwaitTimesOut(t *testing.T) {
	t.Parallel()
	var got json.RawMessage
	r := newRig(t, approval(&got))
	run := mustStart(t, r.client, "approval", nil)
	if err := r.deliver(run.ID, "approval", 0, "a", 1, 0); err != nil {
		t.Fatal(err)
	}
	r.mustWait(run.ID, "approval", 1, "approval")
	// (A wake-up up to EngineConfig.MaxEarlyWait early waits in the
	// handler, on the real clock: this one is handed back. The script
	// tables check the last millisecond.)
	r.clock.Advance(time.Hour - 3*time.Second)
	if err := r.deliver(run.ID, "approval", 1, "approval", 1, 1); err == nil {
		t.Fatal("a wake-up 3s early was acknowledged")
	}
	if st := r.get(run.ID).Step("approval"); st.Status != workflow.StepWaiting {
		t.Fatalf("early wake-up changed the step: %s", st.Status)
	}
	r.clock.Advance(3 * time.Second)
	if err := r.deliver(run.ID, "approval", 1, "approval", 1, 1); err != nil {
		t.Fatal(err)
	}
	cur := r.get(run.ID)
	st := cur.Step("approval")
	if cur.Status != workflow.StatusFailed || cur.FailureCode != workflow.CodeSignalTimeout || !cur.NeedsAttention ||
		st.Status != workflow.StepFailed || st.LastErrorCode != workflow.CodeSignalTimeout {
		t.Fatalf("after the timeout: run %s %s attention %v; step %s %s", cur.Status, cur.FailureCode, cur.NeedsAttention,
			st.Status, st.LastErrorCode)
	}
	if ev := lastEvent(r.events(run.ID), workflow.EventAwaitTimedOut); ev == nil || ev.Step != "approval" {
		t.Errorf("await_timed_out: %+v", ev)
	}
	if n := r.waitingCount(workflow.WaitSignal); n != 0 {
		t.Errorf("%d runs still in the signal index", n)
	}
	if _, err := r.client.Signal(ctxb, run.ID, "approved", nil, nil); !errors.Is(err, workflow.ErrRunFinished) {
		t.Errorf("signal to the failed run: %v", err)
	}
	// The operator retries the step: it waits again, for a new timeout.
	if _, err := r.client.RetryStep(ctxb, run.ID, "approval", nil); err != nil {
		t.Fatal(err)
	}
	if err := r.deliver(run.ID, "approval", 1, "approval", 2, 0); err != nil {
		t.Fatal(err)
	}
	st = r.get(run.ID).Step("approval")
	if st.Status != workflow.StepWaiting || !st.WaitingFor.Until.After(r.clock.Now().Add(59*time.Minute)) {
		t.Fatalf("retried await: %s until %v", st.Status, st.WaitingFor)
	}
	if res, err := r.client.Signal(ctxb, run.ID, "approved", 1, nil); err != nil || res.Outcome != workflow.SignalDelivered {
		t.Fatalf("signal to the retried await: %+v %v", res, err)
	}
}

// Refused signals write nothing.
func TestSignalRefused(t *testing.T) {
	t.Parallel()
	var got json.RawMessage
	r := newRig(t, approval(&got))
	run := mustStart(t, r.client, "approval", nil)
	journal := len(r.events(run.ID))
	for _, c := range []struct {
		name, run, signal string
		payload           any
		opts              *workflow.SignalOptions
		want              error
	}{
		{"unknown run", workflow.NewRunID(time.Now()), "approved", nil, nil, workflow.ErrRunNotFound},
		{"bad run ID", "nope", "approved", nil, nil, workflow.ErrInvalidRunID},
		{"bad name", run.ID, "app-roved", nil, nil, workflow.ErrInvalidInput},
		{"bad JSON", run.ID, "approved", json.RawMessage(`{"a":`), nil, workflow.ErrInvalidInput},
		{"duplicate key", run.ID, "approved", json.RawMessage(`{"a": 1, "a": 2}`), nil, workflow.ErrInvalidInput},
		{"invalid UTF-8", run.ID, "approved", []byte("\"\xff\""), nil, workflow.ErrInvalidInput},
		{"lone surrogate", run.ID, "approved", json.RawMessage(`"\ud800"`), nil, workflow.ErrInvalidInput},
		{"payload too large", run.ID, "approved", json.RawMessage(`"` + strings.Repeat("x", workflow.MaxSignalPayload) + `"`), nil,
			workflow.ErrInvalidInput},
		{"ID too long", run.ID, "approved", nil, &workflow.SignalOptions{ID: strings.Repeat("i", 257)}, workflow.ErrInvalidInput},
		{"no step awaits it", run.ID, "rejected", nil, nil, workflow.ErrActionRefused},
	} {
		if _, err := r.client.Signal(ctxb, c.run, c.signal, c.payload, c.opts); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if n := len(r.events(run.ID)); n != journal {
		t.Errorf("refused signals were journaled: %d entries, want %d", n, journal)
	}
	if n, _ := r.store.PendingSignals(ctxb, run.ID); n != 0 {
		t.Errorf("mailbox holds %d", n)
	}
	if _, err := r.client.Cancel(ctxb, run.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Signal(ctxb, run.ID, "approved", nil, nil); !errors.Is(err, workflow.ErrRunFinished) {
		t.Errorf("cancelled run: %v", err)
	}
}

// The mailbox keeps MaxPendingSignals signals; the next is refused.
func TestMailboxLimit(t *testing.T) {
	t.Parallel()
	var got json.RawMessage
	r := newRig(t, approval(&got))
	run := mustStart(t, r.client, "approval", nil)
	for i := range workflow.MaxPendingSignals {
		if _, err := r.client.Signal(ctxb, run.ID, "approved", i, &workflow.SignalOptions{ID: fmt.Sprint(i)}); err != nil {
			t.Fatalf("signal %d: %v", i, err)
		}
	}
	if _, err := r.client.Signal(ctxb, run.ID, "approved", "one more", nil); !errors.Is(err, workflow.ErrMailboxFull) {
		t.Fatalf("signal past the limit: %v", err)
	}
	// A duplicate is still recognised (and no more than a no-op).
	if res, err := r.client.Signal(ctxb, run.ID, "approved", 0, &workflow.SignalOptions{ID: "0"}); err != nil ||
		res.Outcome != workflow.SignalDuplicate {
		t.Fatalf("duplicate on a full mailbox: %+v %v", res, err)
	}
	// The await takes the oldest.
	for i, s := range []string{"a", "approval"} {
		if err := r.deliver(run.ID, "approval", i, s, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	if st := r.get(run.ID).Step("approval"); string(st.Output) != "0" {
		t.Errorf("the await took %s, want the oldest signal, 0", st.Output)
	}
}

// A sleep holds no slot, fires at its time and never before, and the run
// goes on.
func TestSleepFiresAtItsTime(t *testing.T) {
	t.Parallel()
	r := newRig(t, napping())
	run := mustStart(t, r.client, "nap", nil)
	if err := r.deliver(run.ID, "nap", 0, "a", 1, 0); err != nil {
		t.Fatal(err)
	}
	start := r.clock.Now()
	st := r.mustWait(run.ID, "nap", 1, "nap")
	until := start.Add(10 * time.Minute).Truncate(time.Millisecond)
	if !st.WaitingFor.Timer || !st.WaitingFor.Until.Equal(until) {
		t.Fatalf("waiting for %+v, want a timer until %s", st.WaitingFor, until)
	}
	if n := r.waitingCount(workflow.WaitTimer); n != 1 {
		t.Errorf("%d runs in the timer index", n)
	}
	for _, early := range []time.Duration{time.Minute, 9 * time.Minute, 10*time.Minute - 3*time.Second} {
		r.clock.Advance(early)
		if err := r.deliver(run.ID, "nap", 1, "nap", 1, 1); err == nil {
			t.Fatalf("the wake-up was acknowledged %s before its time", until.Sub(r.clock.Now()))
		}
		if st := r.get(run.ID).Step("nap"); st.Status != workflow.StepWaiting {
			t.Fatalf("fired early: %s", st.Status)
		}
		r.clock.Advance(-early)
	}
	r.clock.Advance(10 * time.Minute)
	if err := r.deliver(run.ID, "nap", 1, "nap", 1, 1); err != nil {
		t.Fatal(err)
	}
	cur := r.get(run.ID)
	if st := cur.Step("nap"); st.Status != workflow.StepSucceeded || cur.CurrentStep != "c" {
		t.Fatalf("after its time: step %s, current %s", st.Status, cur.CurrentStep)
	}
	evs := r.events(run.ID)
	if countEvents(evs, workflow.EventTimerSet, "nap") != 1 || countEvents(evs, workflow.EventTimerFired, "nap") != 1 {
		t.Errorf("journal: %s", eventTypes(evs))
	}
	if n := r.waitingCount(workflow.WaitTimer); n != 0 {
		t.Errorf("%d runs still in the timer index", n)
	}
}

// A sleep until a time from the run's input; a time it cannot compute fails
// the run with a permanent error.
func TestSleepUntilFromTheInput(t *testing.T) {
	t.Parallel()
	def := workflow.Definition{Name: "later", Steps: []workflow.Step{
		{Name: "wait", Sleep: &workflow.Sleep{Until: func(sc *workflow.StepContext) (time.Time, error) {
			var in struct {
				SendAt time.Time `json:"send_at"`
			}
			if err := sc.DecodeInput(&in); err != nil || in.SendAt.IsZero() {
				return time.Time{}, errors.New("input has no send_at")
			}
			return in.SendAt, nil
		}}},
		{Name: "send", Run: noop},
	}}
	r := newRig(t, def)
	at := r.clock.Now().Add(3 * time.Hour).Truncate(time.Millisecond)
	run := mustStart(t, r.client, "later", map[string]any{"send_at": at})
	st := r.mustWait(run.ID, "later", 0, "wait")
	if !st.WaitingFor.Until.Equal(at) {
		t.Fatalf("sleeps until %s, want %s", st.WaitingFor.Until, at)
	}
	if cur := r.get(run.ID); cur.Status != workflow.StatusRunning {
		t.Errorf("run %s while its first step sleeps", cur.Status)
	}

	bad := mustStart(t, r.client, "later", map[string]any{})
	if err := r.deliver(bad.ID, "later", 0, "wait", 1, 0); err != nil {
		t.Fatal(err)
	}
	if cur := r.get(bad.ID); cur.Status != workflow.StatusFailed || cur.FailureCode != workflow.CodePermanentError ||
		!strings.Contains(cur.FailureReason, "input has no send_at") {
		t.Fatalf("run without send_at: %s %s %q", cur.Status, cur.FailureCode, cur.FailureReason)
	}
}

// The reconciler leaves a waiting step alone while its wake-up exists, and
// re-creates a lost wake-up for its time.
func TestReconcilerAndWaitingSteps(t *testing.T) {
	t.Parallel()
	r := newRig(t, napping())
	run := mustStart(t, r.client, "nap", nil)
	if err := r.deliver(run.ID, "nap", 0, "a", 1, 0); err != nil {
		t.Fatal(err)
	}
	st := r.mustWait(run.ID, "nap", 1, "nap")
	r.clock.Advance(time.Minute)
	if rep := r.pass(); rep.Total() != 0 || rep.Failed != 0 {
		t.Fatalf("a pass repaired a waiting step whose wake-up exists: %v", rep)
	}
	wake := tasks.ID(run.ID, 1, 1, 1)
	r.deleteTask(wake)
	rep := r.pass()
	if rep.Repairs["wake_task_missing"] != 1 {
		t.Fatalf("pass: %v", rep)
	}
	info, ok := r.taskExists(wake)
	if !ok || info.State != asynq.TaskStateScheduled || !info.NextProcessAt.Equal(tasks.CeilSecond(*st.WaitingFor.Until)) {
		t.Fatalf("re-created wake-up: %+v", info)
	}
	if got := r.get(run.ID).Step("nap"); got.Status != workflow.StepWaiting {
		t.Errorf("the repair changed the step: %s", got.Status)
	}

	// A cancel while it waits deletes the wake-up and leaves the indexes.
	if _, err := r.client.Cancel(ctxb, run.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.taskExists(wake); ok {
		t.Errorf("the wake-up of a cancelled run is still there")
	}
	if n := r.waitingCount(workflow.WaitTimer); n != 0 {
		t.Errorf("%d runs still in the timer index", n)
	}
}

func TestDefinitionsOfWaits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		step workflow.Step
		ok   bool
	}{
		{"await", workflow.Step{Name: "s", Await: &workflow.Await{Signal: "go.now", Timeout: time.Hour}}, true},
		{"sleep", workflow.Step{Name: "s", Sleep: &workflow.Sleep{For: time.Second}}, true},
		{"sleep until", workflow.Step{Name: "s", Sleep: &workflow.Sleep{
			Until: func(*workflow.StepContext) (time.Time, error) { return time.Time{}, nil }}}, true},
		{"run and await", workflow.Step{Name: "s", Run: noop, Await: &workflow.Await{Signal: "go", Timeout: time.Hour}}, false},
		{"nothing", workflow.Step{Name: "s"}, false},
		{"await without timeout", workflow.Step{Name: "s", Await: &workflow.Await{Signal: "go"}}, false},
		{"await of a bad name", workflow.Step{Name: "s", Await: &workflow.Await{Signal: "go-on", Timeout: time.Hour}}, false},
		{"await too long", workflow.Step{Name: "s", Await: &workflow.Await{Signal: "go", Timeout: workflow.MaxWait + 1}}, false},
		{"sleep of both", workflow.Step{Name: "s", Sleep: &workflow.Sleep{For: time.Second,
			Until: func(*workflow.StepContext) (time.Time, error) { return time.Time{}, nil }}}, false},
		{"sleep of neither", workflow.Step{Name: "s", Sleep: &workflow.Sleep{}}, false},
		{"negative sleep", workflow.Step{Name: "s", Sleep: &workflow.Sleep{For: -time.Second}}, false},
	} {
		d := workflow.Definition{Name: "w", Steps: []workflow.Step{c.step}}
		err := d.Validate()
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
		if err != nil && !errors.Is(err, workflow.ErrInvalidDefinition) {
			t.Errorf("%s: %v is not ErrInvalidDefinition", c.name, err)
		}
	}
}
