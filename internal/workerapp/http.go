package workerapp

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/config"
	"github.com/cairnhq/cairn/metrics"
	"github.com/cairnhq/cairn/workflow"
)

// options are the command-line flags.
type options struct {
	// dashboardOnly serves the HTTP API and dashboard alone: no asynq
	// server, engine or reconciler (a separate deployment).
	dashboardOnly bool
	// healthcheck probes the HTTP server of a running worker or dashboard
	// and exits (healthcheck.go).
	healthcheck bool
	// version prints the version and exits.
	version bool
}

// synopsis is the first line of the usage.
const synopsis = "Usage: worker [--dashboard-only | --healthcheck | --version | --help]"

// usage is the help text of worker --help.
const usage = synopsis + `

worker runs Cairn workflows: it executes their step attempts from the queue
and serves the HTTP API and the dashboard on CAIRN_HTTP_ADDR (default
127.0.0.1:8080; empty: no HTTP; set, but in use: exit 1). Its configuration is CAIRN_* environment
variables (docs/configuration.md). With CAIRN_REDIS_URL unset it starts an
embedded, non-durable store for development.

Flags:
  --dashboard-only  serve only the HTTP API and the dashboard, on the
                    configured Redis: no engine, no reconciler
  --healthcheck     ask the server of a worker or dashboard running on this
                    host (CAIRN_HTTP_ADDR) whether it is ready: exit 0 or 1
  --version         print the version of worker and exit
  -h, --help        show this help and exit

Exit codes: 0 stopped by SIGINT or SIGTERM (or a help, version or healthy
check); 1 an error at run time; 2 a usage error or a bad configuration.
`

// errHelp is parseFlags' error for -h or --help.
var errHelp = flag.ErrHelp

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.BoolVar(&o.dashboardOnly, "dashboard-only", false, "")
	fs.BoolVar(&o.healthcheck, "healthcheck", false, "")
	fs.BoolVar(&o.version, "version", false, "")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return o, nil
}

// startError is a configuration problem found at start (a tokens file, an
// HTTP address without tokens): the worker exits with code 2, as for a bad
// variable.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// exitCode is the exit code of run's error.
func exitCode(err error) int {
	if _, ok := errors.AsType[*startError](err); ok {
		return 2
	}
	return 1
}

// newDashboard builds the HTTP server the configuration asks for: the API
// on the workflow state in rdb, asynqmon on the same Redis, and metrics.
func newDashboard(cfg config.Config, rdb redis.UniversalClient, target *config.RedisTarget, log *slog.Logger,
	metricsHandler http.Handler, obs workflow.Observer, tp trace.TracerProvider) (*dashboard.Server, error) {
	var tokens *dashboard.Tokens
	if cfg.APITokensFile != "" {
		t, err := dashboard.LoadTokens(cfg.APITokensFile)
		if err != nil {
			return nil, &startError{fmt.Errorf("CAIRN_API_TOKENS_FILE: %w", err)}
		}
		tokens = t
	}
	log = log.With("component", "http")
	s, err := dashboard.New(dashboard.Config{
		Client: workflow.NewClient(rdb, workflow.ClientConfig{Queue: cfg.Queue, Retention: cfg.Retention,
			Logger: log, Observer: obs, TracerProvider: tp}),
		Redis:           rdb,
		Addr:            cfg.HTTPAddr,
		Tokens:          tokens,
		Monitoring:      target.AsynqConnOpt(),
		MonitoringWrite: cfg.MonitoringWrite,
		Metrics:         metricsHandler,
		Logger:          log,
		UI:              dashboard.WebUI,
		CSRFKey:         dashboardCSRFKey(cfg),
	})
	if _, ok := errors.AsType[*dashboard.ConfigError](err); ok {
		return nil, &startError{err}
	}
	return s, err
}

// httpAddrHint says what to do about an HTTP address that cannot be
// listened on (config: CAIRN_HTTP_ADDR empty turns the HTTP server off).
const httpAddrHint = "set CAIRN_HTTP_ADDR to another address, or to an empty value to turn the HTTP server off"

// listenHTTP listens on CAIRN_HTTP_ADDR before the worker starts. An
// address the operator set that cannot be listened on (in use, not
// local) is an error: the worker must not run without the server it was
// told to serve. The default address is only a warning, and a nil
// listener: the worker runs on without HTTP (a readiness probe on the
// address notices it).
func listenHTTP(cfg config.Config, log *slog.Logger) (net.Listener, error) {
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

// runDashboardOnly serves the HTTP API and dashboard on the configured
// Redis until ctx is done: no asynq server, engine or reconciler. With
// CAIRN_REDIS_URL unset it talks to the embedded store of a worker on this
// host, as the CLI does, rather than start one.
func runDashboardOnly(ctx context.Context, cfg config.Config, stderr io.Writer) error {
	log := cfg.Logger(stderr)
	redis.SetLogger(redisLogger{log.With("component", "go-redis")})
	if cfg.HTTPAddr == "" {
		return &startError{errors.New("--dashboard-only: CAIRN_HTTP_ADDR is empty, so there is nothing to serve")}
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
	tracing, stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	s, err := newDashboard(cfg, rdb, target, log, mx.Handler(), mx, tracing.Provider)
	if err != nil {
		return err
	}
	warnUnsharedCSRF(cfg, true, log)
	log.Info("serving the dashboard only", "redis", target.String(), "topology", target.Topology(), "queue", cfg.Queue,
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
