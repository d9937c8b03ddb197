package dashboard

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairnhq/cairn/workflow"
)

// Options are what cmd/worker's HTTP server is made of, by the names of
// the worker's settings, for Open (a server of its own) and Mount (on a
// service's mux). The worker builds its server with Open, so a service
// that embeds Cairn and sets the same options gets the same server.
type Options struct {
	// Redis is the client of the workflow state (for a CAIRN_REDIS_URL,
	// workflow/redisurl's Target.NewClient). Required.
	Redis redis.UniversalClient
	// Queue is the workers' queue (CAIRN_QUEUE). Default
	// workflow.DefaultQueue.
	Queue string
	// Retention is the workers' retention (CAIRN_RETENTION), for the runs
	// the API starts. Default the client's.
	Retention time.Duration
	// TokensFile is the API tokens file (CAIRN_API_TOKENS_FILE; the format
	// is LoadTokens'). Empty: no authentication, every caller is the
	// admin, and only loopback may be served (Open refuses another Addr;
	// Mount's routes answer 403 to a request that came in on another
	// address).
	TokensFile string
	// Secret is shared by the replicas of one address
	// (CAIRN_DASHBOARD_SECRET): their CSRF keys derive from it
	// (CSRFKeyFromSecret), so each accepts the others' CSRF tokens.
	// Empty: a random key per process.
	Secret string
	// Monitoring is the Redis of asynqmon, mounted at /monitoring for
	// admins (workflow/redisurl's Target.AsynqConnOpt). Nil: no
	// /monitoring.
	Monitoring asynq.RedisConnOpt
	// MonitoringWrite lets admins change tasks and queues in asynqmon
	// (CAIRN_MONITORING_WRITE). Default read-only.
	MonitoringWrite bool
	// Metrics serves /metrics (package metrics: Metrics.Handler). Default
	// the default Prometheus registry.
	Metrics http.Handler
	// Observer is told of the runs the API's actions end (the same
	// *metrics.Metrics as the worker's EngineConfig.Observer). Default
	// none.
	Observer workflow.Observer
	// TracerProvider traces the runs the API starts (workflow/oteltrace).
	// Nil: none, but a run started with a traceparent header still joins
	// that trace.
	TracerProvider trace.TracerProvider
	// Addr is the address Open's server listens on (CAIRN_HTTP_ADDR).
	// Default DefaultAddr. Mount ignores it: the service listens.
	Addr string
	// Logger receives the server's logs. Default slog.Default().
	Logger *slog.Logger
}

// Open returns the server cmd/worker serves on CAIRN_HTTP_ADDR: the JSON
// API, the web UI (WebUI), /healthz, /readyz, /metrics and asynqmon, with
// the tokens of TokensFile and the CSRF key of Secret. Its errors that are
// the operator's to fix (an unreadable tokens file; no tokens for an
// address that is not loopback) are *ConfigError. Serve it
// (ListenAndServe, Serve) or put it on a mux of your own (Mount); Close
// it when done.
func Open(o Options) (*Server, error) {
	if o.Redis == nil {
		return nil, fmt.Errorf("dashboard: Options.Redis is required")
	}
	var tokens *Tokens
	if o.TokensFile != "" {
		t, err := LoadTokens(o.TokensFile)
		if err != nil {
			return nil, &ConfigError{Msg: "CAIRN_API_TOKENS_FILE: " + err.Error()}
		}
		tokens = t
	}
	var csrfKey []byte
	if o.Secret != "" {
		csrfKey = CSRFKeyFromSecret(o.Secret)
	}
	return New(Config{
		Client: workflow.NewClient(o.Redis, workflow.ClientConfig{Queue: o.Queue, Retention: o.Retention,
			Logger: o.Logger, Observer: o.Observer, TracerProvider: o.TracerProvider}),
		Redis:           o.Redis,
		Addr:            o.Addr,
		Tokens:          tokens,
		Monitoring:      o.Monitoring,
		MonitoringWrite: o.MonitoringWrite,
		Metrics:         o.Metrics,
		Logger:          o.Logger,
		UI:              WebUI,
		CSRFKey:         csrfKey,
	})
}

// MountPatterns are the patterns Mount registers on a service's mux: the
// dashboard's pages at the root (its links are absolute, so it cannot
// live under a prefix), its static files, the API under /api/v1/,
// /healthz, /readyz, /metrics and asynqmon. A service keeps every other
// path; a more specific pattern of its own (GET /api/v1/orders) wins over
// the dashboard's.
var MountPatterns = []string{
	"/{$}", "/runs/", AttentionPath, BreakersPath, ActivityPath, OrderingPath, SignInPath, SignOutPath,
	staticPrefix, "/api/v1/", "/healthz", "/readyz", "/metrics", MonitoringPath, MonitoringPath + "/",
}

// Mount builds the server of o (Open) and registers it on mux under
// MountPatterns, for a service that serves Cairn's dashboard, HTTP API
// and /metrics on its own http.Server, next to its own routes. A pattern
// the service registered already is an error, and then nothing is
// registered. Without TokensFile the routes answer only requests that came
// in on a loopback address (others get 403), as the worker refuses to
// listen elsewhere without tokens.
//
// Close the server when the service stops, before its http.Server's
// Shutdown: that ends the open event streams, which Shutdown would
// otherwise wait for.
func Mount(mux *http.ServeMux, o Options) (*Server, error) {
	s, err := Open(o)
	if err != nil {
		return nil, err
	}
	h := s.handler
	if s.AuthDisabled() {
		h = loopbackOnly(h)
	}
	if err := registerAll(mux, h); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// registerAll registers h on mux under each of MountPatterns. A path of
// theirs that the mux routes somewhere already (but to a catch-all "/",
// which each pattern is more specific than) is an error, before anything
// is registered: the service's route would hide the dashboard's, or
// http.ServeMux would panic on the duplicate.
func registerAll(mux *http.ServeMux, h http.Handler) (err error) {
	for _, p := range MountPatterns {
		path := p
		switch {
		case p == "/{$}":
			path = "/"
		case strings.HasSuffix(p, "/"):
			path = p + "x"
		}
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			r := &http.Request{Method: method, URL: &url.URL{Path: path}, Host: "localhost", Header: http.Header{}}
			if _, got := mux.Handler(r); got != "" && got != "/" {
				return fmt.Errorf("dashboard: Mount: the mux routes %s %s to its own %q already; Cairn needs %s (MountPatterns)",
					method, path, got, strings.Join(MountPatterns, " "))
			}
		}
	}
	defer func() { // a conflict the check above missed (a host's pattern)
		if r := recover(); r != nil {
			err = fmt.Errorf("dashboard: Mount: %v", r)
		}
	}()
	for _, p := range MountPatterns {
		mux.Handle(p, h)
	}
	return nil
}

// loopbackOnly answers 403 to a request that did not come in on a
// loopback address (the server's http.LocalAddrContextKey): an
// unauthenticated API must not be reachable from other hosts.
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		tcp, ok := addr.(*net.TCPAddr)
		if !ok || !tcp.IP.IsLoopback() {
			http.Error(w, "Cairn's dashboard and API have no API tokens (CAIRN_API_TOKENS_FILE, dashboard.Options.TokensFile): "+
				"they answer on a loopback address only", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
