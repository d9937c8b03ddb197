// Command service is the Go service of docs/embedding.md: a service with
// workflows of its own that embeds Cairn's worker, and serves its own
// routes, Cairn's dashboard, HTTP API and /metrics on one mux, with
// tracing from OTEL_*. It reads the worker's variables (CAIRN_REDIS_URL,
// CAIRN_API_TOKENS_FILE, CAIRN_DASHBOARD_SECRET, OTEL_*) and ADDR, the
// address it listens on. Dockerfile and docker-compose.override.yml
// beside it run it with docker compose.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/metrics"
	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/oteltrace"
	"github.com/cairnhq/cairn/workflow/redisurl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := serve(ctx, os.Getenv)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

// The service's workflow: two steps, each retried on a transient error.
var orders = workflow.Definition{Name: "order", Steps: []workflow.Step{
	{Name: "reserve", Run: func(context.Context, *workflow.StepContext) (any, error) {
		return map[string]string{"reservation": "r-1"}, nil
	}},
	{Name: "charge", Run: func(context.Context, *workflow.StepContext) (any, error) {
		return "charged", nil
	}},
}}

// serve runs the service until ctx is done.
func serve(ctx context.Context, getenv func(string) string) error {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	// Redis: one server, Sentinel or a Cluster, as cmd/worker reads it.
	target, err := redisurl.Parse(getenv("CAIRN_REDIS_URL"))
	if err != nil {
		return fmt.Errorf("CAIRN_REDIS_URL: %w", err)
	}
	rdb := target.NewClient()
	defer rdb.Close()
	// Tracing from OTEL_* (off unless an endpoint or exporter is named).
	tracing, err := oteltrace.FromEnv(ctx, "orders")
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tracing.Shutdown(ctx) // the spans still buffered
	}()
	// Metrics: Cairn's collectors on a registry of the service's.
	mx, err := metrics.New(metrics.NewRegistry(), metrics.Config{Redis: rdb, Queue: "orders"})
	if err != nil {
		return err
	}
	w, err := workflow.NewWorker(rdb, workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{
		Queue: "orders", Logger: log, Observer: mx, TracerProvider: tracing.TracerProvider(),
	}})
	if err != nil {
		return err
	}
	if err := w.Register(orders); err != nil {
		return err
	}
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: "orders", Logger: log,
		Observer: mx, TracerProvider: tracing.TracerProvider(), Definitions: []workflow.Definition{orders}})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(rw http.ResponseWriter, r *http.Request) { // the service's own route
		run, err := client.Start(r.Context(), "order", map[string]any{"sku": r.FormValue("sku")}, nil)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusServiceUnavailable)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(map[string]string{"run_id": run.ID})
	})
	// Cairn's dashboard, HTTP API, /healthz, /readyz and /metrics on the same mux.
	dash, err := dashboard.Mount(mux, dashboard.Options{
		Redis: rdb, Queue: "orders",
		TokensFile: getenv("CAIRN_API_TOKENS_FILE"), Secret: getenv("CAIRN_DASHBOARD_SECRET"),
		Monitoring: target.AsynqConnOpt(), Metrics: mx.Handler(), Observer: mx,
		TracerProvider: tracing.TracerProvider(), Logger: log,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", getenv("ADDR")) // e.g. 127.0.0.1:8080; before the worker starts
	if err != nil {
		_ = dash.Close()
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("orders service", "addr", ln.Addr().String(), "redis", target.String(), "topology", target.Topology())
	runErr := w.Run(ctx) // until SIGTERM; then the steps in flight finish
	_ = dash.Close()     // ends the dashboard's event streams
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return errors.Join(runErr, err)
	}
	return runErr
}
