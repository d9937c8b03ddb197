package workerapp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/config"
	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/embedded"
	"github.com/cairnhq/cairn/internal/otelsetup"
	"github.com/cairnhq/cairn/metrics"
	"github.com/cairnhq/cairn/workflow"
)

// run starts the worker and blocks until ctx is done.
func run(ctx context.Context, cfg config.Config, stderr io.Writer) error {
	log := cfg.Logger(stderr)
	redis.SetLogger(redisLogger{log.With("component", "go-redis")})
	fileDefs, err := loadWorkflows(cfg) // CAIRN_WORKFLOWS_FILE, checked before anything starts
	if err != nil {
		return err
	}
	var httpLn net.Listener // CAIRN_HTTP_ADDR, taken before anything starts (http.go); nil: no HTTP
	if cfg.HTTPAddr != "" {
		if httpLn, err = listenHTTP(cfg, log); err != nil {
			return err
		}
		if httpLn != nil {
			defer httpLn.Close() // Serve closes it; this, on an error before that
		}
	}
	tracing, stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	if cfg.Embedded() {
		store, err := embedded.Start(cfg.EmbeddedAddr)
		if err != nil {
			return err
		}
		defer store.Close()
		fmt.Fprintf(stderr, `
  ***********************************************************************
  *  EMBEDDED STORE: CAIRN_REDIS_URL is unset, so workflow state lives  *
  *  in this process's memory. It is NOT durable: it is lost when the   *
  *  worker stops. Set CAIRN_REDIS_URL to a Redis server for real use.  *
  ***********************************************************************
  The CLI finds this store by default; from another shell:
    export CAIRN_REDIS_URL=%s
    go run ./cmd/enqueue start demo --wait

`, store.URL())
		log.Warn("using the embedded store: state is not durable", "redis_url", store.URL())
	}
	target, rdb, reg, err := connectRedis(cfg, log)
	if err != nil {
		return err
	}
	defer rdb.Close()

	mx, err := metrics.New(reg, metrics.Config{Redis: rdb, Queue: cfg.Queue})
	if err != nil {
		return err
	}
	var httpSrv *dashboard.Server // the HTTP API (http.go); nil without a listener
	if httpLn != nil {
		if httpSrv, err = newDashboard(cfg, rdb, target, log, mx.Handler(), mx, tracing.Provider); err != nil {
			return err
		}
		warnUnsharedCSRF(cfg, false, log)
	}

	w, err := workflow.NewWorker(rdb, workflow.WorkerConfig{
		EngineConfig: workflow.EngineConfig{
			Queue:     cfg.Queue,
			Defaults:  cfg.Policy(),
			Retention: cfg.Retention,
			FenceTTL:  cfg.FenceTTL,
			Logger:    log,
			Observer:  mx,

			TracerProvider: tracing.Provider,
		},
		Concurrency:              cfg.Concurrency,
		TaskCheckInterval:        cfg.TaskCheckInterval,
		DelayedTaskCheckInterval: cfg.DelayedTaskCheckInterval,
		ShutdownTimeout:          cfg.ShutdownTimeout,
		Reconciler: workflow.ReconcilerConfig{
			Interval:          cfg.ReconcileInterval,
			SweepInterval:     cfg.SweepInterval,
			Concurrency:       cfg.RecoveryConcurrency,
			MaxAutoRecoveries: cfg.MaxAutoRecoveries,
		},
		SkipRedisChecks: cfg.Embedded(),
		Webhook:         cfg.Webhook(),
	})
	if err != nil {
		return err
	}
	names := []string{demo.Name}
	if err := w.Register(demo.Definition(workflow.Policy{})); err != nil {
		return err
	}
	if cfg.DemoChaos {
		names = append(names, demo.ChaosName, demo.ChaosInlineName, demo.SagaName)
		if err := w.Register(demo.Chaos(rdb, cfg.Queue, workflow.Policy{})); err != nil {
			return err
		}
		if err := w.Register(demo.ChaosInline(rdb, cfg.Queue, workflow.Policy{})); err != nil {
			return err
		}
		if err := w.Register(demo.Saga(rdb, cfg.Queue, workflow.Policy{})); err != nil {
			return err
		}
		for _, d := range demo.Ordered(rdb, cfg.Queue, workflow.Policy{}) {
			names = append(names, d.Name)
			if err := w.Register(d); err != nil {
				return err
			}
		}
	}
	for _, d := range fileDefs {
		names = append(names, d.Name)
		if err := w.Register(d); err != nil {
			return &startError{fmt.Errorf("CAIRN_WORKFLOWS_FILE %s: %w", cfg.WorkflowsFile, err)}
		}
	}
	// Cairn's Lua scripts write asynq's internal task record: no start on
	// an asynq that stores tasks otherwise.
	ctx, wireErr, err := checkAsynqWire(ctx, rdb, log)
	if err != nil {
		return err
	}
	log.Info("starting worker", "redis", target.String(), "topology", target.Topology(), "queue", cfg.Queue,
		"concurrency", cfg.Concurrency, "workflows", names)
	if httpSrv != nil {
		httpCtx, stopHTTP := context.WithCancel(ctx)
		wait := serveHTTP(httpCtx, httpSrv, httpLn, log)
		defer func() { stopHTTP(); wait() }()
	}
	err = w.Run(ctx)
	if werr := wireErr(); werr != nil {
		return werr
	}
	return err
}

// redisLogger routes go-redis's own messages (connection pool errors) to
// the structured log.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.WarnContext(ctx, fmt.Sprintf(format, v...))
}

// startTracing sets up OpenTelemetry tracing as the OTEL_* environment
// asks (package otelsetup); stop exports the spans still buffered, within
// 5 s, as the process is stopping.
func startTracing(ctx context.Context, log *slog.Logger) (tracing *otelsetup.Tracing, stop func(), err error) {
	tracing, err = otelsetup.FromEnv(ctx, "cairn-worker", nil)
	if err != nil {
		return nil, nil, &startError{err}
	}
	if tracing.Provider != nil {
		log.Info("tracing with OpenTelemetry", "protocol", tracing.Protocol)
	}
	return tracing, func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tracing.Shutdown(flushCtx); err != nil {
			log.Warn("could not export the last spans", "error", err)
		}
	}, nil
}
