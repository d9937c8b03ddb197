package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// sagaLog records what the steps and compensations of a saga test did, in
// order.
type sagaLog struct {
	mu    sync.Mutex
	calls []string
	comps map[string]*workflow.StepContext
	keys  map[string]bool
}

func newSagaLog() *sagaLog {
	return &sagaLog{comps: map[string]*workflow.StepContext{}, keys: map[string]bool{}}
}

func (l *sagaLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
}

func (l *sagaLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// step returns a body that records its call and outputs {"step": name}.
func (l *sagaLog) step(name string) workflow.StepFunc {
	return func(context.Context, *workflow.StepContext) (any, error) {
		l.add(name)
		return map[string]string{"step": name}, nil
	}
}

// comp returns a compensation that records its call and its context.
func (l *sagaLog) comp(name string) workflow.StepFunc {
	return func(_ context.Context, sc *workflow.StepContext) (any, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.calls = append(l.calls, "undo "+name)
		l.comps[name] = sc
		l.keys[sc.IdempotencyKey] = true
		return map[string]string{"undone": name}, nil
	}
}

func failPermanently(name string, l *sagaLog) workflow.StepFunc {
	return func(context.Context, *workflow.StepContext) (any, error) {
		l.add(name)
		return nil, workflow.Permanent(errors.New(name + " refused"))
	}
}

func sagaJournal(evs []workflow.Event) []string {
	var out []string
	for _, ev := range evs {
		if slices.Contains(sagaEvents, ev.Type) {
			out = append(out, ev.Type+" "+ev.Step)
		}
	}
	return out
}

var sagaEvents = []string{workflow.EventRunCompensating, workflow.EventCompensationStarted,
	workflow.EventCompensationSucceeded, workflow.EventCompensationFailed, workflow.EventRunCompensated,
	workflow.EventGroupRolledBack, workflow.EventRunFailed, workflow.EventRunSucceeded}

// TestSagaCompensatesInReverse: a 4-step run that fails permanently at its
// third step runs the compensations of the second, then the first step, each
// with the step's output and the run's failure, and ends compensated,
// keeping its failure code and reason; the fourth step never runs.
func TestSagaCompensatesInReverse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newSagaLog()
	def := workflow.Definition{Name: "saga4", OnFailure: workflow.FailureCompensate, Policy: fastPolicy(),
		Steps: []workflow.Step{
			{Name: "reserve", Run: l.step("reserve"), Compensate: l.comp("reserve")},
			{Name: "charge", Run: l.step("charge"), Compensate: l.comp("charge")},
			{Name: "ship", Run: failPermanently("ship", l), Compensate: l.comp("ship")},
			{Name: "notify", Run: l.step("notify"), Compensate: l.comp("notify")},
		}}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := e.wait(mustStart(t, e.client, "saga4", nil).ID, 30*time.Second)
	if run.Status != workflow.StatusCompensated || run.FailureCode != workflow.CodePermanentError {
		t.Fatalf("status %s code %q (%s); want compensated with permanent_error", run.Status, run.FailureCode, run.FailureReason)
	}
	if want := []string{"reserve", "charge", "ship", "undo charge", "undo reserve"}; !slices.Equal(l.list(), want) {
		t.Errorf("calls %q, want %q", l.list(), want)
	}
	for _, name := range []string{"reserve", "charge"} {
		sc := l.comps[name]
		if sc.Compensation == nil || sc.Compensation.Step != name || string(sc.Compensation.Output) != `{"step":"`+name+`"}` ||
			sc.Compensation.FailureCode != workflow.CodePermanentError || sc.Compensation.FailureReason != run.FailureReason {
			t.Errorf("compensation of %s got %+v", name, sc.Compensation)
		}
		if sc.Step != workflow.CompensationPrefix+name {
			t.Errorf("compensation of %s runs as step %q", name, sc.Step)
		}
		if out, ok := sc.Output(name); !ok || string(out) != `{"step":"`+name+`"}` {
			t.Errorf("compensation of %s: StepContext.Output(%s) = %s, %v", name, name, out, ok)
		}
	}
	if len(l.keys) != 2 {
		t.Errorf("idempotency keys %v, want one per compensation", l.keys)
	}
	wantSteps := map[string]workflow.StepStatus{"reserve": workflow.StepCompensated, "charge": workflow.StepCompensated,
		"ship": workflow.StepFailed, "notify": workflow.StepPending}
	for name, st := range wantSteps {
		if got := run.Step(name).Status; got != st {
			t.Errorf("step %s is %s, want %s", name, got, st)
		}
	}
	if c := run.Step("charge").Compensation; c == nil || c.Status != workflow.StepSucceeded || c.Attempts != 1 ||
		string(c.Output) != `{"undone":"charge"}` {
		t.Errorf("charge's compensation record: %+v", c)
	}
	if c := run.Step("ship").Compensation; c == nil || c.Status != workflow.StepPending || c.Attempts != 0 {
		t.Errorf("ship's compensation ran (it never succeeded): %+v", c)
	}
	if run.NeedsAttention || run.Compensating != nil {
		t.Errorf("needs attention %v, compensating %+v; want neither once compensated", run.NeedsAttention, run.Compensating)
	}
	want := []string{"run_compensating ship", "compensation_started charge", "compensation_succeeded charge",
		"compensation_started reserve", "compensation_succeeded reserve", "run_compensated "}
	if got := sagaJournal(e.events(run.ID)); !slices.Equal(got, want) {
		t.Errorf("journal %q, want %q", got, want)
	}
}

// TestSagaWithoutCompensationsStops: a run of a workflow with
// compensations but on_failure stop (the default) fails as before: nothing
// is compensated.
func TestSagaWithoutCompensationsStops(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newSagaLog()
	def := workflow.Definition{Name: "stopper", Policy: fastPolicy(), Steps: []workflow.Step{
		{Name: "a", Run: l.step("a"), Compensate: l.comp("a")},
		{Name: "b", Run: failPermanently("b", l)},
	}}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := e.wait(mustStart(t, e.client, "stopper", nil).ID, 30*time.Second)
	if run.Status != workflow.StatusFailed || !run.NeedsAttention {
		t.Fatalf("status %s, needs attention %v; want failed, needing attention", run.Status, run.NeedsAttention)
	}
	if want := []string{"a", "b"}; !slices.Equal(l.list(), want) {
		t.Errorf("calls %q, want %q", l.list(), want)
	}
}

// TestCompensationRetriesTransientFailures: a compensation that fails
// transiently is retried under its own policy, then succeeds.
func TestCompensationRetriesTransientFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newSagaLog()
	var tries atomic.Int32
	flaky := func(ctx context.Context, sc *workflow.StepContext) (any, error) {
		if tries.Add(1) <= 2 {
			return nil, errors.New("refund service unavailable")
		}
		return l.comp("charge")(ctx, sc)
	}
	def := workflow.Definition{Name: "flakycomp", OnFailure: workflow.FailureCompensate, Policy: fastPolicy(),
		Steps: []workflow.Step{
			{Name: "charge", Run: l.step("charge"), Compensate: flaky,
				CompensatePolicy: workflow.Policy{MaxAttempts: 5, InitialInterval: 100 * time.Millisecond}},
			{Name: "ship", Run: failPermanently("ship", l)},
		}}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := e.wait(mustStart(t, e.client, "flakycomp", nil).ID, 30*time.Second)
	if run.Status != workflow.StatusCompensated {
		t.Fatalf("status %s (%s %s), want compensated", run.Status, run.FailureCode, run.FailureReason)
	}
	c := run.Step("charge").Compensation
	if c == nil || c.Attempts != 3 || c.Status != workflow.StepSucceeded {
		t.Fatalf("compensation record %+v; want 3 attempts, succeeded", c)
	}
	if c.EffectivePolicy == nil || c.EffectivePolicy.MaxAttempts != 5 {
		t.Errorf("compensation's policy %+v, want max_attempts 5 (its own)", c.EffectivePolicy)
	}
	if n := countEvents(e.events(run.ID), workflow.EventRetryScheduled, workflow.CompensationPrefix+"charge"); n != 2 {
		t.Errorf("%d retries of the compensation journaled, want 2", n)
	}
}

// TestCompensationExhaustedThenOperatorRetry: a compensation that exhausts
// its retries fails the run with compensation_failed, needing attention; the
// compensations after it wait. An operator's retry of that compensation (by
// its name) runs it again with a fresh budget, and the saga finishes.
func TestCompensationExhaustedThenOperatorRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newSagaLog()
	var fixed atomic.Bool
	var tries atomic.Int32
	broken := func(ctx context.Context, sc *workflow.StepContext) (any, error) {
		tries.Add(1)
		if !fixed.Load() {
			return nil, errors.New("refund rejected: 503")
		}
		return l.comp("charge")(ctx, sc)
	}
	def := workflow.Definition{Name: "stuckcomp", OnFailure: workflow.FailureCompensate, Policy: fastPolicy(),
		Steps: []workflow.Step{
			{Name: "reserve", Run: l.step("reserve"), Compensate: l.comp("reserve")},
			{Name: "charge", Run: l.step("charge"), Compensate: broken,
				CompensatePolicy: workflow.Policy{MaxAttempts: 2}},
			{Name: "ship", Run: failPermanently("ship", l)},
		}}
	e.startWorker(workflow.WorkerConfig{}, def)
	id := mustStart(t, e.client, "stuckcomp", nil).ID
	run := e.wait(id, 30*time.Second)
	if run.Status != workflow.StatusFailed || run.FailureCode != workflow.CodeCompensationFailed || !run.NeedsAttention {
		t.Fatalf("status %s code %q attention %v; want failed with compensation_failed, needing attention",
			run.Status, run.FailureCode, run.NeedsAttention)
	}
	if run.Compensating == nil || run.Compensating.Code != workflow.CodePermanentError || run.Compensating.FailedStep != "ship" {
		t.Errorf("compensating %+v; want the original failure of ship kept", run.Compensating)
	}
	if run.CurrentStep != workflow.CompensationPrefix+"charge" {
		t.Errorf("current step %q, want the failed compensation", run.CurrentStep)
	}
	if tries.Load() != 2 || slices.Contains(l.list(), "undo reserve") {
		t.Fatalf("%d tries of charge's compensation, calls %q; want 2 tries, reserve not compensated yet", tries.Load(), l.list())
	}
	if _, err := e.client.SkipStep(ctxb, id, workflow.CompensationPrefix+"charge", nil); !errors.Is(err, workflow.ErrActionRefused) {
		t.Errorf("skip of a compensation: %v, want ErrActionRefused", err)
	}
	if _, err := e.client.RetryStep(ctxb, id, "charge", nil); !errors.Is(err, workflow.ErrActionRefused) {
		t.Errorf("retry of the step, not its compensation: %v, want ErrActionRefused", err)
	}
	fixed.Store(true)
	reopened, err := e.client.RetryStep(ctxb, id, workflow.CompensationPrefix+"charge", &workflow.ActionOptions{Actor: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if reopened.Status != workflow.StatusCompensating || reopened.FailureCode != workflow.CodePermanentError {
		t.Errorf("after the retry: status %s code %q; want compensating with the original failure", reopened.Status, reopened.FailureCode)
	}
	run = e.wait(id, 30*time.Second)
	if run.Status != workflow.StatusCompensated || run.FailureCode != workflow.CodePermanentError {
		t.Fatalf("status %s code %q, want compensated with permanent_error", run.Status, run.FailureCode)
	}
	if want := []string{"reserve", "charge", "ship", "undo charge", "undo reserve"}; !slices.Equal(l.list(), want) {
		t.Errorf("calls %q, want %q", l.list(), want)
	}
	if c := run.Step("charge").Compensation; c.Attempts != 3 {
		t.Errorf("charge's compensation: %d attempts, want 3 (2 failed, 1 after the retry)", c.Attempts)
	}
}

// TestCancelAndCompensate: cancelling a running run with Compensate stops
// its current step and compensates the steps that succeeded; the run ends
// compensated with code cancelled. A second call is a no-op.
func TestCancelAndCompensate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newSagaLog()
	blocked := make(chan struct{})
	// b's compensation waits for the second cancel, so that cancel meets a
	// run that is still compensating.
	secondDone := make(chan struct{})
	var stopped atomic.Bool
	undoB := l.comp("b")
	def := workflow.Definition{Name: "cancomp", Policy: fastPolicy(), Steps: []workflow.Step{
		{Name: "a", Run: l.step("a"), Compensate: l.comp("a")},
		{Name: "b", Run: l.step("b"), Compensate: func(ctx context.Context, sc *workflow.StepContext) (any, error) {
			select {
			case <-secondDone:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return undoB(ctx, sc)
		}},
		{Name: "wait", Run: func(ctx context.Context, _ *workflow.StepContext) (any, error) {
			close(blocked)
			<-ctx.Done()
			stopped.Store(true)
			return nil, ctx.Err()
		}, Compensate: l.comp("wait")},
	}}
	e.startWorker(workflow.WorkerConfig{}, def)
	id := mustStart(t, e.client, "cancomp", nil).ID
	<-blocked
	run, err := e.client.Cancel(ctxb, id, &workflow.ActionOptions{Actor: "ops", Compensate: true})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != workflow.StatusCompensating && run.Status != workflow.StatusCompensated {
		t.Errorf("after the cancel: %s, want compensating", run.Status)
	}
	second, err := e.client.Cancel(ctxb, id, &workflow.ActionOptions{Compensate: true})
	if err != nil {
		t.Errorf("a second cancel with compensation: %v", err)
	} else if second.Status != workflow.StatusCompensating || second.FailureReason != "cancelled by ops" {
		t.Errorf("after the second cancel: %s %q, want still compensating, cancelled by ops", second.Status, second.FailureReason)
	}
	close(secondDone)
	run = e.wait(id, 30*time.Second)
	if run.Status != workflow.StatusCompensated || run.FailureCode != workflow.CodeCancelled ||
		run.FailureReason != "cancelled by ops" {
		t.Fatalf("status %s code %q reason %q; want compensated, cancelled by ops", run.Status, run.FailureCode, run.FailureReason)
	}
	if want := []string{"a", "b", "undo b", "undo a"}; !slices.Equal(l.list(), want) {
		t.Errorf("calls %q, want %q", l.list(), want)
	}
	if run.Step("wait").Status != workflow.StepCancelled {
		t.Errorf("the running step is %s, want cancelled", run.Step("wait").Status)
	}
	e.eventually(10*time.Second, "the cancelled step's body to stop", stopped.Load)
	if _, err := e.client.Cancel(ctxb, id, &workflow.ActionOptions{Compensate: true}); !errors.Is(err, workflow.ErrRunFinished) {
		t.Errorf("cancel of a compensated run: %v, want ErrRunFinished", err)
	}
}

// TestCancelAndCompensateNothingToUndo: a run with nothing to compensate is
// cancelled plainly.
func TestCancelAndCompensateNothingToUndo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	def := workflow.Definition{Name: "noundo", Steps: []workflow.Step{
		{Name: "a", Sleep: &workflow.Sleep{For: time.Hour}},
		{Name: "b", Run: func(context.Context, *workflow.StepContext) (any, error) { return nil, nil },
			Compensate: func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }},
	}}
	e.startWorker(workflow.WorkerConfig{}, def)
	id := mustStart(t, e.client, "noundo", nil).ID
	run, err := e.client.Cancel(ctxb, id, &workflow.ActionOptions{Compensate: true})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != workflow.StatusCancelled {
		t.Errorf("status %s, want cancelled", run.Status)
	}
}

// TestOptionalGroupRollsBack: a failure inside an optional group
// compensates only that group's succeeded steps, marks the group rolled
// back, and the run goes on after it and succeeds.
func TestOptionalGroupRollsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newSagaLog()
	def := workflow.Definition{Name: "optgroup", Policy: fastPolicy(), OnFailure: workflow.FailureCompensate,
		Groups: map[string]workflow.Group{"promo": {Optional: true}},
		Steps: []workflow.Step{
			{Name: "order", Run: l.step("order"), Compensate: l.comp("order")},
			{Name: "coupon", Run: l.step("coupon"), Compensate: l.comp("coupon"), Group: "promo"},
			{Name: "points", Run: l.step("points"), Compensate: l.comp("points"), Group: "promo"},
			{Name: "gift", Run: failPermanently("gift", l), Group: "promo"},
			{Name: "ship", Run: l.step("ship")},
		}}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := e.wait(mustStart(t, e.client, "optgroup", nil).ID, 30*time.Second)
	if run.Status != workflow.StatusSucceeded || run.FailureCode != "" {
		t.Fatalf("status %s code %q, want succeeded", run.Status, run.FailureCode)
	}
	if want := []string{"order", "coupon", "points", "gift", "undo points", "undo coupon", "ship"}; !slices.Equal(l.list(), want) {
		t.Errorf("calls %q, want %q", l.list(), want)
	}
	for _, name := range []string{"coupon", "points", "gift"} {
		if st := run.Step(name); st.Status != workflow.StepRolledBack || st.Group != "promo" || !st.GroupOptional {
			t.Errorf("step %s: %s in group %q (optional %v); want rolled_back in the optional group promo", name, st.Status, st.Group, st.GroupOptional)
		}
	}
	if run.Step("order").Status != workflow.StepSucceeded || run.Step("ship").Status != workflow.StepSucceeded {
		t.Errorf("order %s, ship %s; want both succeeded", run.Step("order").Status, run.Step("ship").Status)
	}
	want := []string{"run_compensating gift", "compensation_started points", "compensation_succeeded points",
		"compensation_started coupon", "compensation_succeeded coupon", "group_rolled_back gift", "run_succeeded "}
	if got := sagaJournal(e.events(run.ID)); !slices.Equal(got, want) {
		t.Errorf("journal %q, want %q", got, want)
	}
}

// TestRequiredGroupUnderStopFailsThenRecovers: a failure inside a required
// group of a workflow that stops on failure compensates the group and fails
// the run; a recover runs the whole group again.
func TestRequiredGroupUnderStopFailsThenRecovers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newSagaLog()
	var broken atomic.Bool
	broken.Store(true)
	def := workflow.Definition{Name: "reqgroup", Policy: fastPolicy(), Steps: []workflow.Step{
		{Name: "order", Run: l.step("order"), Compensate: l.comp("order")},
		{Name: "debit", Run: l.step("debit"), Compensate: l.comp("debit"), Group: "transfer"},
		{Name: "credit", Run: func(ctx context.Context, sc *workflow.StepContext) (any, error) {
			if broken.Load() {
				return failPermanently("credit", l)(ctx, sc)
			}
			return l.step("credit")(ctx, sc)
		}, Group: "transfer"},
		{Name: "notify", Run: l.step("notify")},
	}}
	e.startWorker(workflow.WorkerConfig{}, def)
	id := mustStart(t, e.client, "reqgroup", nil).ID
	run := e.wait(id, 30*time.Second)
	if run.Status != workflow.StatusFailed || run.FailureCode != workflow.CodePermanentError || !run.NeedsAttention {
		t.Fatalf("status %s code %q, want failed with permanent_error", run.Status, run.FailureCode)
	}
	if want := []string{"order", "debit", "credit", "undo debit"}; !slices.Equal(l.list(), want) {
		t.Errorf("calls %q, want %q", l.list(), want)
	}
	if run.Step("debit").Status != workflow.StepCompensated || run.Step("order").Status != workflow.StepSucceeded {
		t.Errorf("debit %s, order %s; want compensated and succeeded", run.Step("debit").Status, run.Step("order").Status)
	}
	if run.CurrentStep != "credit" {
		t.Errorf("current step %q, want credit", run.CurrentStep)
	}
	broken.Store(false)
	if _, err := e.client.Recover(ctxb, id, nil); err != nil {
		t.Fatal(err)
	}
	run = e.wait(id, 30*time.Second)
	if run.Status != workflow.StatusSucceeded {
		t.Fatalf("after recover: %s (%s)", run.Status, run.FailureReason)
	}
	if want := []string{"order", "debit", "credit", "undo debit", "debit", "credit", "notify"}; !slices.Equal(l.list(), want) {
		t.Errorf("calls %q, want %q (the group runs again from its first step)", l.list(), want)
	}
}

// TestRequiredGroupUnderCompensate: a failure inside a required group of a
// saga compensates the group, then the steps before it: the run compensates
// all.
func TestRequiredGroupUnderCompensate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newSagaLog()
	def := workflow.Definition{Name: "reqsaga", Policy: fastPolicy(), OnFailure: workflow.FailureCompensate,
		Steps: []workflow.Step{
			{Name: "order", Run: l.step("order"), Compensate: l.comp("order")},
			{Name: "debit", Run: l.step("debit"), Compensate: l.comp("debit"), Group: "transfer"},
			{Name: "credit", Run: failPermanently("credit", l), Group: "transfer"},
		}}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := e.wait(mustStart(t, e.client, "reqsaga", nil).ID, 30*time.Second)
	if run.Status != workflow.StatusCompensated {
		t.Fatalf("status %s, want compensated", run.Status)
	}
	if want := []string{"order", "debit", "credit", "undo debit", "undo order"}; !slices.Equal(l.list(), want) {
		t.Errorf("calls %q, want %q", l.list(), want)
	}
}

// TestCompensationCannotGoto: a compensation that returns Goto fails for
// good (invalid_goto), leaving the run for an operator.
func TestCompensationCannotGoto(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newSagaLog()
	def := workflow.Definition{Name: "compgoto", Policy: fastPolicy(), OnFailure: workflow.FailureCompensate,
		Steps: []workflow.Step{
			{Name: "a", Run: l.step("a"), Compensate: func(context.Context, *workflow.StepContext) (any, error) {
				return nil, workflow.Goto("a")
			}},
			{Name: "b", Run: failPermanently("b", l)},
		}}
	e.startWorker(workflow.WorkerConfig{}, def)
	run := e.wait(mustStart(t, e.client, "compgoto", nil).ID, 30*time.Second)
	if run.Status != workflow.StatusFailed || run.FailureCode != workflow.CodeCompensationFailed {
		t.Fatalf("status %s code %q, want failed with compensation_failed", run.Status, run.FailureCode)
	}
	c := run.Step("a").Compensation
	if c.LastErrorCode != workflow.CodeInvalidGoto || c.LastErrorClass != "permanent" {
		t.Errorf("compensation's last error %q (%s, %s), want a permanent invalid_goto", c.LastError, c.LastErrorClass, c.LastErrorCode)
	}
}

// TestSagaStatusJSON: the run's JSON names the new statuses, the
// compensating state and each step's compensation.
func TestSagaStatusJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newSagaLog()
	release := make(chan struct{})
	def := workflow.Definition{Name: "sagajson", Policy: fastPolicy(), OnFailure: workflow.FailureCompensate,
		Steps: []workflow.Step{
			{Name: "a", Run: l.step("a"), Compensate: func(ctx context.Context, _ *workflow.StepContext) (any, error) {
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return "undone", nil
			}},
			{Name: "b", Run: failPermanently("b", l)},
		}}
	e.startWorker(workflow.WorkerConfig{}, def)
	id := mustStart(t, e.client, "sagajson", nil).ID
	var run *workflow.Run
	e.eventually(20*time.Second, "the compensation to run", func() bool {
		r, err := e.client.Get(ctxb, id)
		run = r
		return err == nil && r.Step("a").Compensation != nil && r.Step("a").Compensation.Status == workflow.StepRunning
	})
	close(release)
	b, err := json.Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Status       string `json:"status"`
		OnFailure    string `json:"on_failure"`
		CurrentStep  string `json:"current_step"`
		Compensating struct {
			Then       string `json:"then"`
			FailedStep string `json:"failed_step"`
			Code       string `json:"code"`
		} `json:"compensating"`
		Steps []struct {
			Name         string `json:"name"`
			Compensation *struct {
				Name   string `json:"name"`
				Status string `json:"status"`
			} `json:"compensation"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Status != "compensating" || m.OnFailure != "compensate" || m.CurrentStep != "compensate:a" ||
		m.Compensating.Then != "compensated" || m.Compensating.FailedStep != "b" || m.Compensating.Code != "permanent_error" {
		t.Errorf("run JSON: %s", b)
	}
	if c := m.Steps[0].Compensation; c == nil || c.Name != "compensate:a" || c.Status != "running" {
		t.Errorf("step a's compensation in JSON: %s", b)
	}
	if m.Steps[1].Compensation != nil {
		t.Errorf("step b has no compensation, JSON says %s", b)
	}
	if run := e.wait(id, 30*time.Second); run.Status != workflow.StatusCompensated {
		t.Errorf("status %s, want compensated", run.Status)
	}
}

// TestCompensationRepairs: a compensation's task, written with the failure
// that started the saga, is re-created by the reconciler when it is lost;
// a compensation whose worker dies is resumed after its fence expires,
// counted as a crash of the compensation; a late delivery of its old task is
// stale.
func TestCompensationRepairs(t *testing.T) {
	t.Parallel()
	l := newSagaLog()
	def := workflow.Definition{Name: "sagarig", OnFailure: workflow.FailureCompensate,
		Steps: []workflow.Step{
			{Name: "a", Run: l.step("a"), Compensate: l.comp("a")},
			{Name: "b", Run: failPermanently("b", l)},
		}}
	r := newRig(t, def)
	run := mustStart(t, r.client, "sagarig", nil)
	if err := r.deliver(run.ID, "sagarig", 0, "a", 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.deliver(run.ID, "sagarig", 1, "b", 1, 0); err != nil {
		t.Fatal(err)
	}
	got := r.get(run.ID)
	comp := tasks.ID(run.ID, retrystate.CompBase, 1, 0)
	if got.Status != workflow.StatusCompensating || got.CurrentStep != "compensate:a" || got.Deadline != nil {
		t.Fatalf("after b failed: status %s, current %q, deadline %v; want compensating at compensate:a, no deadline",
			got.Status, got.CurrentStep, got.Deadline)
	}
	if info, ok := r.taskExists(comp); !ok || info.State != asynq.TaskStatePending {
		t.Fatalf("the compensation's task %s was not written with the failure: %+v", comp, info)
	}
	// Lost: the reconciler re-creates it once the run is idle for its grace.
	r.deleteTask(comp)
	r.clock.Advance(6 * time.Second)
	if rep := r.pass(); rep.Repairs["task_missing"] != 1 {
		t.Fatalf("pass: %v", rep)
	}
	if _, ok := r.taskExists(comp); !ok {
		t.Fatalf("compensation task %s not re-created", comp)
	}
	// A worker begins the compensation and dies.
	b, err := r.store.Begin(ctxb, retrystate.BeginParams{RunID: run.ID, Index: retrystate.CompBase, TaskID: comp,
		Token: "dead", FenceTTL: 10 * time.Second, Now: r.clock.Now()})
	if err != nil || b.Outcome != retrystate.OutcomeOK || b.Started.Compensation == nil || b.Started.Compensation.Step != "a" {
		t.Fatalf("begin of the compensation: %+v %v", b, err)
	}
	r.clock.Advance(11 * time.Second)
	if rep, err := r.rec.Sweep(ctxb); err != nil || rep.Repairs["crashed_attempt"] != 1 {
		t.Fatalf("sweep: %v %v", rep, err)
	}
	if err := r.deliver(run.ID, "sagarig", retrystate.CompBase, "compensate:a", 1, 0); err != nil { // the old task
		t.Fatal(err)
	}
	if calls := l.list(); slices.Contains(calls, "undo a") {
		t.Fatalf("the old task ran the compensation: %q", calls)
	}
	if err := r.deliver(run.ID, "sagarig", retrystate.CompBase, "compensate:a", 1, 1); err != nil {
		t.Fatal(err)
	}
	got = r.get(run.ID)
	if got.Status != workflow.StatusCompensated {
		t.Fatalf("status %s, want compensated", got.Status)
	}
	if c := got.Step("a").Compensation; c.Crashes != 1 || c.Attempts != 1 || c.RetryAttempts != 0 {
		t.Errorf("compensation record %+v; want 1 attempt, 1 crash", c)
	}
	if want := []string{"a", "b", "undo a"}; !slices.Equal(l.list(), want) {
		t.Errorf("calls %q, want %q", l.list(), want)
	}
}

// TestSagaAfterTheDeadline: a run the reconciler fails for its deadline
// compensates, although its deadline has passed: a compensating run has
// none.
func TestSagaAfterTheDeadline(t *testing.T) {
	t.Parallel()
	l := newSagaLog()
	def := workflow.Definition{Name: "slowsaga", OnFailure: workflow.FailureCompensate,
		Policy: workflow.Policy{RunTimeout: time.Hour, InitialInterval: 30 * time.Minute, MaxInterval: 30 * time.Minute},
		Steps: []workflow.Step{
			{Name: "a", Run: l.step("a"), Compensate: l.comp("a")},
			{Name: "b", Run: failing},
		}}
	r := newRig(t, def)
	run := mustStart(t, r.client, "slowsaga", nil)
	if err := r.deliver(run.ID, "slowsaga", 0, "a", 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.deliver(run.ID, "slowsaga", 1, "b", 1, 0); err != nil { // a retry in 30m
		t.Fatal(err)
	}
	r.clock.Advance(61 * time.Minute)
	if rep := r.pass(); rep.Repairs["deadline"] != 1 {
		t.Fatalf("pass: %v", rep)
	}
	got := r.get(run.ID)
	if got.Status != workflow.StatusCompensating || got.FailureCode != workflow.CodeRunTimeout || got.Deadline != nil {
		t.Fatalf("status %s code %q deadline %v; want compensating with run_timeout and no deadline", got.Status, got.FailureCode, got.Deadline)
	}
	if _, ok := r.taskExists(tasks.ID(run.ID, 1, 2, 0)); ok {
		t.Errorf("b's retry task still exists")
	}
	r.clock.Advance(time.Hour)
	if rep := r.pass(); rep.Total() != 0 {
		t.Errorf("a second pass repaired the compensating run: %v", rep)
	}
	if err := r.deliver(run.ID, "slowsaga", retrystate.CompBase, "compensate:a", 1, 0); err != nil {
		t.Fatal(err)
	}
	if got := r.get(run.ID); got.Status != workflow.StatusCompensated || got.FailureCode != workflow.CodeRunTimeout {
		t.Fatalf("status %s code %q; want compensated with run_timeout", got.Status, got.FailureCode)
	}
}

// TestCompensationRepliesAreIdempotent: a compensation's complete applied
// twice (its first reply lost) answers done; one whose run was cancelled
// meanwhile is fenced.
func TestCompensationRepliesAreIdempotent(t *testing.T) {
	t.Parallel()
	l := newSagaLog()
	def := workflow.Definition{Name: "compreply", OnFailure: workflow.FailureCompensate, Steps: []workflow.Step{
		{Name: "a", Run: l.step("a"), Compensate: l.comp("a")},
		{Name: "b", Run: l.step("b"), Compensate: l.comp("b")},
		{Name: "c", Run: failPermanently("c", l)},
	}}
	r := newRig(t, def)
	run := mustStart(t, r.client, "compreply", nil)
	for i, name := range []string{"a", "b", "c"} {
		if err := r.deliver(run.ID, "compreply", i, name, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	compB := tasks.ID(run.ID, retrystate.CompBase+1, 1, 0)
	b, err := r.store.Begin(ctxb, retrystate.BeginParams{RunID: run.ID, Index: retrystate.CompBase + 1, TaskID: compB,
		Token: "tok", FenceTTL: 10 * time.Second, Now: r.clock.Now()})
	if err != nil || b.Outcome != retrystate.OutcomeOK || b.Started.Next != nil {
		t.Fatalf("begin: %+v %v", b, err)
	}
	if n := len(b.Started.Earlier); n != 2 || b.Started.Earlier[1].Name != "b" {
		t.Errorf("a compensation of step b sees the outputs %+v; want a's and b's", b.Started.Earlier)
	}
	args := retrystate.CompleteParams{RunID: run.ID, Index: retrystate.CompBase + 1, Token: "tok", Output: `"undone"`,
		Retention: time.Hour, Now: r.clock.Now()}
	first, err := r.store.Complete(ctxb, args)
	if err != nil || first.Outcome != retrystate.OutcomeNext || !first.Enqueued ||
		first.Dispatch.Index != retrystate.CompBase || first.Dispatch.Name != "compensate:a" {
		t.Fatalf("first complete: %+v %v; want the next compensation, a's, written", first, err)
	}
	again, err := r.store.Complete(ctxb, args)
	if err != nil || again.Outcome != retrystate.OutcomeDone || again.RunStatus != workflow.StatusCompensating {
		t.Errorf("the same complete again: %+v %v; want done, compensating", again, err)
	}
	if _, err := r.client.Cancel(ctxb, run.ID, nil); err != nil {
		t.Fatal(err)
	}
	compA := tasks.ID(run.ID, retrystate.CompBase, 1, 0)
	if err := r.deliver(run.ID, "compreply", retrystate.CompBase, "compensate:a", 1, 0); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(l.list(), "undo a") {
		t.Errorf("a's compensation ran after the run was cancelled (task %s)", compA)
	}
	got := r.get(run.ID)
	if got.Status != workflow.StatusCancelled || got.Compensating != nil || got.Step("a").Compensation.Status != workflow.StepCancelled {
		t.Errorf("after the cancel: status %s, compensating %+v, a's compensation %s", got.Status, got.Compensating,
			got.Step("a").Compensation.Status)
	}
}

// TestCancelAndCompensateAFailedRun: a failed run of a workflow that stops
// on failure can still be compensated; it keeps its failure.
func TestCancelAndCompensateAFailedRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newSagaLog()
	def := workflow.Definition{Name: "failedcomp", Policy: fastPolicy(), Steps: []workflow.Step{
		{Name: "a", Run: l.step("a"), Compensate: l.comp("a")},
		{Name: "b", Run: failPermanently("b", l)},
	}}
	e.startWorker(workflow.WorkerConfig{}, def)
	id := mustStart(t, e.client, "failedcomp", nil).ID
	if run := e.wait(id, 30*time.Second); run.Status != workflow.StatusFailed {
		t.Fatalf("status %s, want failed", run.Status)
	}
	if _, err := e.client.Cancel(ctxb, id, nil); !errors.Is(err, workflow.ErrRunFinished) {
		t.Errorf("a plain cancel of a failed run: %v, want ErrRunFinished", err)
	}
	if _, err := e.client.Cancel(ctxb, id, &workflow.ActionOptions{Compensate: true, Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	run := e.wait(id, 30*time.Second)
	if run.Status != workflow.StatusCompensated || run.FailureCode != workflow.CodePermanentError || run.NeedsAttention {
		t.Fatalf("status %s code %q attention %v; want compensated, keeping permanent_error", run.Status, run.FailureCode, run.NeedsAttention)
	}
	if want := []string{"a", "b", "undo a"}; !slices.Equal(l.list(), want) {
		t.Errorf("calls %q, want %q", l.list(), want)
	}
	if ttl := e.rdb.PTTL(ctxb, "cairn:{"+e.queue+"}:run:"+id).Val(); ttl <= 0 {
		t.Errorf("the compensated run has no retention (PTTL %s)", ttl)
	}
}

// TestRestoreACompensatedRun: an administrator's restore runs a compensated
// run again from its first step; its compensations are reset with the
// steps, and a second failure compensates again.
func TestRestoreACompensatedRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newSagaLog()
	def := workflow.Definition{Name: "restoresaga", OnFailure: workflow.FailureCompensate, Policy: fastPolicy(),
		Steps: []workflow.Step{
			{Name: "a", Run: l.step("a"), Compensate: l.comp("a")},
			{Name: "b", Run: failPermanently("b", l)},
		}}
	e.startWorker(workflow.WorkerConfig{}, def)
	id := mustStart(t, e.client, "restoresaga", nil).ID
	if run := e.wait(id, 30*time.Second); run.Status != workflow.StatusCompensated {
		t.Fatalf("status %s, want compensated", run.Status)
	}
	if _, err := e.client.Recover(ctxb, id, nil); !errors.Is(err, workflow.ErrActionRefused) {
		t.Errorf("recover of a compensated run: %v, want ErrActionRefused", err)
	}
	restored, err := e.client.Restore(ctxb, id, "a", &workflow.ActionOptions{Actor: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	if c := restored.Step("a").Compensation; c.Status != workflow.StepPending || len(c.Output) != 0 {
		t.Errorf("after the restore, a's compensation is %s with output %s; want pending, none", c.Status, c.Output)
	}
	run := e.wait(id, 30*time.Second)
	if run.Status != workflow.StatusCompensated {
		t.Fatalf("status %s, want compensated again", run.Status)
	}
	if want := []string{"a", "b", "undo a", "a", "b", "undo a"}; !slices.Equal(l.list(), want) {
		t.Errorf("calls %q, want %q", l.list(), want)
	}
	if c := run.Step("a").Compensation; c.Attempts != 2 {
		t.Errorf("a's compensation: %d attempts, want 2 (one per failure)", c.Attempts)
	}
}

// TestSagaHoldsItsOrderingKey: a compensating run keeps its ordering key's
// slot, so the key's next run starts only when the compensations are done.
func TestSagaHoldsItsOrderingKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newSagaLog()
	release := make(chan struct{})
	undo := func(ctx context.Context, _ *workflow.StepContext) (any, error) {
		select {
		case <-release:
			return "undone", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	failIfAsked := func(_ context.Context, sc *workflow.StepContext) (any, error) {
		var in struct{ Fail bool }
		if err := sc.DecodeInput(&in); err != nil {
			return nil, err
		}
		if in.Fail {
			return nil, workflow.Permanent(errors.New("asked to fail"))
		}
		return "ok", nil
	}
	def := workflow.Definition{Name: "keysaga", OnFailure: workflow.FailureCompensate, Policy: fastPolicy(),
		Steps: []workflow.Step{
			{Name: "first", Run: l.step("first"), Compensate: undo},
			{Name: "second", Run: failIfAsked},
		}}
	e.startWorker(workflow.WorkerConfig{}, def)
	opts := &workflow.StartOptions{OrderingKey: "acct-1"}
	first, err := e.client.Start(ctxb, "keysaga", map[string]bool{"Fail": true}, opts)
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.client.Start(ctxb, "keysaga", nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	e.eventually(20*time.Second, "the first run to compensate", func() bool {
		r, err := e.client.Get(ctxb, first.ID)
		return err == nil && r.Status == workflow.StatusCompensating
	})
	if r, err := e.client.Get(ctxb, second.ID); err != nil || r.Status != workflow.StatusPending || r.WaitingFor == nil {
		t.Fatalf("the second run while the first compensates: %+v %v; want pending, waiting for the key", r, err)
	}
	close(release)
	if run := e.wait(first.ID, 30*time.Second); run.Status != workflow.StatusCompensated {
		t.Fatalf("first: %s, want compensated", run.Status)
	}
	if run := e.wait(second.ID, 30*time.Second); run.Status != workflow.StatusSucceeded {
		t.Fatalf("second: %s, want succeeded once the first compensated", run.Status)
	}
}
