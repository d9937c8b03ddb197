package workerapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/cairnhq/cairn/cmd/internal/config"
	"github.com/cairnhq/cairn/metrics"
)

// runDashboardOnly serves the HTTP API and dashboard on the configured
// Redis until ctx is done: no asynq server, engine or reconciler. With
// CAIRN_REDIS_URL unset it talks to the embedded store of a worker on this
// host, as the CLI does, rather than start one.
func runDashboardOnly(ctx context.Context, cfg config.Config, stderr io.Writer) error {
	log := newLogger(cfg, stderr)
	if cfg.HTTPAddr == "" {
		return &startError{errors.New("--dashboard-only: CAIRN_HTTP_ADDR is empty, so there is nothing to serve")}
	}
	conn, err := connectRedis(cfg, log)
	if err != nil {
		return err
	}
	defer conn.rdb.Close()
	mx, err := metrics.New(conn.reg, metrics.Config{Redis: conn.rdb, Queue: cfg.Queue})
	if err != nil {
		return err
	}
	tracing, stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	s, err := newDashboard(cfg, conn.rdb, conn.target, log, mx.Handler(), mx, tracing.TracerProvider())
	if err != nil {
		return err
	}
	warnUnsharedCSRF(cfg, true, log)
	log.Info("serving the dashboard only", "redis", conn.target.String(), "topology", conn.target.Topology(), "queue", cfg.Queue,
		"addr", cfg.HTTPAddr)
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		_ = s.Close()
		what := "CAIRN_HTTP_ADDR=" + cfg.HTTPAddr
		if !cfg.HTTPAddrSet {
			what = "the default address " + cfg.HTTPAddr + " (CAIRN_HTTP_ADDR is unset)"
		}
		return fmt.Errorf("HTTP API: cannot listen on %s: %w; set CAIRN_HTTP_ADDR to another address", what, err)
	}
	logDashboard(s, ln.Addr(), log)
	return s.Serve(ctx, ln)
}
