package engine

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/internal/maintenance"
	"github.com/cairnhq/cairn/internal/webhookdelivery"
	"github.com/cairnhq/cairn/tasks"
)

// WorkerConfig configures a Worker: an Engine taking its queue's asynq
// tasks (see Dequeue). A zero field takes the default given in its comment.
type WorkerConfig struct {
	EngineConfig
	// Concurrency is how many step attempts run at once. Default 10.
	Concurrency int
	// TaskCheckInterval, with Dequeue DequeueAsynq, is how long asynq's
	// fetch loop sleeps (on average) after it found the queue empty; it
	// also sets how far ahead of its due time the promoter moves a timer
	// (1.5 times it). asynq's own default, 1s, stalls step
	// chains: each step's successor waits for the next poll. Default 20ms
	// (see the README's benchmark section for the measurements).
	TaskCheckInterval time.Duration
	// DelayedTaskCheckInterval, with Dequeue DequeueAsynq, is how often
	// asynq moves due retries from its scheduled set to the queue (the own
	// dequeue does it once a second, behind the promoter). asynq's default, 5s, would delay
	// every retry by up to 5s. Default 200ms.
	DelayedTaskCheckInterval time.Duration
	// ShutdownTimeout is how long a graceful shutdown waits for running
	// steps. A step still running then is handed back to the queue; its
	// next delivery resumes it once its fence expires. Default 30s.
	ShutdownTimeout time.Duration
	// Reconciler configures the reconciler the worker runs.
	Reconciler maintenance.ReconcilerConfig
	// SkipRedisChecks turns off the start-up check of Redis's persistence
	// and eviction settings (for stores without CONFIG, like the embedded
	// one).
	SkipRedisChecks bool
	// Dequeue chooses who takes the queue's tasks: DequeueCairn (the
	// default; "" reads the environment variable CAIRN_DEQUEUE, and is
	// DequeueCairn when it is unset), the worker's own dequeue, which
	// blocks on the queue instead of polling it (processor.go); or
	// DequeueAsynq, asynq's processor, as before (TaskCheckInterval and
	// DelayedTaskCheckInterval apply to it alone). Either way the tasks
	// are asynq's, in asynq's format, and asynq servers that embed the
	// engine may serve the same queue.
	Dequeue string
	// Webhook, when set, delivers the queue's notifications to a URL (see
	// Notifier and WebhookHandler). Nil: no webhooks.
	Webhook *WebhookConfig
	// Version is the version of Cairn the worker reports in its record on
	// Cairn's own dequeue (the Workers page, GET /api/v1/workers). Default:
	// the version of the module github.com/cairnhq/cairn the Go toolchain
	// recorded in the binary, else "devel".
	Version string
}

// Worker runs registered workflows: it executes step attempts from the
// queue with an Engine, taking the queue's asynq tasks itself (or with
// asynq's processor: WorkerConfig.Dequeue).
type Worker struct {
	cfg    WorkerConfig
	rdb    redis.UniversalClient
	engine *Engine
	log    *slog.Logger
	ready  chan struct{}
	// proc is the worker's own processor, once Run started it;
	// onProcessor, when set (tests), is called with it before it starts.
	proc        *processor
	onProcessor func(*processor)
}

// NewWorker returns a worker on rdb.
func NewWorker(rdb redis.UniversalClient, cfg WorkerConfig) (*Worker, error) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 10
	}
	if cfg.TaskCheckInterval <= 0 {
		cfg.TaskCheckInterval = asynqTaskCheckInterval
	}
	if cfg.DelayedTaskCheckInterval <= 0 {
		cfg.DelayedTaskCheckInterval = asynqDelayedTaskCheckInterval
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.Dequeue == "" {
		cfg.Dequeue = os.Getenv("CAIRN_DEQUEUE")
	}
	if cfg.Version == "" {
		cfg.Version = moduleVersion()
	}
	switch cfg.Dequeue {
	case "":
		cfg.Dequeue = DequeueCairn
	case DequeueCairn, DequeueAsynq:
	default:
		return nil, fmt.Errorf("cairn: unknown dequeue %q (CAIRN_DEQUEUE): want %q or %q", cfg.Dequeue,
			DequeueCairn, DequeueAsynq)
	}
	e, err := NewEngine(rdb, cfg.EngineConfig)
	if err != nil {
		return nil, err
	}
	// On the own dequeue a pending task is taken at once, but the lead
	// still pays: the promoter's timer, its script and the take are late
	// by however busy the machine is, while an attempt begun early waits
	// its due millisecond out in-process (measured: BenchmarkTimerLateness,
	// docs/performance.md).
	e.disp.timers.lead = promoteLead(cfg.TaskCheckInterval, e.cfg.MaxEarlyWait)
	if cfg.Webhook != nil {
		if err := cfg.Webhook.Validate(); err != nil {
			return nil, err
		}
	}
	return &Worker{cfg: cfg, rdb: rdb, engine: e, log: e.log, ready: make(chan struct{})}, nil
}

// Register adds workflow definitions; call it before Run.
func (w *Worker) Register(defs ...core.Definition) error { return w.engine.Register(defs...) }

// Ready is closed once Run has published the definitions (clients can start
// runs of them) and the worker processes step attempts; with webhooks, once
// their consumer group exists too (the notifications of runs started from
// then on are delivered), unless Redis refused to create it.
func (w *Worker) Ready() <-chan struct{} { return w.ready }

// Engine returns the worker's engine.
func (w *Worker) Engine() *Engine { return w.engine }

// Run publishes the registered definitions, then processes step attempts
// until ctx is done, and shuts down gracefully. While Redis is unreachable
// it keeps trying and logs it; it never gives up on its own.
func (w *Worker) Run(ctx context.Context) error {
	if ok, err := w.engine.publishRetrying(ctx); !ok {
		// ctx is done: Run returns nil, as it does when ctx ends after
		// start-up; or the queue's data is of another format.
		return err
	}
	if w.cfg.Dequeue == DequeueCairn {
		return w.runOwn(ctx)
	}
	srv := asynq.NewServerFromRedisClient(w.rdb, asynq.Config{
		Concurrency:              w.cfg.Concurrency,
		Queues:                   map[string]int{w.engine.cfg.Queue: 1},
		TaskCheckInterval:        w.cfg.TaskCheckInterval,
		DelayedTaskCheckInterval: w.cfg.DelayedTaskCheckInterval,
		ShutdownTimeout:          w.cfg.ShutdownTimeout,
		RetryDelayFunc:           retryDelay,
		IsFailure:                IsFailure,
		Logger:                   asynqLogger{w.log.With("component", "asynq")},
		LogLevel:                 asynq.InfoLevel,
	})
	mux := asynq.NewServeMux()
	mux.Handle(tasks.TypeStep, w.engine)
	var notifier *Notifier
	if h := w.webhookHandler(); h != nil {
		mux.Handle(tasks.TypeWebhook, h)
		notifier = w.notifier()
	}
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("start asynq server: %w", err)
	}
	services := w.start(ctx, notifier)
	w.log.Info("worker started", "queue", w.engine.cfg.Queue, "concurrency", w.cfg.Concurrency, "dequeue", DequeueAsynq)
	close(w.ready)
	<-ctx.Done()
	w.log.Info("shutting down: waiting for running steps", "timeout", w.cfg.ShutdownTimeout)
	srv.Shutdown()
	services()
	w.log.Info("worker stopped")
	return nil
}

// runOwn is Run on the worker's own dequeue (processor.go).
func (w *Worker) runOwn(ctx context.Context) error {
	proc := newProcessor(w.engine, w.rdb, w.cfg.Concurrency, w.cfg.ShutdownTimeout, w.cfg.Version)
	var notifier *Notifier
	if h := w.webhookHandler(); h != nil {
		proc.webhook = h.Deliver
		notifier = w.notifier()
	}
	w.proc = proc
	if w.onProcessor != nil {
		w.onProcessor(proc)
	}
	services := w.start(ctx, notifier)
	// The first heartbeat before the first claim (a claim list is never
	// without one) and before Ready (a ready worker is listed live).
	proc.housekeep(ctx)
	procDone := make(chan struct{})
	go func() {
		defer close(procDone)
		proc.run(ctx)
	}()
	w.log.Info("worker started", "queue", w.engine.cfg.Queue, "concurrency", w.cfg.Concurrency, "dequeue", DequeueCairn)
	close(w.ready)
	<-ctx.Done()
	w.log.Info("shutting down: waiting for running steps", "timeout", w.cfg.ShutdownTimeout)
	<-procDone
	services()
	w.log.Info("worker stopped")
	return nil
}

// start runs what a worker runs beside its processor (the Redis checks,
// the reconciler, the promoter, the notifier, the step latencies'
// flushes) until ctx ends; the function it returns stops them and waits
// for them.
func (w *Worker) start(ctx context.Context, notifier *Notifier) (stop func()) {
	if !w.cfg.SkipRedisChecks {
		CheckRedis(ctx, w.rdb, w.log)
	}
	if notifier != nil {
		// The webhooks' consumer group exists before the worker is ready,
		// so the notifications of runs started from then on are delivered
		// (it starts at the stream's end). Run retries when this fails.
		if err := notifier.Prepare(ctx); err != nil {
			w.log.Warn("cannot create the notification consumer group yet; the notifier will retry", core.AttrError, err)
		}
	}
	recCtx, stopRec := context.WithCancel(ctx)
	recDone := make(chan struct{})
	go func() {
		defer close(recDone)
		w.engine.NewReconciler(w.cfg.Reconciler).Run(recCtx)
	}()
	timersDone := w.engine.disp.timers.start(recCtx)
	notifierDone := make(chan struct{})
	if notifier != nil {
		go func() {
			defer close(notifierDone)
			notifier.Run(recCtx)
		}()
	} else {
		close(notifierDone)
	}
	// The step latencies' flushes (latency.go); the last when the worker
	// stops, after its steps.
	latencyDone := make(chan struct{})
	if l := w.engine.latency; l != nil {
		go func() {
			defer close(latencyDone)
			l.run(recCtx, w.engine.cfg.LatencyFlushInterval)
		}()
	} else {
		close(latencyDone)
	}
	return func() {
		stopRec()
		<-recDone
		<-timersDone
		<-notifierDone
		<-latencyDone
	}
}

// CheckRedis warns, once each and with the fix, when Redis is set up so that
// workflow state would not survive a restart (appendonly off) or could be
// evicted (a maxmemory-policy other than noeviction). A Redis that does not
// allow CONFIG GET is not checked. On a Redis Cluster every node is checked
// (its address in the warning's node attribute): CONFIG GET names no key,
// so the cluster client would read one node's settings.
func CheckRedis(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err := cc.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
			checkRedisNode(ctx, node, log.With("node", node.Options().Addr))
			return nil
		})
		if err != nil {
			log.Info("cannot reach every Redis Cluster node; persistence and eviction settings not checked", core.AttrError, err)
		}
		return
	}
	checkRedisNode(ctx, rdb, log)
}

// checkRedisNode is CheckRedis of one server.
func checkRedisNode(ctx context.Context, rdb redis.Cmdable, log *slog.Logger) {
	get := func(name string) (string, bool) {
		v, err := rdb.ConfigGet(ctx, name).Result()
		if err != nil {
			log.Info("cannot read Redis configuration; persistence and eviction settings not checked",
				"setting", name, core.AttrError, err)
			return "", false
		}
		s, ok := v[name]
		return s, ok
	}
	if v, ok := get("appendonly"); ok && v != "yes" {
		log.Warn("Redis appendonly is off: workflow state written since the last snapshot is lost if Redis restarts",
			"appendonly", v, "fix", "CONFIG SET appendonly yes (and appendonly yes in redis.conf)")
	}
	if v, ok := get("maxmemory-policy"); ok && v != "noeviction" {
		log.Warn("Redis may evict workflow state under memory pressure",
			"maxmemory-policy", v, "fix", "CONFIG SET maxmemory-policy noeviction (and in redis.conf)")
	}
}

// moduleVersion is the version of Cairn's module the Go toolchain recorded
// in the binary (the main module's when Cairn is the main module); "devel"
// when none is (a build from a work tree: go run, go test).
func moduleVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	const module = "github.com/cairnhq/cairn"
	if info.Main.Path == module && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == module && d.Version != "" && d.Version != "(devel)" {
			return d.Version
		}
	}
	return "devel"
}

// asynqLogger routes asynq's logs to slog.
type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...)) }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...)) }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...)) }
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...)) }
func (a asynqLogger) Fatal(args ...any) {
	a.l.Error(fmt.Sprint(args...))
	os.Exit(1)
}

// webhookConfig is the worker's webhook configuration with its clock.
func (w *Worker) webhookConfig() WebhookConfig {
	cfg := *w.cfg.Webhook
	if cfg.Clock == nil {
		cfg.Clock = w.engine.cfg.Clock
	}
	return cfg
}

// webhookHandler returns the webhook delivery handler, nil when webhooks
// are not configured.
func (w *Worker) webhookHandler() *WebhookHandler {
	if w.cfg.Webhook == nil {
		return nil
	}
	h, _ := NewWebhookHandler(w.webhookConfig(), w.log) // validated by NewWorker
	return h
}

// notifier returns the notifier to run when webhooks are configured.
func (w *Worker) notifier() *Notifier {
	return webhookdelivery.NewNotifier(w.engine.store, w.engine.disp.client, w.engine.cfg.Queue,
		w.webhookConfig(), w.log)
}

// retryDelay is the worker's asynq RetryDelayFunc: WebhookRetryDelay for
// webhook deliveries, RetryDelay for step attempts.
func retryDelay(n int, err error, t *asynq.Task) time.Duration {
	if t != nil && t.Type() == tasks.TypeWebhook {
		return WebhookRetryDelay(n, err, t)
	}
	return RetryDelay(n, err, t)
}
