package workerapp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/cmd/internal/config"
	"github.com/cairnhq/cairn/cmd/internal/version"
	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/metrics"
	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/oteltrace"
)

// run starts the worker and blocks until ctx is done. What the operator
// named must be valid or free before anything starts (the workflows file,
// the HTTP address); then it builds the worker on Redis and serves. Each
// step's undo is deferred, so they run in reverse order on the way out.
func run(ctx context.Context, cfg config.Config, stderr io.Writer) error {
	log := newLogger(cfg, stderr)
	fileDefs, err := loadWorkflows(cfg) // CAIRN_WORKFLOWS_FILE, checked before anything starts
	if err != nil {
		return err
	}
	httpLn, err := listenHTTP(cfg, log) // CAIRN_HTTP_ADDR, taken before anything starts; nil: no HTTP
	if err != nil {
		return err
	}
	if httpLn != nil {
		defer httpLn.Close() // Serve closes it; this, on an error before that
	}
	tracing, stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	conn, closeRedis, err := openRedis(cfg, stderr, log)
	if err != nil {
		return err
	}
	defer closeRedis()
	mx, err := metrics.New(conn.reg, metrics.Config{Redis: conn.rdb, Queue: cfg.Queue})
	if err != nil {
		return err
	}
	var httpSrv *dashboard.Server // the HTTP API (http.go); nil without a listener
	if httpLn != nil {
		if httpSrv, err = newDashboard(cfg, conn.rdb, conn.target, log, mx.Handler(), mx, tracing.TracerProvider()); err != nil {
			return err
		}
		warnUnsharedCSRF(cfg, false, log)
	}
	w, err := newWorker(cfg, conn.rdb, log, mx, tracing)
	if err != nil {
		return err
	}
	names, err := registerWorkflows(w, cfg, conn.rdb, fileDefs)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		// A worker on Redis that an upgrade left without the demo it ran.
		log.Warn("no workflows registered: this worker has no step to run; set CAIRN_WORKFLOWS_FILE, "+
			"or CAIRN_DEMO=true for the demo workflow (docs/configuration.md)", "queue", cfg.Queue)
	}
	return serve(ctx, wired{cfg: cfg, log: log, conn: conn, worker: w, workflows: names, httpSrv: httpSrv, httpLn: httpLn})
}

// newWorker builds the worker (asynq server, engine, reconciler, webhook
// notifier) as the configuration asks, observed by mx.
func newWorker(cfg config.Config, rdb redis.UniversalClient, log *slog.Logger, mx *metrics.Metrics,
	tracing *oteltrace.Tracing) (*workflow.Worker, error) {
	return workflow.NewWorker(rdb, workflow.WorkerConfig{
		EngineConfig: workflow.EngineConfig{
			Queue:     cfg.Queue,
			Defaults:  cfg.Policy(),
			Retention: cfg.Retention,
			FenceTTL:  cfg.FenceTTL,
			Logger:    log,
			Observer:  mx,

			TracerProvider: tracing.TracerProvider(),
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
		Version:         version.String(),
	})
}

// registerWorkflows registers on w the demo workflow when the
// configuration asks for it (cfg.RegistersDemo: the embedded store,
// CAIRN_DEMO or CAIRN_DEMO_CHAOS), with CAIRN_DEMO_CHAOS the chaos suite's
// and the ordering suite's, and then those of CAIRN_WORKFLOWS_FILE
// (fileDefs); it returns their names, in that order. A workflow of the
// file that cannot be registered (a name the demo took) is a startError.
func registerWorkflows(w *workflow.Worker, cfg config.Config, rdb redis.UniversalClient,
	fileDefs []workflow.Definition) ([]string, error) {
	names := []string{}
	if cfg.RegistersDemo() {
		names = append(names, demo.Name)
		if err := w.Register(demo.Definition(workflow.Policy{})); err != nil {
			return nil, err
		}
	}
	if cfg.DemoChaos {
		names = append(names, demo.ChaosName, demo.ChaosInlineName, demo.SagaName)
		if err := w.Register(demo.Chaos(rdb, cfg.Queue, workflow.Policy{})); err != nil {
			return nil, err
		}
		if err := w.Register(demo.ChaosInline(rdb, cfg.Queue, workflow.Policy{})); err != nil {
			return nil, err
		}
		if err := w.Register(demo.Saga(rdb, cfg.Queue, workflow.Policy{})); err != nil {
			return nil, err
		}
		for _, d := range demo.Ordered(rdb, cfg.Queue, workflow.Policy{}) {
			names = append(names, d.Name)
			if err := w.Register(d); err != nil {
				return nil, err
			}
		}
	}
	for _, d := range fileDefs {
		names = append(names, d.Name)
		if err := w.Register(d); err != nil {
			return nil, &startError{fmt.Errorf("CAIRN_WORKFLOWS_FILE %s: %w", cfg.WorkflowsFile, err)}
		}
	}
	return names, nil
}

// wired is a worker run has built, ready to serve.
type wired struct {
	cfg       config.Config
	log       *slog.Logger
	conn      redisConn
	worker    *workflow.Worker
	workflows []string          // the names registered, for the log
	httpSrv   *dashboard.Server // nil: no HTTP
	httpLn    net.Listener      // httpSrv's
}

// serve checks asynq's task format, serves the HTTP API, if any, and runs
// the worker until ctx is done or the format check, going on in the
// background while Redis cannot be reached, finds a difference. It stops
// the HTTP server once the worker has stopped.
func serve(ctx context.Context, wd wired) error {
	// Cairn's Lua scripts write asynq's internal task record: no start on
	// an asynq that stores tasks otherwise.
	ctx, wireErr, err := checkAsynqWire(ctx, wd.conn.rdb, wd.log)
	if err != nil {
		return err
	}
	wd.log.Info("starting worker", "redis", wd.conn.target.String(), "topology", wd.conn.target.Topology(),
		"queue", wd.cfg.Queue, "concurrency", wd.cfg.Concurrency, "workflows", wd.workflows)
	if wd.httpSrv != nil {
		httpCtx, stopHTTP := context.WithCancel(ctx)
		wait := serveHTTP(httpCtx, wd.httpSrv, wd.httpLn, wd.log)
		defer func() { stopHTTP(); wait() }()
	}
	err = wd.worker.Run(ctx)
	if werr := wireErr(); werr != nil {
		return werr
	}
	return err
}
