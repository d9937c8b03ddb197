package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	randv2 "math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// DefaultQueue is the queue of step tasks and workflow state by default.
const DefaultQueue = "workflows"

// EngineConfig configures an Engine. A zero field takes the default given in
// its comment.
type EngineConfig struct {
	// Queue is the asynq queue of step tasks; it is also the hash tag of
	// the workflow state, so each queue's state lives in one Redis Cluster
	// slot. Default DefaultQueue.
	Queue string
	// Defaults is the global policy, overridden per workflow and per step;
	// unset fields take DefaultPolicy.
	Defaults core.Policy
	// Retention is how long a finished run (succeeded, failed, cancelled)
	// is kept before it expires. Default 7 days.
	Retention time.Duration
	// FenceTTL is how long a running attempt owns its step without
	// renewing; it is renewed every FenceTTL/3 while the step runs. A
	// delivery, or the reconciler's sweep, that finds an expired fence
	// treats the attempt's worker as crashed: a killed worker's step
	// begins again on another worker within about FenceTTL +
	// ReconcilerConfig.SweepInterval. A worker that cannot renew it (Redis
	// unreachable for about 2/3 of it) stops the step and hands it back.
	// Default 3s (a renewal a second per running step).
	FenceTTL time.Duration
	// MaxEarlyWait: asynq may deliver a retry up to a second early (it
	// stores due times in whole seconds). A delivery at most this early
	// waits in the handler for the due time; an earlier one is handed back
	// to asynq for later. Default 2s.
	MaxEarlyWait time.Duration
	// StateWriteTimeout bounds how long the engine keeps retrying a state
	// write (checkpoint, retry schedule) or an enqueue while Redis is
	// unreachable. Default 2m.
	StateWriteTimeout time.Duration
	// Clock tells the time. Default SystemClock.
	Clock core.Clock
	// Logger receives the engine's structured logs. Default slog.Default().
	Logger *slog.Logger
	// Rand returns uniform numbers in [0, 1) for retry jitter. Default
	// math/rand/v2.Float64.
	Rand func() float64
	// Observer is told of runs, attempts and retries, for metrics (see
	// package metrics). Default NopObserver.
	Observer core.Observer
	// TracerProvider, when set, traces runs and attempts with OpenTelemetry
	// (see tracing.go: a span per attempt, in whose context the step body
	// runs, and a span per run, in the trace of the context Start was
	// given). Nil: no tracing, at no cost.
	TracerProvider trace.TracerProvider
	// LatencyFlushInterval is how often a Worker writes the step latencies
	// its engine counted (each attempt's run time and wait for a worker,
	// in memory) to Redis, one pipeline a flush, for Client.Latency; a
	// worker killed loses at most this much of them. Negative: latencies
	// are not counted. Default 5s.
	LatencyFlushInterval time.Duration
}

func (c EngineConfig) withDefaults() EngineConfig {
	if c.Queue == "" {
		c.Queue = DefaultQueue
	}
	if c.Retention == 0 {
		c.Retention = 7 * 24 * time.Hour
	}
	if c.FenceTTL == 0 {
		c.FenceTTL = 3 * time.Second
	}
	if c.MaxEarlyWait == 0 {
		c.MaxEarlyWait = 2 * time.Second
	}
	if c.StateWriteTimeout == 0 {
		c.StateWriteTimeout = 2 * time.Minute
	}
	if c.Clock == nil {
		c.Clock = core.SystemClock
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Rand == nil {
		c.Rand = randv2.Float64
	}
	if c.LatencyFlushInterval == 0 {
		c.LatencyFlushInterval = 5 * time.Second
	}
	c.Observer = core.OrNop(c.Observer)
	if t := newTracer(c.TracerProvider); t != nil {
		c.Observer = tracingObserver{Observer: c.Observer, t: t, clock: c.Clock}
	}
	return c
}

// Engine executes step attempts: it is the asynq handler of the step task
// type (see tasks.TypeStep). Most programs use a Worker, which runs an
// Engine on an asynq server; use an Engine directly to mount it on an asynq
// server of your own.
type Engine struct {
	cfg EngineConfig
	// deps: the store, the dispatcher, the clock and the retries of state
	// writes, shared with the engine's reconcilers (see NewReconciler).
	*deps
	log *slog.Logger

	mu   sync.RWMutex
	defs map[string]*registered

	// policies caches stored step policies (JSON -> effective Policy):
	// there are few distinct ones, and each attempt would parse its own.
	policies sync.Map
	// tracing is nil unless EngineConfig.TracerProvider is set.
	tracing *tracer
	// latency counts the step latencies (latency.go); nil when
	// EngineConfig.LatencyFlushInterval is negative.
	latency *latencyRecorder
	// id is this worker's identity (host:pid:random, newWorkerID), recorded
	// with each attempt it begins (the journal's attempt_started, detail
	// worker) and, on the own dequeue, the name of its heartbeat.
	id string
}

type registered struct {
	def   core.Definition
	snap  core.Snapshot
	steps map[string]core.StepFunc
}

// NewEngine returns an engine that keeps its state in rdb.
func NewEngine(rdb redis.UniversalClient, cfg EngineConfig) (*Engine, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Defaults.Validate(); err != nil {
		return nil, fmt.Errorf("global policy: %w", err)
	}
	e := &Engine{
		cfg:     cfg,
		deps:    newDeps(rdb, cfg),
		log:     cfg.Logger,
		defs:    make(map[string]*registered),
		tracing: newTracer(cfg.TracerProvider),
		id:      newWorkerID(),
	}
	if cfg.LatencyFlushInterval > 0 {
		e.latency = newLatencyRecorder(e.store, cfg.Clock, cfg.Logger.With("component", "latency"))
		e.cfg.Observer = latencyObserver{Observer: cfg.Observer, rec: e.latency, clock: cfg.Clock}
	}
	// At the fetch interval AsynqConfig sets (a Worker sets its own:
	// NewWorker).
	e.disp.timers = newPromoter(rdb, cfg.Queue, cfg.Clock, cfg.Logger.With("component", "timers"),
		promoteLead(asynqTaskCheckInterval, cfg.MaxEarlyWait))
	return e, nil
}

// Register adds workflow definitions to the engine. Publish makes them
// startable by clients.
func (e *Engine) Register(defs ...core.Definition) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range defs {
		snap, err := core.Resolve(&d, e.cfg.Defaults)
		if err != nil {
			return err
		}
		if _, dup := e.defs[d.Name]; dup {
			return fmt.Errorf("%w %q: registered twice", core.ErrInvalidDefinition, d.Name)
		}
		r := &registered{def: d, snap: snap, steps: make(map[string]core.StepFunc, len(d.Steps))}
		for _, s := range d.Steps {
			r.steps[s.Name] = s.Run
			if s.Run == nil {
				r.steps[s.Name] = waitBody // an await or a sleep (engine_waits.go)
			}
			if s.Compensate != nil {
				r.steps[core.CompensationPrefix+s.Name] = s.Compensate
			}
		}
		e.defs[d.Name] = r
	}
	return nil
}

// Publish writes the registered definitions, with their effective policies,
// to Redis, where Client.Start (in any process) finds them: each one's
// snapshot, and its version with the template of its runs' fixed fields
// (retrystate.PublishDefinitions), stored once per version.
func (e *Engine) Publish(ctx context.Context) error {
	if err := e.store.CheckFormat(ctx, true); err != nil {
		return err
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]retrystate.PublishedDefinition, 0, len(e.defs))
	for _, r := range e.defs {
		pd, err := r.snap.Published()
		if err != nil {
			return err
		}
		out = append(out, pd)
	}
	_, err := e.store.PublishDefinitions(ctx, out)
	return err
}

func (e *Engine) stepFunc(workflow, step string) core.StepFunc {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if r := e.defs[workflow]; r != nil {
		return r.steps[step]
	}
	return nil
}

// redeliverError asks asynq to deliver the same task again after a delay
// (see RetryDelay). It never consumes the step's retry budget.
type redeliverError struct {
	after time.Duration
	why   string
}

func (e *redeliverError) Error() string {
	return fmt.Sprintf("cairn: deliver again in %s: %s", e.after, e.why)
}

// RetryDelay is the asynq RetryDelayFunc for servers that run an Engine:
// a delivery the engine hands back (not yet due, or owned by a live
// attempt) comes back when it asked; other asynq-level failures (Redis
// unreachable while saving state) back off from 1s to 30s.
func RetryDelay(n int, err error, _ *asynq.Task) time.Duration {
	if r, ok := errors.AsType[*redeliverError](err); ok {
		return max(r.after, 100*time.Millisecond)
	}
	return min(time.Second<<min(n, 5), 30*time.Second)
}

// IsFailure is the asynq IsFailure func for servers that run an Engine: a
// delivery handed back on purpose is not counted as a failure.
func IsFailure(err error) bool {
	_, redeliver := errors.AsType[*redeliverError](err)
	return err != nil && !redeliver
}

// ProcessTask handles one delivery of a step attempt's task: it begins the
// attempt (begin), settles a delivery that must not run the body
// (notStarted), and runs the body and the steps an inline workflow
// continues with (runChain).
func (e *Engine) ProcessTask(ctx context.Context, t *asynq.Task) error {
	taskID, _ := asynq.GetTaskID(ctx)
	return e.processStep(ctx, taskID, t.Payload(), tasks.DueOf(t.Headers()))
}

// ProcessStep is ProcessTask for a processor that is not asynq's (a
// Worker's own dequeue): taskID is the delivered task's ID ("": the one the
// payload names), payload the task's. Its error means what ProcessTask's
// means to asynq's processor.
func (e *Engine) ProcessStep(ctx context.Context, taskID string, payload []byte) error {
	return e.processStep(ctx, taskID, payload, time.Time{})
}

// processStep is ProcessStep of a task whose message said its attempt was
// due at due (tasks.HeaderDue; zero: it did not say).
func (e *Engine) processStep(ctx context.Context, taskID string, payload []byte, due time.Time) error {
	p, err := tasks.Decode(payload)
	if err != nil {
		e.log.Error("dropping a malformed step task", core.AttrError, err)
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	if taskID == "" {
		taskID = p.ID()
	}
	log := core.LineLogger{L: e.log, Attrs: []any{core.AttrRunID, p.RunID, core.AttrWorkflow, p.Workflow, core.AttrStep, p.Name,
		core.AttrAttempt, p.Attempt, core.AttrTaskID, taskID}}
	fn := e.stepFunc(p.Workflow, p.Name)
	if fn == nil {
		log.Error("this worker has no handler for the step; asynq will deliver the task again (is a worker of another version running?)")
		return &redeliverError{after: 30 * time.Second, why: "no handler registered for " + p.Workflow + "/" + p.Name}
	}
	token := core.NewToken()
	b, begunAt, err := e.begin(ctx, log, p, taskID, token)
	if err != nil {
		return err
	}
	if b.Outcome == retrystate.OutcomeEarly && e.ranByAsynq(ctx, log, p, taskID) {
		// asynq's RunTask (asynqmon's "Run") moved a scheduled retry's
		// task: its retry is due now (engine_retrynow.go).
		if b, begunAt, err = e.begin(ctx, log, p, taskID, token); err != nil {
			return err
		}
	}
	if b.Outcome != retrystate.OutcomeOK {
		return e.notStarted(ctx, log, p, taskID, b)
	}
	if !due.IsZero() && !b.Started.Crashed && b.Started.Attempt == p.Attempt {
		// The wait for a worker: from the dispatch's due time to the begin
		// that took it (another host's clock may put it after: none).
		e.latency.record(retrystate.LatencyWait, p.Workflow, p.Name, max(0, begunAt.Sub(due)), begunAt)
	}
	return e.runChain(ctx, log, p, token, fn, b.Started, begunAt)
}

// begin begins the attempt of delivery p under token, waiting out a short
// early delivery; begunAt is the time the begin that answered was asked at:
// the fence it took expires a FenceTTL after it, however late the answer
// came.
func (e *Engine) begin(ctx context.Context, log core.LineLogger, p tasks.Step, taskID, token string) (
	b retrystate.BeginResult, begunAt time.Time, err error) {
	for {
		// A begin whose reply is lost may have taken the fence all the
		// same: asking again with the same token gets that begin's answer
		// (begin.lua), where a new delivery would find a fence nobody
		// holds and, once it expired, count a crash.
		err = e.retry(ctx, log, "begin", func(ctx context.Context) (err error) {
			begunAt = e.cfg.Clock.Now()
			b, err = e.store.Begin(ctx, retrystate.BeginParams{
				RunID: p.RunID, Index: p.Index, TaskID: taskID, Token: token,
				FenceTTL: e.cfg.FenceTTL, Retention: e.cfg.Retention, Now: begunAt, Trace: e.tracing != nil,
				Worker: e.id,
			})
			return err
		})
		if err != nil {
			log.Error("could not begin the attempt; asynq will deliver the task again", core.AttrError, err)
			return b, begunAt, err
		}
		if b.Outcome != retrystate.OutcomeEarly || b.Wait > e.cfg.MaxEarlyWait {
			return b, begunAt, nil
		}
		log.Debug("attempt delivered before its due time; waiting", core.AttrDelay, b.Wait)
		if err := core.SleepContext(ctx, b.Wait); err != nil {
			return b, begunAt, err
		}
	}
}

// notStarted settles a delivery whose begin answered anything but
// OutcomeOK: acknowledged, handed back to asynq, deferred, failed, or a
// wait's start or wake-up.
func (e *Engine) notStarted(ctx context.Context, log core.LineLogger, p tasks.Step, taskID string, b retrystate.BeginResult) error {
	switch b.Outcome {
	case retrystate.OutcomeGone:
		log.Warn("acknowledged a task of an unknown run")
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeIgnored, 0)
		return nil
	case retrystate.OutcomeEnded:
		log.Info("acknowledged a task of a finished run", "status", b.RunStatus)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeIgnored, 0)
		return nil
	case retrystate.OutcomeStale:
		log.Info("acknowledged a stale or duplicate delivery")
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeIgnored, 0)
		if b.Dispatch != nil {
			// The run waits for another task; make sure it exists (a no-op
			// when it does). This repairs an enqueue lost after a state write.
			if err := e.disp.Enqueue(ctx, p.RunID, p.Workflow, *b.Dispatch); err != nil {
				log.Warn("could not make sure the current step's task exists", core.AttrError, err)
			}
		}
		return nil
	case retrystate.OutcomePaused:
		// The run is paused: the dispatch is parked in the run, and its
		// resume writes the task again.
		log.Info("acknowledged a delivery of a paused run; its dispatch waits for the resume")
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeIgnored, 0)
		return nil
	case retrystate.OutcomeBusy:
		log.Info("another delivery of this attempt is running; deferring", core.AttrDelay, b.Wait)
		return &redeliverError{after: b.Wait + 500*time.Millisecond, why: "attempt running elsewhere"}
	case retrystate.OutcomeEarly:
		return e.early(log, b.Wait)
	case retrystate.OutcomeDeferred:
		// The step's circuit breaker is open: the attempt waits, under a
		// new dispatch, spending no budget. If this enqueue is lost, the
		// reconciler re-creates it (the run is in the scheduled index).
		log.Info("circuit breaker open; attempt deferred", "until", b.Dispatch.DueAt)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeDeferred, 0)
		if err := e.disp.Enqueue(ctx, p.RunID, p.Workflow, *b.Dispatch); err != nil {
			log.Warn("could not enqueue the deferred attempt; the reconciler will", core.AttrError, err)
		}
		return nil
	case retrystate.OutcomeRunFailed:
		e.runFailed(ctx, log, p.RunID, p.Workflow, b.RunFailure, "the attempt could not start")
		return nil
	case retrystate.OutcomeWait, retrystate.OutcomeWake:
		// An await or a sleep (engine_waits.go).
		return e.wait(ctx, log, p, taskID, b)
	default:
		return fmt.Errorf("begin answered %q: %w", b.Outcome, retrystate.ErrUnexpectedReply)
	}
}

// runChain runs the step body of the attempt begun as st, and the steps an
// inline workflow continues with in this delivery (engine_inline.go).
func (e *Engine) runChain(ctx context.Context, log core.LineLogger, p tasks.Step, token string, fn core.StepFunc,
	st *retrystate.Started, begunAt time.Time) error {
	chain := &inlineChain{since: e.cfg.Clock.Now()}
	for {
		next, err := e.execute(ctx, log, p, token, fn, st, begunAt, chain)
		if next == nil {
			return err
		}
		if next.started.Trace == "" {
			// The complete that began it inline does not read the run's
			// trace: it is the delivery's.
			next.started.Trace = st.Trace
		}
		log, p, token, fn, st, begunAt = next.log, next.p, next.token, next.fn, next.started, next.begunAt
		chain.steps++
	}
}

// execute runs the step body of an attempt begun at begunAt and records its
// outcome.
//
// It returns the next step to run in the same delivery when the workflow
// continues inline and its complete began that step (engine_inline.go).
func (e *Engine) execute(ctx context.Context, log core.LineLogger, p tasks.Step, token string, fn core.StepFunc, b *retrystate.Started, begunAt time.Time, chain *inlineChain) (*inlineStep, error) {
	pol := e.policy(log, b.Policy)
	if late := e.cfg.Clock.Now().Sub(begunAt); late >= e.cfg.FenceTTL {
		// The begin answered after the fence it took had expired (Redis was
		// frozen or unreachable while it waited): the step may be another
		// delivery's by now. Hand it back unrun, as a heartbeat that cannot
		// renew in time does: no budget is spent.
		log.Warn("the attempt's begin answered after its fence expired; handing the attempt back unrun", core.AttrDelay, late)
		return nil, e.release(ctx, log, p, token, pol.StepTimeout, 0)
	}
	if e.tracing != nil {
		// The attempt's span (tracing.go): the step body runs in it, and
		// the observer's call with the attempt's outcome ends it.
		ctx = e.tracing.startAttempt(ctx, b.Trace, p)
	}
	if b.Crashed {
		log.Warn("resuming an attempt whose worker crashed", "crashes", b.Crashes)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeCrashed, 0)
	} else {
		log.Debug("attempt started")
		if p.Index == 0 && b.Attempt == 1 && !b.Snoozed {
			e.cfg.Observer.RunStarted(ctx, p.RunID, p.Workflow)
		}
	}

	sc := &core.StepContext{
		RunID: p.RunID, Workflow: p.Workflow, Step: p.Name, Index: p.Index, Attempt: b.Attempt,
		IdempotencyKey: core.IdempotencyKey(p.RunID, p.Name, b.Attempt),
		Input:          json.RawMessage(b.Input),
		Compensation:   compensationOf(b.Compensation), // a compensation's attempt (engine_sagas.go)
	}
	outputs := make(map[string]json.RawMessage, len(b.Earlier))
	for _, c := range b.Earlier {
		if c.Output != "" {
			outputs[c.Name] = json.RawMessage(c.Output)
		}
	}
	core.SetStepRuntime(sc, log, outputs)

	stepCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := e.cfg.Clock.Now()
	// One deadline: the step timeout or the run's deadline, whichever is first.
	deadline := b.Deadline
	if pol.StepTimeout > 0 && (deadline.IsZero() || start.Add(pol.StepTimeout).Before(deadline)) {
		deadline = start.Add(pol.StepTimeout)
	}
	if !deadline.IsZero() {
		var stop context.CancelFunc
		stepCtx, stop = context.WithDeadline(stepCtx, deadline)
		defer stop()
	}
	stopHeartbeat := e.heartbeat(stepCtx, cancel, log, p, token, begunAt)
	out, runErr := call(stepCtx, fn, sc)
	cause := context.Cause(stepCtx)
	cancel(nil)
	stopHeartbeat()
	elapsed := e.cfg.Clock.Now().Sub(start)
	if runErr != nil && errors.Is(cause, errUnrenewable) {
		// This worker stopped the step itself: not a failure of the step.
		return nil, e.release(ctx, log, p, token, pol.StepTimeout, elapsed)
	}

	var output []byte
	if runErr == nil {
		var err error
		if output, err = json.Marshal(out); err != nil {
			runErr = core.Permanent(fmt.Errorf("step output does not marshal to JSON: %w", err))
		}
	}
	if runErr == nil {
		return e.complete(ctx, log, p, token, string(output), b, elapsed, chain)
	}
	// A loop (loops.go): requests, not failures.
	if d, ok := core.SnoozeOf(runErr); ok {
		return nil, e.snooze(ctx, log, p, token, pol, d, elapsed)
	}
	if target, ok := core.GotoOf(runErr); ok {
		if b.Compensation == nil {
			return nil, e.jump(ctx, log, p, token, target, elapsed)
		}
		runErr = compensationGoto(target)
	}
	return nil, e.fail(ctx, log, p, token, pol, b.Used, runErr, elapsed)
}

func (e *Engine) complete(ctx context.Context, log core.Logger, p tasks.Step, token, output string, b *retrystate.Started, elapsed time.Duration, chain *inlineChain) (*inlineStep, error) {
	args := retrystate.CompleteParams{RunID: p.RunID, Index: p.Index, Token: token, Output: output,
		Retention: e.cfg.Retention}
	next := b.Next
	var np tasks.Step
	if next != nil {
		// The checkpoint script creates the next step's task itself.
		np = tasks.Step{RunID: p.RunID, Workflow: p.Workflow, Index: next.Index, Name: next.Name, Attempt: next.Attempt}
		args.NextTaskID = np.ID()
		if e.inline(ctx, p, next, chain) {
			// Or begins it, for this delivery to run (engine_inline.go).
			args.InlineToken, args.FenceTTL, args.Worker = core.NewToken(), e.cfg.FenceTTL, e.id
		}
	}
	// The next step's task says when it is due, the checkpoint's time, for
	// the wait its worker counts (latency.go; the message is made with the
	// checkpoint's time, below): not for a step begun inline, which waits
	// for nobody.
	dueHeader := next != nil && e.latency != nil && args.InlineToken == ""
	if next != nil && !dueHeader {
		args.NextMessage = np.AsynqMessage(e.cfg.Queue, next.Timeout)
	}
	// Cairn's own dequeue: the checkpoint that ends the delivery also
	// acknowledges its task (processor.go, stepAck).
	sa := stepAckOf(ctx)
	var res retrystate.CompleteResult
	err := e.persist(ctx, log, "checkpoint", func(ctx context.Context) (err error) {
		args.Now = e.cfg.Clock.Now()
		if dueHeader {
			args.NextMessage = np.AsynqMessageDue(e.cfg.Queue, next.Timeout, args.Now)
		}
		// (Not for a complete that begins the next step inline: the
		// delivery goes on, and its arguments would cost the script for
		// nothing; should the script write the next task instead, the
		// processor acknowledges.)
		if sa != nil && args.InlineToken == "" {
			a := sa.args(args.Now)
			args.Ack = &a
		}
		res, err = e.store.Complete(ctx, args)
		return err
	})
	if err == nil && res.Acked && sa != nil {
		sa.acked.Store(true)
	}
	switch {
	case err != nil:
		log.Error("could not checkpoint the step; the attempt will run again", core.AttrError, err)
		return nil, err
	case res.Outcome == retrystate.OutcomeFenced:
		log.Warn("attempt succeeded but no longer owns its step; result discarded", core.AttrReason, res.Why)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeDiscarded, elapsed)
		return nil, nil
	case res.Outcome == retrystate.OutcomeDone:
		// A first try went through but its reply was lost; the script
		// wrote the next step's task with it, or began it inline.
		log.Info("step succeeded (checkpoint saved by an earlier try whose reply was lost)", core.AttrDuration, elapsed)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeSucceeded, elapsed)
		if res.RunStatus == core.StatusSucceeded {
			e.cfg.Observer.RunFinished(ctx, p.RunID, p.Workflow, core.StatusSucceeded, "")
		}
		if args.InlineToken != "" {
			return e.inlineAgain(ctx, log, p, args, b), nil
		}
		return nil, nil
	case res.Outcome == retrystate.OutcomeRunSucceeded:
		log.Info("step succeeded; run succeeded", core.AttrDuration, elapsed)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeSucceeded, elapsed)
		e.cfg.Observer.RunFinished(ctx, p.RunID, p.Workflow, core.StatusSucceeded, "")
		return nil, nil
	case res.Outcome == retrystate.OutcomeCompensated:
		// The run's last compensation (compdone.lua).
		log.Info("compensation succeeded; run compensated", core.AttrDuration, elapsed)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeSucceeded, elapsed)
		e.cfg.Observer.RunFinished(ctx, p.RunID, p.Workflow, core.StatusCompensated, res.Code)
		return nil, nil
	case res.Outcome == retrystate.OutcomeRunFailed:
		// A compensation that ended a required group's rollback: the run
		// fails (compdone.lua).
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeSucceeded, elapsed)
		e.runFailed(ctx, log, p.RunID, p.Workflow, res.RunFailure, "compensation succeeded; its group is rolled back", core.AttrDuration, elapsed)
		return nil, nil
	case res.Outcome == retrystate.OutcomeInline:
		log.Debug("step succeeded; the next step runs inline", core.AttrDuration, elapsed)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeSucceeded, elapsed)
		return e.inlineStep(p, args, b, output, res), nil
	}
	log.Debug("step succeeded", core.AttrDuration, elapsed)
	e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeSucceeded, elapsed)
	if res.Enqueued {
		return nil, nil
	}
	if err := e.persist(ctx, log, "enqueue next step", func(ctx context.Context) error {
		return e.disp.Enqueue(ctx, p.RunID, p.Workflow, *res.Dispatch)
	}); err != nil {
		// The state names the next task; a redelivery of this one (stale by
		// now) or the reconciler creates it.
		log.Error("could not enqueue the next step", core.AttrError, err, "next_step", res.Dispatch.Name)
		return nil, err
	}
	return nil, nil
}

func (e *Engine) fail(ctx context.Context, log core.Logger, p tasks.Step, token string, pol core.Policy, used int, runErr error, elapsed time.Duration) error {
	c := classify(runErr, pol)
	runErr = c.err // a code in NonRetryableCodes made it permanent
	class := c.class
	delay := c.delay(pol, used, e.cfg.Rand)
	// A retry is the step's next attempt: the fail script writes its task
	// with the retry itself.
	retry := tasks.Step{RunID: p.RunID, Workflow: p.Workflow, Index: p.Index, Name: p.Name, Attempt: p.Attempt + 1}
	args := retrystate.FailParams{RunID: p.RunID, Index: p.Index, Token: token,
		Error: c.message, Class: class, Code: c.code, Delay: delay,
		Retention: e.cfg.Retention, RetryTaskID: retry.ID()}
	if e.latency == nil {
		args.RetryMessage = retry.AsynqMessage(e.cfg.Queue, pol.StepTimeout)
	}
	sa := stepAckOf(ctx) // as complete's
	var res retrystate.FailResult
	err := e.persist(ctx, log, "record failure", func(ctx context.Context) (err error) {
		args.Now = e.cfg.Clock.Now()
		if e.latency != nil {
			// The retry's task says when it is due (latency.go), as fail.lua
			// schedules it: now + delay.
			args.RetryMessage = retry.AsynqMessageDue(e.cfg.Queue, pol.StepTimeout, args.Now.Add(delay))
		}
		if sa != nil {
			a := sa.args(args.Now)
			args.Ack = &a
		}
		res, err = e.store.Fail(ctx, args)
		return err
	})
	if err == nil && res.Acked && sa != nil {
		sa.acked.Store(true)
	}
	switch {
	case err != nil:
		log.Error("could not record the failed attempt; the attempt will run again", core.AttrError, err)
		return err
	case res.Outcome == retrystate.OutcomeFenced:
		log.Info("attempt ended but no longer owns its step; result discarded", core.AttrError, runErr, core.AttrReason, res.Why)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeDiscarded, elapsed)
		return nil
	case res.Outcome == retrystate.OutcomeDone && res.Code == "":
		// A first try went through but its reply was lost; the script
		// wrote the retry's task with it.
		log.Warn("attempt failed; retry scheduled (by an earlier try whose reply was lost)", core.AttrError, runErr,
			core.AttrClass, class, core.AttrDuration, elapsed)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeFailedTransient, elapsed)
		return nil
	case res.Outcome == retrystate.OutcomeDone:
		// The run failed (or compensates) by an earlier try whose reply was
		// lost: that try's reply told the observer nothing.
		log.Error("step failed; the run's failure was recorded by an earlier try whose reply was lost", core.AttrError, runErr,
			core.AttrClass, class, core.AttrCode, res.Code, "status", res.RunStatus, core.AttrDuration, elapsed)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.FailedOutcome(res.Code), elapsed)
		if res.RunStatus.Terminal() {
			e.cfg.Observer.RunFinished(ctx, p.RunID, p.Workflow, res.RunStatus, res.Code)
		}
		return nil
	case res.Outcome == retrystate.OutcomeRunFailed:
		// (The attempt's own outcome: a compensation's failure fails the run
		// with compensation_failed.)
		outcome := core.OutcomeExhausted
		if class == retrystate.ClassPermanent {
			outcome = core.OutcomeFailedPermanent
		}
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, outcome, elapsed)
		e.runFailed(ctx, log, p.RunID, p.Workflow, res.RunFailure, "step failed", core.AttrError, runErr, core.AttrClass, class, core.AttrDuration, elapsed)
		return nil
	}
	// (The retry first: a tracing observer records it on the attempt's
	// span, which the attempt's outcome ends.)
	e.cfg.Observer.RetryScheduled(ctx, p.RunID, p.Workflow, p.Name, delay)
	e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeFailedTransient, elapsed)
	next := *res.Dispatch
	next.Name = p.Name
	log.Warn("attempt failed; retry scheduled", core.AttrError, runErr, core.AttrClass, class, core.AttrDelay, delay,
		core.AttrDueAt, next.DueAt, "next_attempt", next.Attempt, core.AttrDuration, elapsed)
	if res.Enqueued {
		e.disp.scheduled(&next)
		return nil
	}
	if err := e.persist(ctx, log, "enqueue retry", func(ctx context.Context) error {
		return e.disp.Enqueue(ctx, p.RunID, p.Workflow, next)
	}); err != nil {
		log.Error("could not enqueue the retry", core.AttrError, err)
		return err
	}
	return nil
}

// release hands back an attempt this worker stopped because it could not
// renew its fence: the attempt resumes under a new dispatch, spending no
// budget (release.lua).
func (e *Engine) release(ctx context.Context, log core.Logger, p tasks.Step, token string, stepTimeout, elapsed time.Duration) error {
	again := tasks.Step{RunID: p.RunID, Workflow: p.Workflow, Index: p.Index, Name: p.Name, Attempt: p.Attempt, Gen: p.Gen + 1}
	args := retrystate.ReleaseParams{RunID: p.RunID, Index: p.Index, Token: token, TaskID: again.ID(),
		Message: again.AsynqMessage(e.cfg.Queue, stepTimeout)}
	var res retrystate.ReleaseResult
	err := e.persist(ctx, log, "hand back the attempt", func(ctx context.Context) (err error) {
		args.Now = e.cfg.Clock.Now()
		res, err = e.store.Release(ctx, args)
		return err
	})
	switch {
	case err != nil:
		log.Error("could not hand back the interrupted attempt; the reconciler will resume it", core.AttrError, err)
		return err
	case res.Outcome == retrystate.OutcomeFenced:
		log.Info("interrupted attempt already taken over", core.AttrReason, res.Why, core.AttrDuration, elapsed)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeDiscarded, elapsed)
		return nil
	}
	log.Warn("attempt interrupted: its fence could not be renewed; handed back to resume", core.AttrDuration, elapsed)
	e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeInterrupted, elapsed)
	if res.Enqueued {
		return nil
	}
	return e.persist(ctx, log, "enqueue the resumed attempt", func(ctx context.Context) error {
		return e.disp.Enqueue(ctx, p.RunID, p.Workflow, *res.Dispatch)
	})
}

// heartbeat renews the attempt's fence, taken by a begin asked at begunAt,
// every FenceTTL/3 until ctx ends. It cancels the step when the run stops or
// the fence is lost, and when it cannot renew before the fence would expire,
// so that two executions of a step never overlap. Most steps end before the
// first renewal: the renewing goroutine starts only then.
//
// The fence expires a FenceTTL after begunAt, when the begin was asked (the
// "now" the script was handed), not after its answer: a begin that waited out
// a frozen Redis answers with a fence already old, which the reconciler would
// find expired up to FenceTTL/3 before a first renewal counted from the
// answer. The first renewal is due FenceTTL/3 after begunAt, at once if that
// has passed. The returned func stops the heartbeat and waits for it.
func (e *Engine) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, log core.Logger, p tasks.Step, token string, begunAt time.Time) func() {
	every := e.cfg.FenceTTL / 3
	validUntil := begunAt.Add(e.cfg.FenceTTL)
	firstIn := max(begunAt.Add(every).Sub(e.cfg.Clock.Now()), 0)
	done := make(chan struct{})
	timer := time.AfterFunc(firstIn, func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for first := true; ; first = false {
			if !first {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
			if ctx.Err() != nil {
				return
			}
			now := e.cfg.Clock.Now()
			r, err := e.renew(ctx, p, token, now, validUntil)
			switch {
			case err != nil:
				if ctx.Err() != nil {
					return
				}
				if now = e.cfg.Clock.Now(); now.Add(every).After(validUntil) {
					log.Error("cannot renew the attempt's fence before it expires; stopping the step", core.AttrError, err)
					cancel(errUnrenewable)
					return
				}
				log.Warn("could not renew the attempt's fence", core.AttrError, err)
			case r == retrystate.RunStopped:
				log.Info("run stopped while the step ran; cancelling the step")
				cancel(errRunStopped)
				return
			case r == retrystate.FenceLost:
				log.Warn("attempt lost its fence; cancelling the step")
				cancel(errFenceLost)
				return
			default:
				validUntil = now.Add(e.cfg.FenceTTL)
			}
		}
	})
	return func() {
		if timer.Stop() {
			return // never started
		}
		<-done
	}
}

// renew renews the attempt's fence, waiting for the answer no longer than
// until the fence expires (validUntil): a call that hangs on an unreachable
// Redis (reconnects and retries can outlast the fence) must not keep the
// heartbeat from stopping the step in time. A call given up on finishes in
// the background.
func (e *Engine) renew(ctx context.Context, p tasks.Step, token string, now, validUntil time.Time) (retrystate.Renewal, error) {
	type result struct {
		r   retrystate.Renewal
		err error
	}
	ch := make(chan result, 1)
	go func() {
		r, err := e.store.Renew(ctx, retrystate.RenewParams{RunID: p.RunID, Index: p.Index, Token: token,
			TTL: e.cfg.FenceTTL, Now: now})
		ch <- result{r, err}
	}()
	t := time.NewTimer(max(validUntil.Sub(now), 0))
	defer t.Stop()
	select {
	case res := <-ch:
		return res.r, res.err
	case <-t.C:
		return retrystate.FenceLost, errRenewTooSlow
	}
}

// policy returns the effective policy of a stored step policy.
func (e *Engine) policy(log core.Logger, stored string) core.Policy {
	if p, ok := e.policies.Load(stored); ok {
		if pol, ok := p.(core.Policy); ok { // always: the cache holds only Policy values
			return pol
		}
	}
	var pol core.Policy
	if err := json.Unmarshal([]byte(stored), &pol); err != nil {
		log.Error("stored step policy is unreadable; using the defaults", core.AttrError, err)
	}
	pol = pol.Or(e.cfg.Defaults).Or(core.DefaultPolicy())
	e.policies.Store(stored, pol)
	return pol
}

// call runs a step body, turning a panic into an error.
func call(ctx context.Context, fn core.StepFunc, sc *core.StepContext) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			sc.Logger().Error("step panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("step panicked: %v", r)
		}
	}()
	return fn(ctx, sc)
}
