package workflowtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/embedded"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// DefaultStart is where the fake clock starts unless Options.Start says
// otherwise: 2025-01-01 00:00:00 UTC, a whole second, so that durations in
// whole seconds land on whole seconds.
var DefaultStart = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)

// DefaultQueue is the queue of an Env unless Options.Queue says otherwise.
const DefaultQueue = "workflowtest"

// DefaultMaxDeliveries is the default of Options.MaxDeliveries.
const DefaultMaxDeliveries = 10000

// Options configure an Env. A zero field takes the default given in its
// comment.
type Options struct {
	// Start is the fake clock's initial time. Default DefaultStart.
	Start time.Time
	// Redis, when set, is the Redis the Env keeps its state in, instead of
	// an embedded store of its own: to run the kit against a real
	// redis-server. Give each Env its own Queue there, and run no worker
	// on that queue. The Env does not close it, nor delete what it wrote.
	Redis redis.UniversalClient
	// Queue is the queue of the runs. Default DefaultQueue.
	Queue string
	// Defaults is the engine's global policy (workflow.EngineConfig.Defaults).
	Defaults workflow.Policy
	// Rand returns the uniform numbers in [0, 1) that randomise retry
	// delays (workflow.EngineConfig.Rand). Default: a pseudo-random
	// sequence with a fixed seed, the same in every Env; with
	// workflow.JitterNone in the policy, delays are exact.
	Rand func() float64
	// Logger receives the engine's and the client's logs. Default: none.
	Logger *slog.Logger
	// Observer is told of runs, attempts and retries. Default
	// workflow.NopObserver.
	Observer workflow.Observer
	// MaxDeliveries bounds the step tasks one call (RunUntilIdle, Advance,
	// RunUntilDone, ...) delivers, so that a workflow that never ends (a
	// step that snoozes forever) fails the test rather than hangs it.
	// Default DefaultMaxDeliveries.
	MaxDeliveries int
}

// Env is a workflow test environment: an engine and a client on a private
// store, with a fake clock. Build one with New (in a test) or Open. Its
// methods that run steps return ErrInStep when called from a step body (a
// step body may use Client); calls from several goroutines take turns.
type Env struct {
	opts  Options
	clock *clock
	store *embedded.Store // nil with Options.Redis
	rdb   redis.UniversalClient
	eng   *workflow.Engine
	rec   *workflow.Reconciler
	cli   *workflow.Client
	state *retrystate.Store
	keys  tasks.Keys

	ctx       context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
	closeErr  error

	// mu serialises the methods that deliver tasks; delivering is set
	// while one does (see lock).
	mu         sync.Mutex
	delivering atomic.Bool

	// inj holds the injected step bodies (inject.go); steps the registered
	// steps by workflow, for checking the names injections use.
	injMu sync.Mutex
	inj   map[injKey]workflow.StepFunc
	steps map[string]map[string]bool
}

// New returns an Env with the definitions registered, closed when the test
// ends. It fails the test when the Env cannot be built.
func New(t testing.TB, defs ...workflow.Definition) *Env {
	t.Helper()
	return NewWithOptions(t, Options{}, defs...)
}

// NewWithOptions is New with options.
func NewWithOptions(t testing.TB, opts Options, defs ...workflow.Definition) *Env {
	t.Helper()
	env, err := Open(opts, defs...)
	if err != nil {
		t.Fatalf("workflowtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Errorf("workflowtest: close: %v", err)
		}
	})
	return env
}

// Open returns an Env with the definitions registered. Close releases it.
func Open(opts Options, defs ...workflow.Definition) (env *Env, err error) {
	if opts.Start.IsZero() {
		opts.Start = DefaultStart
	}
	if opts.Queue == "" {
		opts.Queue = DefaultQueue
	}
	if opts.Rand == nil {
		opts.Rand = seeded()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxDeliveries <= 0 {
		opts.MaxDeliveries = DefaultMaxDeliveries
	}
	e := &Env{opts: opts, clock: &clock{t: opts.Start}, rdb: opts.Redis, keys: tasks.QueueKeys(opts.Queue),
		inj: make(map[injKey]workflow.StepFunc), steps: make(map[string]map[string]bool)}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			err = errors.Join(err, e.Close())
		}
	}()
	if e.rdb == nil {
		if e.store, err = embedded.Start("127.0.0.1:0"); err != nil {
			return nil, err
		}
		// RESP2, as the worker's clients: Cairn uses no RESP3 feature.
		e.rdb = redis.NewClient(&redis.Options{Addr: e.store.Addr(), Protocol: 2})
	}
	e.eng, err = workflow.NewEngine(e.rdb, workflow.EngineConfig{
		Queue: opts.Queue, Defaults: opts.Defaults, Clock: e.clock, Logger: opts.Logger,
		Rand: opts.Rand, Observer: opts.Observer,
		// The Env delivers a task only once it is due; an early delivery
		// is a bug to report, not a reason to wait in real time.
		MaxEarlyWait: time.Nanosecond,
	})
	if err != nil {
		return nil, err
	}
	e.rec = e.eng.NewReconciler(workflow.ReconcilerConfig{})
	e.cli = workflow.NewClient(e.rdb, workflow.ClientConfig{Queue: opts.Queue, Clock: e.clock, Logger: opts.Logger,
		Observer: opts.Observer})
	e.state = retrystate.New(e.rdb, opts.Queue)
	// asynq's own enqueue registers the queue (its inspector, which the
	// reconciler asks about tasks, knows no other); Cairn's scripts,
	// which write tasks too, do not.
	if err := e.rdb.SAdd(e.ctx, tasks.AllQueues, opts.Queue).Err(); err != nil {
		return nil, fmt.Errorf("register the queue: %w", err)
	}
	if err := e.Register(defs...); err != nil {
		return nil, err
	}
	return e, nil
}

// seeded returns a pseudo-random source with a fixed seed, safe for
// concurrent use.
func seeded() func() float64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(1, 2))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}

// Close releases the Env: its embedded store and everything in it are
// gone. Closing it again does nothing.
func (e *Env) Close() error {
	e.closeOnce.Do(func() {
		e.cancel()
		if e.store != nil {
			if e.rdb != nil {
				e.closeErr = e.rdb.Close()
			}
			e.store.Close()
		}
	})
	return e.closeErr
}

// Register adds workflow definitions to the Env's engine and publishes
// them, so that runs of them can start. Each step body and compensation is
// wrapped so that injected failures (FailStep, OnAttempt, OnStep) replace
// it.
func (e *Env) Register(defs ...workflow.Definition) error {
	wrapped := make([]workflow.Definition, len(defs))
	for i, d := range defs {
		wrapped[i] = e.wrapDefinition(d)
	}
	if err := e.eng.Register(wrapped...); err != nil {
		return err
	}
	e.injMu.Lock()
	for _, d := range defs {
		names := make(map[string]bool, len(d.Steps))
		for _, s := range d.Steps {
			if s.Run != nil {
				names[s.Name] = true
			}
			if s.Compensate != nil {
				names[workflow.CompensationPrefix+s.Name] = true
			}
		}
		e.steps[d.Name] = names
	}
	e.injMu.Unlock()
	return e.eng.Publish(e.ctx)
}

// Client returns the Env's client, on the fake clock. What it does takes
// effect at once (a Start creates the run, a Signal completes an await);
// the step tasks it enqueues run at the Env's next RunUntilIdle or Advance.
func (e *Env) Client() *workflow.Client { return e.cli }

// Engine returns the Env's engine.
func (e *Env) Engine() *workflow.Engine { return e.eng }

// Redis returns the Redis client of the Env's store.
func (e *Env) Redis() redis.UniversalClient { return e.rdb }

// Queue returns the Env's queue.
func (e *Env) Queue() string { return e.opts.Queue }

// Clock returns the Env's fake clock, for code under test that takes a
// workflow.Clock. Only the Env moves it (Advance, AdvanceTo,
// RunUntilDone).
func (e *Env) Clock() workflow.Clock { return e.clock }

// Now returns the fake clock's time.
func (e *Env) Now() time.Time { return e.clock.Now() }

// clock is the Env's fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
}
