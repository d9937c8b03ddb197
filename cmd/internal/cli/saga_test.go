package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// Workflows of the saga tests.
const (
	// sagaWF compensates charge, then reserve, after ship fails
	// permanently; it ends compensated.
	sagaWF = "saga"
	// stuckWF's compensation of charge fails (two attempts) until
	// compensationFixed is set: the run fails with compensation_failed.
	stuckWF = "stuck"
	// holdWF's step "hold" runs until its context ends, after "charge"
	// (with a compensation) succeeded: a running run to cancel with
	// compensation.
	holdWF = "hold"
	// blockWF's first step runs until its context ends: a running run
	// with nothing to compensate.
	blockWF = "block"
	// stopWF fails (on_failure stop) after "charge", which has a
	// compensation, succeeded: a failed run to compensate.
	stopWF = "stopper"
	// promoWF's optional group "promo" is rolled back after its step
	// "gift" fails; the run goes on and succeeds.
	promoWF = "promo"
)

// sagaWorker is a worker of the saga tests' workflows.
type sagaWorker struct {
	// compensationFixed makes stuckWF's compensation of charge succeed.
	compensationFixed atomic.Bool
}

func done(name string) workflow.StepFunc {
	return func(context.Context, *workflow.StepContext) (any, error) { return map[string]string{"step": name}, nil }
}

func undo(name string) workflow.StepFunc {
	return func(context.Context, *workflow.StepContext) (any, error) {
		return map[string]string{"undone": name}, nil
	}
}

func refuse(name string) workflow.StepFunc {
	return func(context.Context, *workflow.StepContext) (any, error) {
		return nil, workflow.Permanent(errors.New(name + " refused"))
	}
}

// startSagaWorker runs a worker of the demo and the saga tests' workflows.
func (e *env) startSagaWorker() *sagaWorker {
	e.t.Helper()
	w := &sagaWorker{}
	hold := func(ctx context.Context, _ *workflow.StepContext) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	brokenUndo := func(ctx context.Context, sc *workflow.StepContext) (any, error) {
		if !w.compensationFixed.Load() {
			return nil, errors.New("refund service answered 503")
		}
		return undo("charge")(ctx, sc)
	}
	e.startWorker(fastPolicy(),
		workflow.Definition{Name: sagaWF, OnFailure: workflow.FailureCompensate, Steps: []workflow.Step{
			{Name: "reserve", Run: done("reserve"), Compensate: undo("reserve")},
			{Name: "charge", Run: done("charge"), Compensate: undo("charge")},
			{Name: "ship", Run: refuse("ship"), Compensate: undo("ship")},
		}},
		workflow.Definition{Name: stuckWF, OnFailure: workflow.FailureCompensate, Steps: []workflow.Step{
			{Name: "reserve", Run: done("reserve"), Compensate: undo("reserve")},
			{Name: "charge", Run: done("charge"), Compensate: brokenUndo,
				CompensatePolicy: workflow.Policy{MaxAttempts: 2}},
			{Name: "ship", Run: refuse("ship")},
		}},
		workflow.Definition{Name: holdWF, Steps: []workflow.Step{
			{Name: "charge", Run: done("charge"), Compensate: undo("charge")},
			{Name: "hold", Run: hold, Compensate: undo("hold")},
		}},
		workflow.Definition{Name: blockWF, Steps: []workflow.Step{
			{Name: "hold", Run: hold, Compensate: undo("hold")},
		}},
		workflow.Definition{Name: stopWF, Steps: []workflow.Step{
			{Name: "charge", Run: done("charge"), Compensate: undo("charge")},
			{Name: "ship", Run: refuse("ship")},
		}},
		workflow.Definition{Name: promoWF, OnFailure: workflow.FailureCompensate,
			Groups: map[string]workflow.Group{"promo": {Optional: true}},
			Steps: []workflow.Step{
				{Name: "order", Run: done("order"), Compensate: undo("order")},
				{Name: "coupon", Run: done("coupon"), Compensate: undo("coupon"), Group: "promo"},
				{Name: "gift", Run: refuse("gift"), Group: "promo"},
				{Name: "ship", Run: done("ship")},
			}},
	)
	return w
}

// compact returns raw without its white space.
func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("not JSON (%v): %s", err, raw)
	}
	return b.String()
}

// inOrder checks that s holds each of want, in that order.
func inOrder(t *testing.T, what, s string, want ...string) {
	t.Helper()
	rest := s
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Errorf("%s lacks %q (after the earlier ones):\n%s", what, w, s)
			return
		}
		rest = rest[i+len(w):]
	}
}

// TestStartWaitCompensated: start --wait of a saga that fails shows its
// compensations as they run and exits 1 with the failure that started
// them; status, status --json, events and list show the compensated run.
func TestStartWaitCompensated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startSagaWorker()

	r := e.run("start", sagaWF, "--wait")
	if r.code != 1 {
		t.Fatalf("start --wait of a compensated run: want exit 1, got %v", r)
	}
	id := strings.TrimSuffix(r.stdout, "\n")
	if !workflow.ValidRunID(id) {
		t.Fatalf("stdout is not the run ID: %v", r)
	}
	inOrder(t, "start --wait's progress", r.stderr,
		"ship: attempt 1 failed permanently: ship refused",
		`compensating after step ship: `,
		"charge: compensation started (attempt 1)",
		"compensate:charge: attempt 1 started",
		"charge: compensated in ",
		"reserve: compensation started (attempt 1)",
		"reserve: compensated in ",
		"enqueue: run "+id+" compensated (its succeeded steps were undone) after: ")
	last := lines(r.stderr, "enqueue: ")
	if len(last) != 1 || !strings.HasSuffix(last[0], "["+workflow.CodePermanentError+"]") ||
		!strings.HasSuffix(r.stderr, last[0]+"\n") {
		t.Errorf("the last line is not the one error line naming permanent_error:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "succeeded in") && strings.Contains(r.stderr, "run "+id+" succeeded") {
		t.Errorf("a compensated run is reported as succeeded:\n%s", r.stderr)
	}

	// status: the compensations that ran, under their steps.
	r = e.run("status", id)
	mustSucceed(t, r)
	for _, re := range []string{
		`(?m)^status:\s+compensated$`,
		`(?m)^on failure:\s+compensate$`,
		`(?m)^reason:\s+.*ship refused.*\[permanent_error\]$`,
		`(?m)^reserve\s+compensated\s+1\s`,
		`(?m)^  compensate:reserve\s+succeeded\s+1\s`,
		`(?m)^charge\s+compensated\s+1\s`,
		`(?m)^  compensate:charge\s+succeeded\s+1\s`,
		`(?m)^ship\s+failed\s+1\s`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("status lacks %s:\n%s", re, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "compensate:ship") || strings.Contains(r.stdout, "GROUP") ||
		strings.Contains(r.stdout, "compensations:") {
		t.Errorf("status shows ship's compensation (it never ran), a group column or a saga under way:\n%s", r.stdout)
	}

	// status --json: the statuses and each step's compensation.
	r = e.run("status", id, "--json")
	mustSucceed(t, r)
	var run workflow.Run
	decode(t, r.stdout, &run)
	if run.Status != workflow.StatusCompensated || run.FailureCode != workflow.CodePermanentError ||
		run.OnFailure != workflow.FailureCompensate || run.Compensating != nil || run.NeedsAttention {
		t.Errorf("status --json: %s", r.stdout)
	}
	for _, name := range []string{"reserve", "charge"} {
		st := run.Step(name)
		if st.Status != workflow.StepCompensated || st.Compensation == nil ||
			st.Compensation.Name != workflow.CompensationPrefix+name || st.Compensation.Status != workflow.StepSucceeded ||
			st.Compensation.Attempts != 1 || compact(t, st.Compensation.Output) != `{"undone":"`+name+`"}` {
			t.Errorf("step %s in status --json: %+v (compensation %+v)", name, st, st.Compensation)
		}
	}
	if c := run.Step("ship").Compensation; c == nil || c.Status != workflow.StepPending || c.Attempts != 0 {
		t.Errorf("ship's compensation: %+v, want pending, never run", c)
	}
	var raw map[string]any
	decode(t, r.stdout, &raw)
	if raw["status"] != "compensated" || raw["on_failure"] != "compensate" {
		t.Errorf("status --json spells status %v, on_failure %v", raw["status"], raw["on_failure"])
	}

	// events: the saga's entries, with their details.
	r = e.run("events", id)
	mustSucceed(t, r)
	inOrder(t, "events", r.stdout,
		"run_compensating", "ship", "code=permanent_error reason=",
		"compensation_started", "charge", "1",
		"attempt_succeeded", "compensate:charge",
		"compensation_succeeded", "charge",
		"compensation_started", "reserve",
		"compensation_succeeded", "reserve",
		"run_compensated", "code=permanent_error reason=")

	// list --status compensated.
	r = e.run("list", "--status", "compensated")
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "compensated") {
		t.Errorf("list --status compensated lacks the run:\n%s", r.stdout)
	}
	r = e.run("list", "--status", "compensating")
	mustSucceed(t, r)
	if strings.Contains(r.stdout, id) {
		t.Errorf("list --status compensating shows the compensated run:\n%s", r.stdout)
	}
}

// TestCompensationFailedThenRetryStep: a compensation that fails for good
// fails the run (compensation_failed); status shows where the saga stopped
// and how to resume it; skip of the compensation, retry of the step and
// cancel --compensate are refused, changing nothing; retry --step
// compensate:charge runs it again, and the saga ends compensated.
func TestCompensationFailedThenRetryStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.startSagaWorker()

	r := e.run("start", stuckWF, "--wait")
	if r.code != 1 {
		t.Fatalf("want exit 1, got %v", r)
	}
	id := strings.TrimSuffix(r.stdout, "\n")
	inOrder(t, "start --wait's progress", r.stderr,
		"compensating after step ship: ",
		"charge: compensation started (attempt 1)",
		"compensate:charge: attempt 1 failed: refund service answered 503",
		"compensate:charge: retry scheduled: next attempt 2",
		"compensate:charge: attempt 2 failed: refund service answered 503",
		"charge: compensation failed for good: ",
		"enqueue: run "+id+" failed: ", "[compensation_failed]")
	if strings.Contains(r.stderr, "reserve: compensation started") {
		t.Errorf("reserve's compensation started before charge's succeeded:\n%s", r.stderr)
	}

	r = e.run("status", id)
	mustSucceed(t, r)
	for _, re := range []string{
		`(?m)^status:\s+failed$`,
		`(?m)^needs attention:\s+yes$`,
		`(?m)^reason:\s+.*\[compensation_failed\]$`,
		`(?m)^compensations:\s+undo the succeeded steps from reserve to ship, last first; then the run ends compensated$`,
		`(?m)^started by:\s+.*ship refused.*\[permanent_error\] at step ship$`,
		`(?m)^resume with:\s+enqueue retry ` + id + ` --step compensate:charge `,
		`(?m)^charge\s+succeeded\s+1\s`,
		`(?m)^  compensate:charge\s+failed\s+2\s+exhausted\s+-\s+refund service answered 503$`,
		`(?m)^  compensate:reserve\s+pending\s+0\s`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("status lacks %s:\n%s", re, r.stdout)
		}
	}
	r = e.run("status", "--json", id)
	mustSucceed(t, r)
	var run workflow.Run
	decode(t, r.stdout, &run)
	if c := run.Compensating; c == nil || c.Then != "compensated" || c.FailedStep != "ship" || c.FromStep != "reserve" ||
		c.ToStep != "ship" || c.Code != workflow.CodePermanentError || !strings.Contains(c.Reason, "ship refused") {
		t.Errorf("compensating in status --json: %+v", run.Compensating)
	}
	if run.CurrentStep != workflow.CompensationPrefix+"charge" || run.FailureCode != workflow.CodeCompensationFailed {
		t.Errorf("current step %q, code %q", run.CurrentStep, run.FailureCode)
	}
	if c := run.Step("charge").Compensation; c == nil || c.Status != workflow.StepFailed || c.Attempts != 2 ||
		c.RetryState != workflow.RetryExhausted || c.LastError != "refund service answered 503" {
		t.Errorf("charge's compensation in status --json: %+v", c)
	}

	before := e.get(id)
	checkOneErrorLine(t, e.run("skip", id, "--step", "compensate:charge"), 1, "skip refused: ")
	checkOneErrorLine(t, e.run("retry", id, "--step", "charge"), 1, "retry refused: ")
	checkOneErrorLine(t, e.run("cancel", id, "--compensate"), 1,
		"cancel refused: the run stopped at a compensation that failed")
	if after := e.get(id); !after.UpdatedAt.Equal(before.UpdatedAt) || after.Status != workflow.StatusFailed {
		t.Fatalf("a refused action changed the run: updated %v, then %v (%s)", before.UpdatedAt, after.UpdatedAt, after.Status)
	}

	w.compensationFixed.Store(true)
	r = e.run("retry", id, "--step", "compensate:charge")
	mustSucceed(t, r)
	if r.stdout != "retrying "+id+": compensating, at step compensate:charge\n" {
		t.Errorf("retry printed %q", r.stdout)
	}
	run = *e.waitStatus(id, workflow.StatusCompensated)
	if run.FailureCode != workflow.CodePermanentError || run.NeedsAttention {
		t.Errorf("after the retry: code %q, needs attention %v; want the original failure, no attention", run.FailureCode,
			run.NeedsAttention)
	}
	if c := run.Step("charge").Compensation; c.Attempts != 3 || c.Status != workflow.StepSucceeded {
		t.Errorf("charge's compensation after the retry: %+v", c)
	}
	if run.Step("reserve").Status != workflow.StepCompensated {
		t.Errorf("reserve is %s, want compensated", run.Step("reserve").Status)
	}
}

// TestCancelCompensate: cancel --compensate of a running run compensates
// its succeeded steps and ends compensated with code cancelled; a repeat is
// refused once it ended; a run with nothing to compensate is just
// cancelled; a failed run with compensations is compensated, keeping its
// failure code.
func TestCancelCompensate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startSagaWorker()

	id := runID(t, e.run("start", holdWF))
	testkit.Eventually(t, 20*time.Second, "step hold to run", func() bool {
		return e.get(id).Step("hold").Status == workflow.StepRunning
	})
	r := e.run("cancel", id, "--compensate")
	mustSucceed(t, r)
	if r.stdout != "cancelled "+id+": compensated\n" &&
		!strings.HasPrefix(r.stdout, "cancelled "+id+": compensating (its succeeded steps are undone, last first; see: enqueue status "+id+")") {
		t.Errorf("cancel --compensate printed %v", r)
	}
	run := e.waitStatus(id, workflow.StatusCompensated)
	if run.FailureCode != workflow.CodeCancelled || run.FailureReason != "cancelled by cli" {
		t.Errorf("code %q reason %q; want cancelled by cli", run.FailureCode, run.FailureReason)
	}
	if run.Step("charge").Status != workflow.StepCompensated || run.Step("hold").Status != workflow.StepCancelled {
		t.Errorf("charge %s, hold %s; want compensated and cancelled", run.Step("charge").Status, run.Step("hold").Status)
	}
	evs, err := e.client.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	cancelled := 0
	for _, ev := range evs {
		if ev.Type == workflow.EventRunCancelled && ev.Details["actor"] == "cli" && ev.Details["compensate"] == "1" {
			cancelled++
		}
	}
	if cancelled != 1 {
		t.Errorf("%d run_cancelled events with compensate=1 by cli, want 1", cancelled)
	}
	r = e.run("status", id)
	if !regexp.MustCompile(`(?m)^reason:\s+cancelled by cli \[cancelled\]$`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m)^  compensate:charge\s+succeeded\s+1\s`).MatchString(r.stdout) {
		t.Errorf("status of the compensated run:\n%s", r.stdout)
	}
	checkOneErrorLine(t, e.run("cancel", id, "--compensate"), 1, "run "+id+" already finished (compensated)")

	// Nothing to compensate: cancelled, as without --compensate (--json).
	blocked := runID(t, e.run("start", blockWF))
	testkit.Eventually(t, 20*time.Second, "the blocking step to run", func() bool {
		return e.get(blocked).Step("hold").Status == workflow.StepRunning
	})
	r = e.run("cancel", "--json", blocked, "--compensate")
	mustSucceed(t, r)
	var got workflow.Run
	decode(t, r.stdout, &got)
	if got.ID != blocked || got.Status != workflow.StatusCancelled || got.Compensating != nil {
		t.Errorf("cancel --compensate --json of a run with nothing to compensate: %s", r.stdout)
	}
	r = e.run("cancel", blocked, "--compensate")
	mustSucceed(t, r)
	if r.stdout != "cancelled "+blocked+" (nothing to compensate)\n" {
		t.Errorf("repeated cancel --compensate printed %q", r.stdout)
	}

	// A failed run: compensated, keeping its failure code.
	failed := runID(t, e.run("start", stopWF))
	e.waitStatus(failed, workflow.StatusFailed)
	mustSucceed(t, e.run("cancel", failed, "--compensate"))
	run = e.waitStatus(failed, workflow.StatusCompensated)
	if run.FailureCode != workflow.CodePermanentError || run.NeedsAttention || run.Step("charge").Status != workflow.StepCompensated {
		t.Errorf("compensated failed run: code %q, attention %v, charge %s", run.FailureCode, run.NeedsAttention,
			run.Step("charge").Status)
	}
}

// TestOptionalGroupRolledBackShown: start --wait of a run whose optional
// group is rolled back shows it and succeeds; status shows each step's group.
func TestOptionalGroupRolledBackShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startSagaWorker()
	r := e.run("start", promoWF, "--wait")
	mustSucceed(t, r)
	id, _, _ := strings.Cut(r.stdout, "\n")
	inOrder(t, "start --wait's progress", r.stderr,
		`compensating after step gift (group "promo"): `,
		"coupon: compensated",
		`group "promo" rolled back after step gift failed: `, "[permanent_error]; the run goes on after the group",
		"ship: attempt 1 succeeded",
		"run "+id+" succeeded")
	r = e.run("status", id)
	mustSucceed(t, r)
	for _, re := range []string{
		`(?m)^STEP\s+GROUP\s+STATUS\s+ATTEMPTS`,
		`(?m)^order\s+-\s+succeeded\s+1\s`,
		`(?m)^coupon\s+promo \(optional\)\s+rolled_back\s+1\s`,
		`(?m)^  compensate:coupon\s+succeeded\s+1\s`,
		`(?m)^gift\s+promo \(optional\)\s+rolled_back\s+1\s`,
		`(?m)^ship\s+-\s+succeeded\s+1\s`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("status lacks %s:\n%s", re, r.stdout)
		}
	}
	var run workflow.Run
	r = e.run("status", id, "--json")
	decode(t, r.stdout, &run)
	if st := run.Step("coupon"); st.Group != "promo" || !st.GroupOptional || st.Status != workflow.StepRolledBack {
		t.Errorf("coupon in status --json: group %q optional %v status %s", st.Group, st.GroupOptional, st.Status)
	}
	if st := run.Step("order"); st.Group != "" || st.Compensation == nil || st.Compensation.Status != workflow.StepPending {
		t.Errorf("order in status --json: %+v", st)
	}
}
