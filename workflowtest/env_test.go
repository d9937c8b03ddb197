package workflowtest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflowtest"
)

func ok(out any) workflow.StepFunc {
	return func(context.Context, *workflow.StepContext) (any, error) { return out, nil }
}

func must[T any](t *testing.T) func(T, error) T {
	t.Helper()
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func types(t *testing.T, env *workflowtest.Env, id string) []string {
	t.Helper()
	evs, err := env.Events(id)
	check(t, err)
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
		if ev.Step != "" {
			out[i] += fmt.Sprintf(" %s#%d", ev.Step, ev.Attempt)
		}
	}
	return out
}

func requireJournal(t *testing.T, env *workflowtest.Env, id string, want ...string) {
	t.Helper()
	if got := types(t, env, id); !slices.Equal(got, want) {
		t.Fatalf("journal:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func order() workflow.Definition {
	return workflow.Definition{
		Name:   "order",
		Policy: workflow.Policy{InitialInterval: 1500 * time.Millisecond, MaxAttempts: 3, Jitter: workflow.JitterNone},
		Steps: []workflow.Step{
			{Name: "reserve", Run: ok("r1")},
			{Name: "charge", Run: ok("ch_1")},
		},
	}
}

// A transient failure injected on attempt 1: the retry is scheduled for
// now + the backoff, exactly, and runs when the fake clock gets there, not
// a millisecond before.
func TestRetryAfterTransientFailure(t *testing.T) {
	env := workflowtest.New(t, order())
	env.FailStep("charge", 1, workflow.Transient(errors.New("gateway timeout")))

	start := env.Now()
	run := must[*workflow.Run](t)(env.Start("order", map[string]int{"id": 42}, nil))
	charge := run.Step("charge")
	if run.Status != workflow.StatusRunning || charge.RetryState != workflow.RetryScheduled ||
		charge.NextAttemptAt == nil || !charge.NextAttemptAt.Equal(start.Add(1500*time.Millisecond)) {
		t.Fatalf("run %s, charge %+v; want a retry at %s", run.Status, charge, start.Add(1500*time.Millisecond))
	}
	ev := env.RequireEvent(t, run.ID, workflow.EventRetryScheduled, "charge")
	if ev.Attempt != 2 || ev.Details["delay_ms"] != "1500" {
		t.Errorf("retry_scheduled %+v", ev)
	}
	tasks := must[[]workflowtest.Task](t)(env.Tasks())
	if len(tasks) != 1 || tasks[0].Step != "charge" || tasks[0].Attempt != 2 || !tasks[0].Due.Equal(*charge.NextAttemptAt) {
		t.Fatalf("tasks %+v", tasks)
	}
	if next, ok, err := env.NextDue(); err != nil || !ok || !next.Equal(*charge.NextAttemptAt) {
		t.Fatalf("next due %s %v %v", next, ok, err)
	}

	check(t, env.Advance(1499*time.Millisecond))
	env.RequireStatus(t, run.ID, workflow.StatusRunning)
	check(t, env.Advance(time.Millisecond))
	env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
	var out string
	env.RequireOutput(t, run.ID, "charge", &out)
	if out != "ch_1" {
		t.Errorf("output %q", out)
	}
	ev = env.RequireEvent(t, run.ID, workflow.EventAttemptSucceeded, "charge")
	if ev.Attempt != 2 || !ev.At.Equal(start.Add(1500*time.Millisecond)) {
		t.Errorf("attempt_succeeded %+v", ev)
	}
	requireJournal(t, env, run.ID,
		"run_started", "attempt_started reserve#1", "attempt_succeeded reserve#1",
		"attempt_started charge#1", "attempt_failed charge#1", "retry_scheduled charge#2",
		"attempt_started charge#2", "attempt_succeeded charge#2", "run_succeeded")
	if got := must[[]workflowtest.Task](t)(env.Tasks()); len(got) != 0 {
		t.Errorf("tasks left: %+v", got)
	}
}

// One Advance runs each retry at its own due time: 1.5s, then 3s later.
func TestAdvanceStopsAtEachDueTime(t *testing.T) {
	env := workflowtest.New(t, order())
	env.FailStep("charge", 1, errors.New("503"))
	env.FailStep("charge", 2, errors.New("503"))
	start := env.Now()
	run := must[*workflow.Run](t)(env.Start("order", nil, nil))
	check(t, env.Advance(time.Hour))
	if !env.Now().Equal(start.Add(time.Hour)) {
		t.Errorf("clock at %s", env.Now())
	}
	env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
	var starts []time.Duration
	for _, ev := range must[[]workflow.Event](t)(env.Events(run.ID)) {
		if ev.Type == workflow.EventAttemptStarted && ev.Step == "charge" {
			starts = append(starts, ev.At.Sub(start))
		}
	}
	if want := []time.Duration{0, 1500 * time.Millisecond, 4500 * time.Millisecond}; !slices.Equal(starts, want) {
		t.Errorf("charge's attempts started at %v, want %v", starts, want)
	}
}

// A permanent failure fails the run at once, with no retry.
func TestPermanentFailure(t *testing.T) {
	env := workflowtest.New(t, order())
	env.FailStep("charge", 1, workflow.Permanent(errors.New("card declined")))
	run := must[*workflow.Run](t)(env.Start("order", nil, nil))
	run = env.RequireStatus(t, run.ID, workflow.StatusFailed)
	if run.FailureCode != workflow.CodePermanentError || !strings.Contains(run.FailureReason, "card declined") ||
		!run.NeedsAttention {
		t.Errorf("run: %s %q attention %v", run.FailureCode, run.FailureReason, run.NeedsAttention)
	}
	if s := run.Step("charge"); s.Status != workflow.StepFailed || s.Attempts != 1 || s.LastErrorClass != "permanent" {
		t.Errorf("charge %+v", s)
	}
	if n, ok, err := env.NextDue(); err != nil || ok {
		t.Errorf("something due after a failed run: %s %v", n, err)
	}
}

// Retries exhausted: RunUntilDone goes through every backoff (with the
// default jitter, from the Env's seeded source) to the failure.
func TestRunUntilDoneThroughBackoffs(t *testing.T) {
	def := order()
	def.Policy = workflow.Policy{MaxAttempts: 4, InitialInterval: time.Minute, MaxInterval: time.Hour} // jitter: equal
	env := workflowtest.New(t, def)
	env.OnStep("charge", func(context.Context, *workflow.StepContext) (any, error) {
		return nil, errors.New("connection refused")
	})
	start := env.Now()
	run := must[*workflow.Run](t)(env.Start("order", nil, nil))
	run = must[*workflow.Run](t)(env.RunUntilDone(run.ID))
	if run.Status != workflow.StatusFailed || run.FailureCode != workflow.CodeRetriesExhausted ||
		run.Step("charge").Attempts != 4 {
		t.Fatalf("run %s %s, %d attempts", run.Status, run.FailureCode, run.Step("charge").Attempts)
	}
	// Equal jitter: each delay is between half the backoff and all of it.
	elapsed := env.Now().Sub(start)
	if lo, hi := (1+2+4)*time.Minute/2, (1+2+4)*time.Minute; elapsed < lo || elapsed > hi {
		t.Errorf("failed after %s, want %s to %s", elapsed, lo, hi)
	}
}

// The same test, twice: the same journal, the same times.
func TestDeterministic(t *testing.T) {
	journal := func() []string {
		def := order()
		def.Policy = workflow.Policy{MaxAttempts: 5, InitialInterval: time.Second, Jitter: workflow.JitterFull}
		env := workflowtest.New(t, def)
		env.OnStep("charge", func(_ context.Context, sc *workflow.StepContext) (any, error) {
			if sc.Attempt < 4 {
				return nil, errors.New("503")
			}
			return "ok", nil
		})
		run := must[*workflow.Run](t)(env.Start("order", nil, nil))
		must[*workflow.Run](t)(env.RunUntilDone(run.ID))
		var out []string
		for _, ev := range must[[]workflow.Event](t)(env.Events(run.ID)) {
			out = append(out, fmt.Sprintf("%s %s#%d %s", ev.At.Format(time.RFC3339Nano), ev.Step, ev.Attempt, ev.Type))
		}
		return out
	}
	a, b := journal(), journal()
	if !slices.Equal(a, b) {
		t.Errorf("two runs differ:\n%s\n--\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
}

// A sleep step wakes up when the clock reaches its end.
func TestSleepWokenByAdvance(t *testing.T) {
	env := workflowtest.New(t, workflow.Definition{Name: "remind", Steps: []workflow.Step{
		{Name: "wait", Sleep: &workflow.Sleep{For: 24 * time.Hour}},
		{Name: "send", Run: ok("sent")},
	}})
	start := env.Now()
	run := must[*workflow.Run](t)(env.Start("remind", nil, nil))
	w := run.Step("wait")
	if w.Status != workflow.StepWaiting || w.WaitingFor == nil || !w.WaitingFor.Timer ||
		!w.WaitingFor.Until.Equal(start.Add(24*time.Hour)) {
		t.Fatalf("wait step %+v (waiting for %+v)", w, w.WaitingFor)
	}
	check(t, env.Advance(24*time.Hour-time.Millisecond))
	env.RequireStatus(t, run.ID, workflow.StatusRunning)
	check(t, env.Advance(time.Millisecond))
	env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
	if ev := env.RequireEvent(t, run.ID, workflow.EventTimerFired, "wait"); !ev.At.Equal(start.Add(24 * time.Hour)) {
		t.Errorf("timer fired at %s", ev.At)
	}
}

// Sleep.Until reads the run's input.
func TestSleepUntil(t *testing.T) {
	env := workflowtest.New(t, workflow.Definition{Name: "remind", Steps: []workflow.Step{
		{Name: "wait", Sleep: &workflow.Sleep{Until: func(sc *workflow.StepContext) (time.Time, error) {
			var in struct {
				At time.Time `json:"at"`
			}
			err := sc.DecodeInput(&in)
			return in.At, err
		}}},
		{Name: "send", Run: ok("sent")},
	}})
	at := env.Now().Add(90 * time.Minute)
	run := must[*workflow.Run](t)(env.Start("remind", map[string]time.Time{"at": at}, nil))
	run = must[*workflow.Run](t)(env.RunUntilDone(run.ID))
	if run.Status != workflow.StatusSucceeded || !env.Now().Equal(at) {
		t.Errorf("run %s at %s, want succeeded at %s", run.Status, env.Now(), at)
	}
}

func approval() workflow.Definition {
	return workflow.Definition{Name: "approval", Steps: []workflow.Step{
		{Name: "submit", Run: ok("submitted")},
		{Name: "approved", Await: &workflow.Await{Signal: "approve", Timeout: 48 * time.Hour}},
		{Name: "publish", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
			var by struct {
				By string `json:"by"`
			}
			if err := sc.DecodeOutput("approved", &by); err != nil {
				return nil, err
			}
			return "published, approved by " + by.By, nil
		}},
	}}
}

// An await completed by a signal: the payload is the await's output.
func TestAwaitSignalled(t *testing.T) {
	env := workflowtest.New(t, approval())
	run := must[*workflow.Run](t)(env.Start("approval", nil, nil))
	if w := run.Step("approved"); w.Status != workflow.StepWaiting || w.WaitingFor.Signal != "approve" {
		t.Fatalf("await %+v", w)
	}
	check(t, env.Advance(time.Hour))
	res := must[*workflow.SignalResult](t)(env.Signal(run.ID, "approve", map[string]string{"by": "ada"}))
	if res.Outcome != workflow.SignalDelivered || res.Step != "approved" {
		t.Errorf("signal %+v", res)
	}
	env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
	var out string
	env.RequireOutput(t, run.ID, "publish", &out)
	if out != "published, approved by ada" {
		t.Errorf("output %q", out)
	}
	// The await's wake-up task is gone: nothing left to run.
	if next, ok, err := env.NextDue(); err != nil || ok {
		t.Errorf("due after the run ended: %s %v", next, err)
	}
}

// A signal sent before the run reaches its await waits in the mailbox.
func TestSignalBeforeAwait(t *testing.T) {
	env := workflowtest.New(t, approval())
	run := must[*workflow.Run](t)(env.Client().Start(context.Background(), "approval", nil, nil))
	res := must[*workflow.SignalResult](t)(env.Client().Signal(context.Background(), run.ID, "approve",
		map[string]string{"by": "bob"}, nil))
	if res.Outcome != workflow.SignalQueued {
		t.Fatalf("signal %+v", res)
	}
	check(t, env.RunUntilIdle())
	env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
	env.RequireEvent(t, run.ID, workflow.EventSignalConsumed, "approved")
}

// An await whose timeout passes fails the run with signal_timeout.
func TestAwaitTimesOut(t *testing.T) {
	env := workflowtest.New(t, approval())
	start := env.Now()
	run := must[*workflow.Run](t)(env.Start("approval", nil, nil))
	check(t, env.Advance(48*time.Hour-time.Millisecond))
	env.RequireStatus(t, run.ID, workflow.StatusRunning)
	check(t, env.Advance(time.Millisecond))
	run = env.RequireStatus(t, run.ID, workflow.StatusFailed)
	if run.FailureCode != workflow.CodeSignalTimeout {
		t.Errorf("failure %s: %s", run.FailureCode, run.FailureReason)
	}
	if ev := env.RequireEvent(t, run.ID, workflow.EventAwaitTimedOut, "approved"); !ev.At.Equal(start.Add(48 * time.Hour)) {
		t.Errorf("timed out at %s", ev.At)
	}
	if _, err := env.Signal(run.ID, "approve", nil); !errors.Is(err, workflow.ErrRunFinished) {
		t.Errorf("signal to the failed run: %v", err)
	}
}

// RunUntilDone of a run that waits for a signal goes through the timeout.
func TestRunUntilDoneAwaitTimeout(t *testing.T) {
	env := workflowtest.New(t, approval())
	run := must[*workflow.Run](t)(env.Start("approval", nil, nil))
	run = must[*workflow.Run](t)(env.RunUntilDone(run.ID))
	if run.FailureCode != workflow.CodeSignalTimeout {
		t.Errorf("run %s %s", run.Status, run.FailureCode)
	}
}

func trip(log *[]string) workflow.Definition {
	undo := func(what string) workflow.StepFunc {
		return func(_ context.Context, sc *workflow.StepContext) (any, error) {
			*log = append(*log, fmt.Sprintf("undo %s (%s)", what, sc.Compensation.FailureCode))
			return nil, nil
		}
	}
	return workflow.Definition{
		Name:      "trip",
		OnFailure: workflow.FailureCompensate,
		Policy:    workflow.Policy{InitialInterval: 10 * time.Second, MaxAttempts: 2, Jitter: workflow.JitterNone},
		Steps: []workflow.Step{
			{Name: "book_room", Run: ok(7), Compensate: undo("room")},
			{Name: "charge_card", Run: ok("ch_1"), Compensate: undo("charge")},
			{Name: "send_voucher", Run: ok("v1")},
		},
	}
}

// A saga: the last step fails for good; the compensations of the steps
// that succeeded run, last first, and the run ends compensated.
func TestCompensation(t *testing.T) {
	var log []string
	env := workflowtest.New(t, trip(&log))
	env.FailStep("send_voucher", 1, errors.New("voucher service down"))
	env.FailStep("send_voucher", 2, errors.New("voucher service down"))
	// The refund fails once: compensations retry like steps.
	env.FailStep("compensate:charge_card", 1, workflow.Transient(errors.New("refund timeout")))

	run := must[*workflow.Run](t)(env.Start("trip", nil, nil))
	run = must[*workflow.Run](t)(env.RunUntilDone(run.ID))
	if run.Status != workflow.StatusCompensated || run.FailureCode != workflow.CodeRetriesExhausted {
		t.Fatalf("run %s %s: %s", run.Status, run.FailureCode, run.FailureReason)
	}
	// The charge's compensation failed on attempt 1 (injected) and ran its
	// own body on attempt 2.
	if want := []string{"undo charge (retries_exhausted)", "undo room (retries_exhausted)"}; !slices.Equal(log, want) {
		t.Errorf("compensations %q, want %q", log, want)
	}
	for _, s := range []string{"book_room", "charge_card"} {
		if st := run.Step(s); st.Status != workflow.StepCompensated {
			t.Errorf("%s: %s", s, st.Status)
		}
	}
	if c := run.Step("charge_card").Compensation; c == nil || c.Attempts != 2 {
		t.Errorf("charge's compensation %+v", c)
	}
}

// A cancel with compensation runs the compensations.
func TestCancelCompensates(t *testing.T) {
	var log []string
	def := trip(&log)
	def.Steps[2] = workflow.Step{Name: "confirm", Await: &workflow.Await{Signal: "confirm", Timeout: time.Hour}}
	env := workflowtest.New(t, def)
	run := must[*workflow.Run](t)(env.Start("trip", nil, nil))
	run = must[*workflow.Run](t)(env.Cancel(run.ID, &workflow.ActionOptions{Compensate: true}))
	if run.Status != workflow.StatusCompensated || run.FailureCode != workflow.CodeCancelled {
		t.Fatalf("run %s %s", run.Status, run.FailureCode)
	}
	if want := []string{"undo charge (cancelled)", "undo room (cancelled)"}; !slices.Equal(log, want) {
		t.Errorf("compensations %q, want %q", log, want)
	}
}

// A run's deadline passes while its step waits for a signal: the Env's
// reconciler fails it at the deadline.
func TestRunDeadline(t *testing.T) {
	def := approval()
	def.Policy = workflow.Policy{RunTimeout: 10 * time.Minute}
	env := workflowtest.New(t, def)
	start := env.Now()
	run := must[*workflow.Run](t)(env.Start("approval", nil, nil))
	if next, ok, err := env.NextDue(); err != nil || !ok || !next.Equal(start.Add(10*time.Minute)) {
		t.Fatalf("next due %s %v %v, want the deadline", next, ok, err)
	}
	check(t, env.Advance(10*time.Minute-time.Millisecond))
	env.RequireStatus(t, run.ID, workflow.StatusRunning)
	check(t, env.Advance(time.Millisecond))
	run = env.RequireStatus(t, run.ID, workflow.StatusFailed)
	if run.FailureCode != workflow.CodeRunTimeout || !run.FinishedAt.Equal(start.Add(10*time.Minute)) {
		t.Errorf("run %s at %s: %s", run.FailureCode, run.FinishedAt, run.FailureReason)
	}
}

// Snooze: the step polls until it is ready.
func TestSnooze(t *testing.T) {
	var polls atomic.Int32
	env := workflowtest.New(t, workflow.Definition{Name: "poll", Steps: []workflow.Step{
		{Name: "ready", Run: func(context.Context, *workflow.StepContext) (any, error) {
			if polls.Add(1) < 3 {
				return nil, workflow.Snooze(30 * time.Second)
			}
			return "ready", nil
		}},
	}})
	start := env.Now()
	run := must[*workflow.Run](t)(env.Start("poll", nil, nil))
	run = must[*workflow.Run](t)(env.RunUntilDone(run.ID))
	if run.Status != workflow.StatusSucceeded || polls.Load() != 3 || !env.Now().Equal(start.Add(time.Minute)) {
		t.Errorf("run %s after %d polls at +%s", run.Status, polls.Load(), env.Now().Sub(start))
	}
}

// A workflow that never ends fails the call rather than hangs it.
func TestTooManyDeliveries(t *testing.T) {
	env := workflowtest.NewWithOptions(t, workflowtest.Options{MaxDeliveries: 20}, workflow.Definition{
		Name: "forever", Steps: []workflow.Step{{Name: "poll", Run: func(context.Context, *workflow.StepContext) (any, error) {
			return nil, workflow.Snooze(0)
		}}},
	})
	_, err := env.Start("forever", nil, nil)
	if !errors.Is(err, workflowtest.ErrTooManyDeliveries) {
		t.Errorf("start: %v", err)
	}
}

// OnAttempt, OnStep, qualified names, and their precedence.
func TestInjections(t *testing.T) {
	a := workflow.Definition{Name: "a", Policy: workflow.Policy{InitialInterval: time.Second, Jitter: workflow.JitterNone},
		Steps: []workflow.Step{{Name: "s", Run: ok("own")}}}
	b := workflow.Definition{Name: "b", Steps: []workflow.Step{{Name: "s", Run: ok("own")}}}
	env := workflowtest.New(t, a, b)
	env.OnStep("s", ok("stub"))
	env.OnStep("b/s", ok("stub b"))
	env.FailStep("a/s", 1, errors.New("503"))
	env.OnAttempt("s", 2, func(_ context.Context, sc *workflow.StepContext) (any, error) {
		return fmt.Sprintf("attempt %d of %s", sc.Attempt, sc.Workflow), nil
	})
	ra := must[*workflow.Run](t)(env.Start("a", nil, nil))
	rb := must[*workflow.Run](t)(env.Start("b", nil, nil))
	must[*workflow.Run](t)(env.RunUntilDone(ra.ID))
	var out string
	env.RequireOutput(t, ra.ID, "s", &out)
	if out != "attempt 2 of a" {
		t.Errorf("a: %q", out)
	}
	env.RequireOutput(t, rb.ID, "s", &out)
	if out != "stub b" {
		t.Errorf("b: %q", out)
	}
	env.ClearInjections()
	rc := must[*workflow.Run](t)(env.Start("b", nil, nil))
	env.RequireOutput(t, rc.ID, "s", &out)
	if out != "own" {
		t.Errorf("after ClearInjections: %q", out)
	}

	for name, f := range map[string]func(){
		"unknown step":     func() { env.FailStep("nope", 1, errors.New("x")) },
		"unknown workflow": func() { env.FailStep("c/s", 1, errors.New("x")) },
		"attempt 0":        func() { env.FailStep("s", 0, errors.New("x")) },
		"nil error":        func() { env.FailStep("s", 1, nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// A step's context has a deadline in real time: the step timeout from now,
// whatever the fake clock says.
func TestStepContextDeadline(t *testing.T) {
	var left time.Duration
	var ctxErr error
	env := workflowtest.New(t, workflow.Definition{Name: "w", Policy: workflow.Policy{StepTimeout: time.Minute},
		Steps: []workflow.Step{{Name: "s", Run: func(ctx context.Context, _ *workflow.StepContext) (any, error) {
			d, _ := ctx.Deadline()
			left, ctxErr = time.Until(d), ctx.Err()
			return nil, nil
		}}}})
	run := must[*workflow.Run](t)(env.Start("w", nil, nil))
	env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
	if ctxErr != nil || left <= 50*time.Second || left > time.Minute {
		t.Errorf("step context: %v, deadline in %s", ctxErr, left)
	}
}

// Inline workflows run their steps in one delivery.
func TestInline(t *testing.T) {
	def := order()
	def.Inline = true
	env := workflowtest.New(t, def)
	run := must[*workflow.Run](t)(env.Start("order", nil, nil))
	env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
}

// A circuit breaker that opens defers the attempts behind it, until its
// cooldown ends.
func TestCircuitBreaker(t *testing.T) {
	def := workflow.Definition{Name: "calls", Policy: workflow.Policy{
		MaxAttempts: 10, InitialInterval: time.Second, Jitter: workflow.JitterNone, BackoffCoefficient: 1,
		CircuitBreaker: &workflow.CircuitBreaker{Name: "api", FailureThreshold: 2, Cooldown: time.Minute},
	}, Steps: []workflow.Step{{Name: "call", Run: ok("ok")}}}
	env := workflowtest.New(t, def)
	env.FailStep("call", 1, errors.New("503"))
	env.FailStep("call", 2, errors.New("503"))
	start := env.Now()
	run := must[*workflow.Run](t)(env.Start("calls", nil, nil))
	run = must[*workflow.Run](t)(env.RunUntilDone(run.ID))
	if run.Status != workflow.StatusSucceeded || run.Step("call").Attempts != 3 {
		t.Fatalf("run %s, %d attempts", run.Status, run.Step("call").Attempts)
	}
	ev := env.RequireEvent(t, run.ID, workflow.EventAttemptStarted, "call")
	if ev.Attempt != 3 || ev.At.Sub(start) < time.Minute {
		t.Errorf("attempt 3 started at +%s, before the breaker's cooldown ended", ev.At.Sub(start))
	}
}

// Ordering keys: the second run starts when the first ends.
func TestOrderingKey(t *testing.T) {
	env := workflowtest.New(t, approval())
	key := &workflow.StartOptions{OrderingKey: "doc-1"}
	first := must[*workflow.Run](t)(env.Start("approval", nil, key))
	second := must[*workflow.Run](t)(env.Start("approval", nil, key))
	if second.Status != workflow.StatusPending || second.WaitingFor.Reason() != workflow.WaitOrderingKey {
		t.Fatalf("second run %s %+v", second.Status, second.WaitingFor)
	}
	must[*workflow.SignalResult](t)(env.Signal(first.ID, "approve", map[string]string{"by": "ada"}))
	env.RequireStatus(t, first.ID, workflow.StatusSucceeded)
	second = env.RequireStatus(t, second.ID, workflow.StatusRunning)
	if w := second.Step("approved"); w.Status != workflow.StepWaiting {
		t.Fatalf("second run's await %s", w.Status)
	}
	must[*workflow.SignalResult](t)(env.Signal(second.ID, "approve", map[string]string{"by": "bob"}))
	env.RequireStatus(t, second.ID, workflow.StatusSucceeded)
}

// RunUntilDone of a run that waits in an ordering key's line behind a run
// that nothing moves on: ErrNothingDue... unless the first run's await
// times out, which it does; so a run with no timeout at all is needed: a
// line behind a run failed for good, which blocks its key.
func TestRunUntilDoneNothingDue(t *testing.T) {
	env := workflowtest.New(t, order())
	env.FailStep("charge", 1, workflow.Permanent(errors.New("declined")))
	key := &workflow.StartOptions{OrderingKey: "customer-1"}
	first := must[*workflow.Run](t)(env.Start("order", nil, key))
	env.RequireStatus(t, first.ID, workflow.StatusFailed)
	second := must[*workflow.Run](t)(env.Start("order", nil, key))
	run, err := env.RunUntilDone(second.ID)
	if !errors.Is(err, workflowtest.ErrNothingDue) || run == nil || run.Status != workflow.StatusPending {
		t.Fatalf("RunUntilDone: %v, %+v", err, run)
	}
	// Cancelling the failed run releases the key. (Injections apply to
	// every run.)
	env.ClearInjections()
	must[*workflow.Run](t)(env.Cancel(first.ID, nil))
	env.RequireStatus(t, second.ID, workflow.StatusSucceeded)
}

// The kit on a real redis-server.
func TestRealRedis(t *testing.T) {
	testkit.SkipShort(t, "a redis-server")
	rdb := redistest.Shared(t).Client(t)
	env := workflowtest.NewWithOptions(t, workflowtest.Options{Redis: rdb, Queue: testkit.Queue(t, "wt")}, order(), approval())
	env.FailStep("charge", 1, workflow.Transient(errors.New("timeout")))
	run := must[*workflow.Run](t)(env.Start("order", nil, nil))
	check(t, env.Advance(1500*time.Millisecond))
	env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
	run = must[*workflow.Run](t)(env.Start("approval", nil, nil))
	must[*workflow.SignalResult](t)(env.Signal(run.ID, "approve", map[string]string{"by": "ada"}))
	env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
}

// A step body that calls the Env's methods that run steps gets ErrInStep
// rather than waiting for itself; it may use the Client.
func TestCallFromStep(t *testing.T) {
	var env *workflowtest.Env
	var inStep error
	env = workflowtest.New(t, workflow.Definition{Name: "w", Steps: []workflow.Step{
		{Name: "s", Run: func(ctx context.Context, sc *workflow.StepContext) (any, error) {
			inStep = env.Advance(time.Second)
			_, err := env.Client().Get(ctx, sc.RunID)
			return nil, err
		}},
	}})
	run := must[*workflow.Run](t)(env.Start("w", nil, nil))
	env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
	if !errors.Is(inStep, workflowtest.ErrInStep) {
		t.Errorf("Advance from a step: %v", inStep)
	}
}

// A run cancelled while its step runs: the step's result is discarded.
func TestCancelWhileStepRuns(t *testing.T) {
	var env *workflowtest.Env
	env = workflowtest.New(t, workflow.Definition{Name: "w", Steps: []workflow.Step{
		{Name: "s", Run: func(ctx context.Context, sc *workflow.StepContext) (any, error) {
			_, err := env.Client().Cancel(ctx, sc.RunID, nil)
			return "done", err
		}},
		{Name: "t", Run: ok("never")},
	}})
	run := must[*workflow.Run](t)(env.Start("w", nil, nil))
	run = env.RequireStatus(t, run.ID, workflow.StatusCancelled)
	if s := run.Step("s"); len(s.Output) != 0 || run.Step("t").Attempts != 0 {
		t.Errorf("steps after the cancel: %+v, %+v", s, run.Step("t"))
	}
}
