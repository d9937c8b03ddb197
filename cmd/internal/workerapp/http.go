package workerapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairnhq/cairn/cmd/internal/config"
	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/workflow"
)

// newDashboard builds the HTTP server the configuration asks for
// (dashboard.Open, which a service that embeds Cairn calls too): the API
// on the workflow state in rdb, asynqmon on the same Redis, and metrics.
func newDashboard(cfg config.Config, rdb redis.UniversalClient, target *config.RedisTarget, log *slog.Logger,
	metricsHandler http.Handler, obs workflow.Observer, tp trace.TracerProvider) (*dashboard.Server, error) {
	s, err := dashboard.Open(dashboard.Options{
		Redis:           rdb,
		Queue:           cfg.Queue,
		Retention:       cfg.Retention,
		TokensFile:      cfg.APITokensFile,
		Secret:          string(cfg.DashboardSecret),
		Monitoring:      target.AsynqConnOpt(),
		MonitoringWrite: cfg.MonitoringWrite,
		Metrics:         metricsHandler,
		Observer:        obs,
		TracerProvider:  tp,
		Addr:            cfg.HTTPAddr,
		Logger:          log.With("component", "http"),
	})
	if _, ok := errors.AsType[*dashboard.ConfigError](err); ok {
		return nil, &startError{err}
	}
	return s, err
}

// httpAddrHint says what to do about an HTTP address that cannot be
// listened on (config: CAIRN_HTTP_ADDR empty turns the HTTP server off).
const httpAddrHint = "set CAIRN_HTTP_ADDR to another address, or to an empty value to turn the HTTP server off"

// listenHTTP listens on CAIRN_HTTP_ADDR before the worker starts; an
// empty address is no HTTP server, a nil listener. An address the operator
// set that cannot be listened on (in use, not local) is an error: the
// worker must not run without the server it was told to serve. The
// default address is only a warning, and a nil listener: the worker runs
// on without HTTP (a readiness probe on the address notices it).
func listenHTTP(cfg config.Config, log *slog.Logger) (net.Listener, error) {
	if cfg.HTTPAddr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	switch {
	case err == nil:
		return ln, nil
	case cfg.HTTPAddrSet:
		return nil, fmt.Errorf("HTTP API: cannot listen on CAIRN_HTTP_ADDR=%s: %w; %s", cfg.HTTPAddr, err, httpAddrHint)
	}
	log.Warn("HTTP API not started: cannot listen on the default address "+cfg.HTTPAddr+
		" (CAIRN_HTTP_ADDR is unset); the worker runs on without it; "+httpAddrHint, "addr", cfg.HTTPAddr, "error", err)
	return nil, nil
}

// serveHTTP serves s on ln in the background and returns a function that
// waits for it to stop, which it does gracefully once ctx is done.
func serveHTTP(ctx context.Context, s *dashboard.Server, ln net.Listener, log *slog.Logger) (wait func()) {
	logDashboard(s, ln.Addr(), log)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Serve(ctx, ln); err != nil {
			log.Error("HTTP API stopped", "error", err)
		}
	}()
	return func() { <-done }
}

// logDashboard logs the URL of the dashboard s serves on addr, unless s
// will refuse to serve there (no API tokens on an address that is not
// loopback: Serve says so).
func logDashboard(s *dashboard.Server, addr net.Addr, log *slog.Logger) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || (s.AuthDisabled() && !tcp.IP.IsLoopback()) {
		return
	}
	log.Info("dashboard: "+dashboardURL(tcp), "url", dashboardURL(tcp))
}

// dashboardURL is the URL of the dashboard served on addr. An unspecified
// address (0.0.0.0, ::) is reached from this host at the loopback address.
func dashboardURL(addr *net.TCPAddr) string {
	ip := addr.IP
	switch {
	case ip == nil || ip.Equal(net.IPv4zero):
		ip = net.IPv4(127, 0, 0, 1)
	case ip.Equal(net.IPv6unspecified):
		ip = net.IPv6loopback
	}
	return "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(addr.Port)) + "/"
}
