package doccheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflowtest"
)

// The tests of docs/go.md's snippets, but "In an existing asynq service"
// (asynqservice_test.go).

// syncAccount is docs/go.md's "Ordering keys and concurrency limits": it
// defines the workflow and starts a run with an ordering key.
func syncAccount(ctx context.Context, client *workflow.Client, steps []workflow.Step, input any) (workflow.Definition, *workflow.Run, error) {
	// snippet: go-ordering
	def := workflow.Definition{Name: "sync-account", Steps: steps,
		Ordering: &workflow.Ordering{Concurrency: 1, OnFailure: workflow.OnFailureBlock}, // the defaults
		// At most 20 runs of this workflow at once, across all workers (0: no limit).
		MaxRunning: 20,
	}
	run, err := client.Start(ctx, "sync-account", input, &workflow.StartOptions{OrderingKey: "acct-42"})
	// run.WaitingFor: nil when it could start, else {"ordering_key": "acct-42", "position": 3, "held_by": [...]}
	// end snippet
	return def, run, err
}

// TestOrdering runs the ordering snippet on a worker: while a run of key
// acct-42 runs, the snippet's run waits in the key's line, first, held by
// that run, while a run of another key runs at once; the snippet's run
// starts when the first has ended.
func TestOrdering(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t, nil).Client(t)
	q := testkit.Queue(t, "doc")
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: q, Logger: testkit.Logger(t)})
	started := make(chan string, 3)
	release := make(chan struct{})
	steps := []workflow.Step{{Name: "sync", Run: func(ctx context.Context, sc *workflow.StepContext) (any, error) {
		started <- sc.RunID
		select {
		case <-release:
			return "synced", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}}
	input := map[string]string{"account": "acct-42"}
	waitStarted := func(want string) {
		t.Helper()
		select {
		case got := <-started:
			if got != want {
				t.Fatalf("run %s started, want %s", got, want)
			}
		case <-time.After(deadline):
			t.Fatalf("run %s did not start", want)
		}
	}

	// The definition comes from the snippet: its first Start, before any
	// worker has published it, is refused.
	def, _, err := syncAccount(t.Context(), client, steps, input)
	if !errors.Is(err, workflow.ErrUnknownWorkflow) {
		t.Fatalf("a Start before the workflow is published: %v, want ErrUnknownWorkflow", err)
	}
	testkit.StartWorker(t, rdb, workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{Queue: q, Logger: testkit.Logger(t)}}, def)
	releaseAll := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseAll) // before the worker stops, should the test fail

	first, err := client.Start(t.Context(), "sync-account", input, &workflow.StartOptions{OrderingKey: "acct-42"})
	if err != nil {
		t.Fatal(err)
	}
	waitStarted(first.ID)
	_, run, err := syncAccount(t.Context(), client, steps, input)
	if err != nil {
		t.Fatal(err)
	}
	if w := run.WaitingFor; w == nil || w.OrderingKey != "acct-42" || w.Position != 1 {
		t.Fatalf("the snippet's run waits for %+v, want acct-42 at position 1", w)
	}
	got, err := client.Get(t.Context(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if w := got.WaitingFor; w == nil || !slices.Equal(w.HeldBy, []string{first.ID}) || got.Status != workflow.StatusPending {
		t.Fatalf("the snippet's run: %s, waiting for %+v, want pending, held by %s", got.Status, w, first.ID)
	}
	other, err := client.Start(t.Context(), "sync-account", input, &workflow.StartOptions{OrderingKey: "acct-7"})
	if err != nil {
		t.Fatal(err)
	}
	waitStarted(other.ID) // another key runs beside acct-42's
	releaseAll()
	waitStarted(run.ID)
	ended := map[string]*workflow.Run{}
	for _, id := range []string{first.ID, other.ID, run.ID} {
		if ended[id] = testkit.WaitRun(t, client, id, deadline); ended[id].Status != workflow.StatusSucceeded {
			t.Errorf("run %s: %s (%s)", id, ended[id].Status, ended[id].FailureReason)
		}
	}
	if f, r := ended[first.ID], ended[run.ID]; r.StartedAt == nil || f.FinishedAt == nil || r.StartedAt.Before(*f.FinishedAt) {
		t.Errorf("the snippet's run started at %v, before the first run of its key finished (%v)", r.StartedAt, f.FinishedAt)
	}
}

// TestSignalsAndTimers runs the signals-and-timers snippet on the fake
// clock: the run awaits its signal, sleeps 10 minutes, then until the
// input's send_at, never early, and pay reads the signal's payload.
func TestSignalsAndTimers(t *testing.T) {
	t.Parallel()
	askForApproval := func(context.Context, *workflow.StepContext) (any, error) { return "asked", nil }
	pay := func(_ context.Context, sc *workflow.StepContext) (any, error) {
		var v struct {
			By string `json:"by"`
		}
		if err := sc.DecodeOutput("approval", &v); err != nil {
			return nil, err
		}
		return "paid, approved by " + v.By, nil
	}
	def :=
		// snippet: go-signals
		workflow.Definition{Name: "refund", Steps: []workflow.Step{
			{Name: "request", Run: askForApproval},
			{Name: "approval", Await: &workflow.Await{Signal: "approved", Timeout: 48 * time.Hour}},
			{Name: "cool_off", Sleep: &workflow.Sleep{For: 10 * time.Minute}},
			{Name: "send", Sleep: &workflow.Sleep{Until: func(sc *workflow.StepContext) (time.Time, error) {
				var in struct {
					SendAt time.Time `json:"send_at"`
				}
				if err := sc.DecodeInput(&in); err != nil {
					return time.Time{}, err
				}
				return in.SendAt, nil
			}}},
			{Name: "pay", Run: pay}, // sc.DecodeOutput("approval", &v) reads the signal's payload
		}}
	// end snippet

	env := workflowtest.New(t, def)
	t0 := env.Now()
	sendAt := t0.Add(time.Hour)
	run, err := env.Start("refund", map[string]time.Time{"send_at": sendAt}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waiting := func(want workflow.WaitingFor) {
		t.Helper()
		r, err := env.Get(run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if w := r.WaitingFor; w == nil || w.Signal != want.Signal || w.Timer != want.Timer || w.Until == nil || !w.Until.Equal(*want.Until) {
			t.Fatalf("at %s the run (%s, at %s) waits for %+v, want %+v", env.Now().Sub(t0), r.Status, r.CurrentStep, w, want)
		}
	}
	at := func(d time.Duration) *time.Time { u := t0.Add(d); return &u }
	waiting(workflow.WaitingFor{Signal: "approved", Until: at(48 * time.Hour)})
	if _, err := env.Signal(run.ID, "approved", map[string]string{"by": "ann"}); err != nil {
		t.Fatal(err)
	}
	waiting(workflow.WaitingFor{Timer: true, Until: at(10 * time.Minute)})
	if err := env.Advance(10 * time.Minute); err != nil {
		t.Fatal(err)
	}
	waiting(workflow.WaitingFor{Timer: true, Until: &sendAt})
	if err := env.AdvanceTo(sendAt.Add(-time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	waiting(workflow.WaitingFor{Timer: true, Until: &sendAt})
	if err := env.AdvanceTo(sendAt); err != nil {
		t.Fatal(err)
	}
	r := env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
	var paid string
	env.RequireOutput(t, run.ID, "pay", &paid)
	if paid != "paid, approved by ann" || !r.Step("pay").StartedAt.Equal(sendAt) {
		t.Errorf("pay: %q at %v, want %q at send_at %v", paid, r.Step("pay").StartedAt, "paid, approved by ann", sendAt)
	}
}

// TestCircuitBreaker runs the breaker snippet on the fake clock: five
// transient failures in a row open it for 20s, the attempt due meanwhile
// is deferred, a failed probe doubles the cooldown, and a probe that
// succeeds closes it.
func TestCircuitBreaker(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	var up atomic.Bool
	billing := func(context.Context, *workflow.StepContext) (any, error) {
		calls.Add(1)
		if !up.Load() {
			return nil, workflow.Transient(errors.New("billing: 503"))
		}
		return "charged", nil
	}
	def := workflow.Definition{
		Name:  "charge",
		Steps: []workflow.Step{{Name: "charge", Run: billing, Policy: workflow.Policy{MaxAttempts: 10}}},
		// snippet: go-breaker
		Policy: workflow.Policy{CircuitBreaker: &workflow.CircuitBreaker{
			Name: "billing", FailureThreshold: 5, Window: 30 * time.Second, // 5 transient failures in a row
			Cooldown: 20 * time.Second, MaxCooldown: 5 * time.Minute, // open for 20s, doubling per failed probe
		}},
		// end snippet
	}
	env := workflowtest.New(t, def)
	breaker := func() workflow.BreakerState {
		t.Helper()
		bs, err := env.Client().Breakers(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if b.Name == "billing" {
				return b
			}
		}
		t.Fatalf("no breaker billing in %+v", bs)
		return workflow.BreakerState{}
	}
	next := func() {
		t.Helper()
		due, ok, err := env.NextDue()
		if err != nil || !ok {
			t.Fatalf("nothing due (%v) after %d calls", err, calls.Load())
		}
		if err := env.AdvanceTo(due); err != nil {
			t.Fatal(err)
		}
	}

	run, err := env.Start("charge", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for calls.Load() < 5 {
		if b := breaker(); b.State != "closed" {
			t.Fatalf("after %d failures the breaker is %s", calls.Load(), b.State)
		}
		next()
	}
	opened := env.Now()
	b := breaker()
	if b.State != "open" || b.Cooldown != 20*time.Second || b.OpenUntil == nil || !b.OpenUntil.Equal(opened.Add(20*time.Second)) {
		t.Fatalf("after 5 failures: %+v, want open for 20s from %v", b, opened)
	}
	next() // the retry due while it is open
	if calls.Load() != 5 {
		t.Fatalf("an attempt ran while the breaker was open")
	}
	env.RequireEvent(t, run.ID, "attempt_deferred", "charge")
	for env.Now().Before(opened.Add(20 * time.Second)) {
		next()
	}
	if calls.Load() != 6 || !env.Now().Equal(opened.Add(20*time.Second)) {
		t.Fatalf("%d calls by %v: want the probe, the 6th, at the end of the cooldown", calls.Load(), env.Now().Sub(opened))
	}
	if b := breaker(); b.State != "open" || b.Cooldown != 40*time.Second {
		t.Fatalf("after a failed probe: %+v, want open for 40s", b)
	}
	up.Store(true)
	if _, err := env.RunUntilDone(run.ID); err != nil {
		t.Fatal(err)
	}
	env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
	if b := breaker(); b.State != "closed" || calls.Load() != 7 {
		t.Errorf("after the probe that succeeded (call %d): %+v, want closed", calls.Load(), b)
	}
}

// job is what the loops snippet's api.Job returns.
type job struct {
	Status string `json:"status"`
}

// TestLoops runs the snooze-and-goto snippet on the fake clock: wait_ready
// snoozes twice, 30s each, in its first attempt, until the job is done;
// check's first visit goes back to fetch, and the second pass succeeds.
func TestLoops(t *testing.T) {
	t.Parallel()
	var jobCalls, checks atomic.Int32
	api := struct {
		Job func(ctx context.Context, id string) (job, error)
	}{Job: func(_ context.Context, id string) (job, error) {
		if id != "job-7" {
			return job{}, workflow.Permanent(fmt.Errorf("no job %q", id))
		}
		if jobCalls.Add(1) <= 2 {
			return job{Status: "running"}, nil
		}
		return job{Status: "done"}, nil
	}}
	id := "job-7"
	valid := func(*workflow.StepContext) bool { return checks.Add(1) > 1 }
	var fetches atomic.Int32
	def := workflow.Definition{Name: "poll", Policy: workflow.Policy{MaxIterations: 20}, Steps: []workflow.Step{
		{Name: "fetch", Run: func(context.Context, *workflow.StepContext) (any, error) { return fetches.Add(1), nil }},
		// snippet: go-loops
		{Name: "wait_ready", Run: func(ctx context.Context, _ *workflow.StepContext) (any, error) {
			job, err := api.Job(ctx, id)
			if err != nil {
				return nil, err
			}
			if job.Status != "done" {
				return nil, workflow.Snooze(30 * time.Second) // the same attempt runs again in 30s
			}
			return job, nil
		}},
		{Name: "check", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
			if !valid(sc) {
				return nil, workflow.Goto("fetch") // fetch and the steps after it run again
			}
			return "ok", nil
		}},
		// end snippet
	}}
	env := workflowtest.New(t, def)
	t0 := env.Now()
	run, err := env.Start("poll", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if run, err = env.RunUntilDone(run.ID); err != nil {
		t.Fatal(err)
	}
	env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
	evs, err := env.Events(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var snoozed []int
	for _, ev := range evs {
		if ev.Type == "step_snoozed" {
			snoozed = append(snoozed, ev.Attempt)
		}
	}
	var got job
	env.RequireOutput(t, run.ID, "wait_ready", &got)
	if !slices.Equal(snoozed, []int{1, 1}) || run.Gotos != 1 || fetches.Load() != 2 || jobCalls.Load() != 4 ||
		got.Status != "done" || env.Now().Sub(t0) != time.Minute {
		t.Errorf("snoozes in attempts %v, %d gotos, %d fetches, %d job calls, output %+v, %s on the clock;"+
			" want [1 1], 1, 2, 4, done, 1m0s\n%s", snoozed, run.Gotos, fetches.Load(), jobCalls.Load(), got,
			env.Now().Sub(t0), workflowtest.FormatEvents(evs))
	}
}

// The saga snippet's steps: a room, a card charge and a voucher.
var (
	bookRoom = func(context.Context, *workflow.StepContext) (any, error) { return "room-12", nil }
	charge   = func(context.Context, *workflow.StepContext) (any, error) { return "ch_1", nil }
	// releaseRoom undoes bookRoom: it returns the room it released.
	releaseRoom = func(_ context.Context, sc *workflow.StepContext) (any, error) {
		var room string
		if err := json.Unmarshal(sc.Compensation.Output, &room); err != nil {
			return nil, err
		}
		return "released " + room, nil
	}
	sendVoucher = func(context.Context, *workflow.StepContext) (any, error) { return "sent", nil }
	// payments.Refund returns what it refunded, and the idempotency key.
	payments = struct {
		Refund func(ctx context.Context, chargeID, idempotencyKey string) (any, error)
	}{Refund: func(_ context.Context, chargeID, key string) (any, error) {
		return map[string]string{"refunded": chargeID, "key": key}, nil
	}}
)

// snippet: go-saga
var tripWorkflow = workflow.Definition{
	Name:      "trip",
	OnFailure: workflow.FailureCompensate, // default FailureStop: fail and wait for an operator
	Steps: []workflow.Step{
		{Name: "book_room", Run: bookRoom, Compensate: releaseRoom},
		{Name: "charge_card", Run: charge, Compensate: refund,
			CompensatePolicy: workflow.Policy{MaxAttempts: 10}}, // the refund's own retries
		{Name: "send_voucher", Run: sendVoucher},
	},
}

func refund(ctx context.Context, sc *workflow.StepContext) (any, error) {
	var chargeID string
	if err := sc.DecodeOutput("charge_card", &chargeID); err != nil { // the step's checkpoint
		return nil, err
	}
	// sc.Compensation: the step undone, its output, and the run's FailureCode and FailureReason.
	return payments.Refund(ctx, chargeID, sc.IdempotencyKey)
}

// end snippet

// TestSaga runs the saga snippet: send_voucher fails for good, so the
// refund (retried once) then the room's release run, last first, and the
// run ends compensated, keeping its failure.
func TestSaga(t *testing.T) {
	t.Parallel()
	env := workflowtest.New(t, tripWorkflow)
	env.FailStep("send_voucher", 1, workflow.Permanent(errors.New("vouchers: refused")))
	env.FailStep("compensate:charge_card", 1, workflow.Transient(errors.New("payments: timeout")))
	run, err := env.Start("trip", map[string]int{"guests": 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if run, err = env.RunUntilDone(run.ID); err != nil {
		t.Fatal(err)
	}
	if run.Status != workflow.StatusCompensated || run.FailureCode != workflow.CodePermanentError {
		t.Fatalf("run: %s (%s), want compensated (permanent_error)", run.Status, run.FailureCode)
	}
	refunded := run.Step("charge_card").Compensation
	var out map[string]string
	if err := json.Unmarshal(refunded.Output, &out); err != nil {
		t.Fatalf("the refund's output %s: %v", refunded.Output, err)
	}
	if want := run.ID + ":compensate:charge_card:2"; refunded.Status != workflow.StepSucceeded || refunded.Attempts != 2 ||
		out["refunded"] != "ch_1" || out["key"] != want {
		t.Errorf("the refund: %s after %d attempts, output %s; want succeeded after 2, ch_1 refunded with key %s",
			refunded.Status, refunded.Attempts, refunded.Output, want)
	}
	var released string
	if err := json.Unmarshal(run.Step("book_room").Compensation.Output, &released); err != nil || released != "released room-12" {
		t.Errorf("the room's release: %q (%v)", released, err)
	}
	evs, err := env.Events(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, ev := range evs {
		if ev.Type == "compensation_succeeded" {
			order = append(order, ev.Step)
		}
	}
	if !slices.Equal(order, []string{"charge_card", "book_room"}) {
		t.Errorf("compensations succeeded in the order %v, want the charge's, then the room's", order)
	}
}

// TestInline runs the inline snippet: the worker that finished a step
// begins the next in the same task, so three steps take one task.
func TestInline(t *testing.T) {
	t.Parallel()
	step := func(name string) workflow.Step {
		return workflow.Step{Name: name, Run: func(context.Context, *workflow.StepContext) (any, error) { return name, nil }}
	}
	steps := []workflow.Step{step("read"), step("parse"), step("store")}

	// snippet: go-inline
	def := workflow.Definition{Name: "ingest", Inline: true, Steps: steps}
	// end snippet

	env := workflowtest.New(t, def)
	run, err := env.Start("ingest", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
	evs, err := env.Events(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var inline []string
	for _, ev := range evs {
		if ev.Type == "attempt_started" {
			inline = append(inline, ev.Step+"="+ev.Details["inline"])
		}
	}
	if !slices.Equal(inline, []string{"read=", "parse=1", "store=1"}) {
		t.Errorf("attempts started (step=inline): %v, want read, then parse and store inline\n%s", inline, workflowtest.FormatEvents(evs))
	}
}

// TestOutbox runs the outbox snippet: with Redis stopped (signup published
// before), Start queues the run in the file and returns its ID; once Redis
// is back, the flush creates the run, and a worker runs it.
func TestOutbox(t *testing.T) {
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	rdb := srv.Client(t)
	quietDefaultLogger(t) // the snippet's client logs through slog.Default()
	ran := make(chan string, 1)
	signup := workflow.Definition{Name: "signup", Steps: []workflow.Step{
		{Name: "create_account", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
			ran <- sc.RunID
			return "acct-1", nil
		}},
	}}
	cfg := workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{Logger: testkit.Logger(t)}}
	engine, err := workflow.NewEngine(rdb, cfg.EngineConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.Register(signup); err != nil {
		t.Fatal(err)
	}
	if err := engine.Publish(t.Context()); err != nil { // as a worker would
		t.Fatal(err)
	}
	srv.Stop(t)

	ctx := t.Context()
	input := map[string]string{"email": "a@example.com"}
	offline := func(outboxPath string) error {
		// snippet: go-outbox (outboxPath => "/var/lib/app/cairn-outbox.db")
		client, err := workflow.OpenClient(rdb, workflow.ClientConfig{Outbox: outboxPath})
		if err != nil {
			return err // workflow.ErrOutboxLocked: another process has the file open
		}
		defer client.Close() // stops the flusher and closes the file
		run, err := client.Start(ctx, "signup", input, &workflow.StartOptions{IdempotencyKey: "signup-a@example.com"})
		// Redis unreachable: err == nil, run.Queued == true, run.ID is the ID the run will have.
		// The outbox full: errors.Is(err, workflow.ErrOutboxFull); nothing was queued.
		// end snippet
		if err != nil {
			return fmt.Errorf("a Start with Redis stopped: %w", err)
		}
		if !run.Queued || run.ID == "" {
			return fmt.Errorf("a Start with Redis stopped returned %+v, want a queued run with its ID", run)
		}
		srv.Restart(t)
		testkit.StartWorker(t, rdb, cfg, signup)
		if _, err := client.FlushOutbox(ctx); err != nil {
			return err
		}
		select {
		case id := <-ran:
			if id != run.ID {
				return fmt.Errorf("run %s ran, want the queued %s", id, run.ID)
			}
		case <-time.After(deadline):
			return errors.New("the queued run did not run")
		}
		if got := testkit.WaitRun(t, client, run.ID, deadline); got.Status != workflow.StatusSucceeded || got.Queued ||
			got.IdempotencyKey != "signup-a@example.com" {
			return fmt.Errorf("the queued run: %s, queued %t, key %q; want succeeded, sent, signup-a@example.com",
				got.Status, got.Queued, got.IdempotencyKey)
		}
		return nil
	}
	if err := offline(filepath.Join(t.TempDir(), "outbox.db")); err != nil {
		t.Fatal(err)
	}
}
