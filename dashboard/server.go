package dashboard

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/workflow"
)

// DefaultAddr is where ListenAndServe listens when Config.Addr is empty.
const DefaultAddr = "127.0.0.1:8080"

// MaxBodyBytes bounds a request body; a larger one gets 413.
const MaxBodyBytes = 1 << 20

// Config configures a Server. A zero field takes the default given in its
// comment.
type Config struct {
	// Client reads and steers the runs. Required.
	Client *workflow.Client
	// Redis is the client /readyz checks: it reads a key of the queue's
	// slot on the node that serves it (on a *redis.ClusterClient, the
	// master that owns that slot). Required.
	Redis redis.UniversalClient
	// Addr is the TCP address ListenAndServe listens on. Without Tokens it
	// must be a loopback address. Default DefaultAddr.
	Addr string
	// Tokens are the API tokens (see LoadTokens). None: authentication is
	// disabled, every caller is the admin AnonymousSubject, and the server
	// refuses to listen on anything but loopback.
	Tokens *Tokens
	// Monitoring is the Redis of the asynq queues that asynqmon, mounted
	// at /monitoring for admins, shows. Nil: /monitoring is not mounted.
	Monitoring asynq.RedisConnOpt
	// MonitoringWrite lets admins change tasks and queues in asynqmon
	// (delete, run, archive, pause). Default false: read-only.
	MonitoringWrite bool
	// Metrics serves /metrics. Default promhttp.Handler(), the default
	// Prometheus registry.
	Metrics http.Handler
	// Logger receives the server's logs. Default slog.Default().
	Logger *slog.Logger
	// Clock tells the time. Default workflow.SystemClock.
	Clock workflow.Clock
	// Heartbeat is the interval of the comment lines that keep an idle
	// event stream (GET /api/v1/events) open through proxies. Default 15s.
	Heartbeat time.Duration
	// EventWriteTimeout bounds each write of an event stream (GET
	// /api/v1/events) to its client: a client that has taken nothing of
	// its stream for that long is dropped, so that one that never reads
	// does not hold its connection and the kernel's buffers for ever.
	// Default 30s.
	EventWriteTimeout time.Duration
	// EventStreamsPerSubject is how many event streams one subject (admins
	// included; with authentication disabled, everyone is one subject) may
	// have open on this server at once; one more is answered 429. Each
	// server process counts its own: behind a load balancer a subject may
	// have this many on each replica. Default 8.
	EventStreamsPerSubject int
	// EventReplayEntries bounds the replay of an event stream resuming with
	// Last-Event-ID: it starts no earlier than the newest
	// EventReplayEntries entries of the notification stream (every
	// subject's entries count). Default 1000.
	EventReplayEntries int
	// EventReplayAge bounds it too: a replay starts with no notification
	// older than EventReplayAge. Of the two bounds, the more recent start
	// wins; a capped stream says so (see ReplayCapped). Default 24h.
	EventReplayAge time.Duration
	// CSRFKey is the secret of the CSRF tokens (see Server.CSRFToken).
	// Replicas behind one address need the same key:
	// CSRFKeyFromSecret derives one from a shared secret. Default: 32
	// random bytes, new in each process.
	CSRFKey []byte
	// ShutdownTimeout bounds how long ListenAndServe waits for requests in
	// flight once its context is done. Default 10s.
	ShutdownTimeout time.Duration
	// UI, when set, is called once by New to add the web UI's routes to
	// the server's mux (pages such as "GET /{$}", "GET /runs/{id}", "GET
	// /attention", "GET /signin", "POST /signin"; avoid a catch-all "/",
	// which would also answer unknown /api/ paths). Wrap pages with
	// RequireAuth, or call Authenticate to redirect to a sign-in page; the
	// API's JSON types (RunList, EventList, StreamEvent) and
	// Principal.CanSee are there to build on. Every route passes the same
	// request middleware (correlation ID, logging, cross-origin check).
	UI func(s *Server, mux *http.ServeMux)
}

// Server is Cairn's HTTP surface: the JSON API under /api/v1, the health
// and metrics endpoints, asynqmon under /monitoring, and the web UI's pages
// when Config.UI adds them.
type Server struct {
	cfg         Config
	client      *workflow.Client
	tokens      *Tokens
	log         *slog.Logger
	clock       workflow.Clock
	csrfKey     []byte
	crossOrigin *http.CrossOriginProtection
	mux         *http.ServeMux
	handler     http.Handler
	hub         *hub
	streams     *streamSlots
	monitoring  interface{ Close() error }

	closeOnce sync.Once

	// patterns are the patterns of the routes registered by handle, in
	// order (the OpenAPI test lists them).
	patterns []string
}

// ConfigError is a configuration the server refuses, naming the
// environment variables involved.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

// New returns a server. It refuses, with a *ConfigError, to be built
// without tokens for an address that is not loopback.
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil || cfg.Redis == nil {
		return nil, errors.New("dashboard: Config.Client and Config.Redis are required")
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = workflow.SystemClock
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.EventWriteTimeout <= 0 {
		cfg.EventWriteTimeout = 30 * time.Second
	}
	if cfg.EventStreamsPerSubject <= 0 {
		cfg.EventStreamsPerSubject = 8
	}
	if cfg.EventReplayEntries <= 0 {
		cfg.EventReplayEntries = 1000
	}
	if cfg.EventReplayAge <= 0 {
		cfg.EventReplayAge = 24 * time.Hour
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = defaultMetrics()
	}
	s := &Server{cfg: cfg, client: cfg.Client, tokens: cfg.Tokens, log: cfg.Logger, clock: cfg.Clock,
		csrfKey: cfg.CSRFKey, crossOrigin: http.NewCrossOriginProtection()}
	if s.tokens.Len() == 0 {
		s.tokens = nil
		if err := checkLoopback(cfg.Addr); err != nil {
			return nil, err
		}
	}
	if len(s.csrfKey) == 0 {
		s.csrfKey = make([]byte, 32)
		_, _ = rand.Read(s.csrfKey)
	}
	s.hub = newHub(cfg.Client, s.log)
	s.streams = newStreamSlots(cfg.EventStreamsPerSubject)
	s.mux = http.NewServeMux()
	s.routes()
	if cfg.UI != nil {
		cfg.UI(s, s.mux)
	}
	s.handler = s.observe(http.HandlerFunc(s.serveMux))
	return s, nil
}

// checkLoopback refuses an address that is not loopback-only: an
// unauthenticated server must not be reachable from other hosts.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err == nil {
		if host == "localhost" {
			return nil
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			return nil
		}
	}
	return &ConfigError{Msg: fmt.Sprintf(
		"CAIRN_HTTP_ADDR=%q is not a loopback address and CAIRN_API_TOKENS_FILE is not set: "+
			"the HTTP API would be open to anyone; set CAIRN_API_TOKENS_FILE, or listen on 127.0.0.1 (or set CAIRN_HTTP_ADDR empty to disable it)",
		addr)}
}

// Handler returns the server's handler, for a caller that runs its own
// http.Server (tests, embedding). Call Close when done with it.
func (s *Server) Handler() http.Handler { return s.handler }

// Mux returns the server's mux, for adding routes after New (Config.UI is
// the usual place).
func (s *Server) Mux() *http.ServeMux { return s.mux }

// Client returns the workflow client the server uses.
func (s *Server) Client() *workflow.Client { return s.client }

// Logger returns the server's logger.
func (s *Server) Logger() *slog.Logger { return s.log }

// Close releases what the server holds (asynqmon's Redis connections). It
// does not stop a running ListenAndServe: cancel its context.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.hub.stop()
		if s.monitoring != nil {
			err = s.monitoring.Close()
		}
	})
	return err
}

// ListenAndServe listens on Config.Addr and serves until ctx is done, then
// shuts down gracefully: open event streams end, requests in flight get up
// to Config.ShutdownTimeout. It returns nil after a graceful shutdown.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("HTTP API: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve is ListenAndServe on a listener the caller opened; it closes it.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	defer s.Close()
	if s.AuthDisabled() {
		if err := checkLoopback(ln.Addr().String()); err != nil {
			_ = ln.Close()
			return err
		}
	}
	base, stopStreams := context.WithCancel(context.Background())
	defer stopStreams()
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second, // event streams set their own, per write
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.log.With("component", "http").Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("HTTP API listening", "addr", ln.Addr().String(), "auth_disabled", s.AuthDisabled(),
		"monitoring", s.monitoring != nil)
	select {
	case err := <-errc:
		return fmt.Errorf("HTTP API: %w", err)
	case <-ctx.Done():
	}
	stopStreams() // event streams end now; Shutdown would wait for them
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-errc //nolint:errcheck // Serve's http.ErrServerClosed, after Shutdown
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("HTTP API shutdown: %w", err)
	}
	s.log.Info("HTTP API stopped")
	return nil
}

// RequireAuth wraps h: a request without valid credentials gets 401 (a
// cookie-authenticated state change without its CSRF token 403), others
// reach h with their Principal in the context (see PrincipalFrom). With
// admin set, a caller who is not an admin gets 403.
func (s *Server) RequireAuth(admin bool, h http.Handler) http.Handler {
	return s.requireAuth(admin, false, h)
}

// requireAuth is RequireAuth; with csrfExempt a cookie-authenticated state
// change needs no CSRF token (see mountMonitoring).
func (s *Server) requireAuth(admin, csrfExempt bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticate(r, !csrfExempt)
		switch {
		case errors.Is(err, errCSRF):
			writeProblem(w, r, http.StatusForbidden, ProblemCSRF,
				"a state-changing request authenticated by cookie needs the header "+CSRFHeader)
			return
		case err != nil:
			writeProblem(w, r, http.StatusUnauthorized, ProblemUnauthorized,
				"send a valid token in the header \"Authorization: Bearer <token>\"")
			return
		}
		reqState(r).subject = p.Subject
		if admin && !p.IsAdmin() {
			writeProblem(w, r, http.StatusForbidden, ProblemForbidden, "this needs the admin role")
			return
		}
		h.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
	})
}

// serveMux routes a request; a request no route matches gets its 404 or 405
// as a problem under /api/, as plain text elsewhere.
func (s *Server) serveMux(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	if pattern == "" && strings.HasPrefix(r.URL.Path, "/api/") {
		rec := &statusOnly{header: w.Header()}
		h.ServeHTTP(rec, r)
		switch rec.status {
		case http.StatusMethodNotAllowed:
			writeProblem(w, r, rec.status, ProblemMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path)
		case http.StatusNotFound:
			writeProblem(w, r, rec.status, ProblemNotFound, "no such endpoint: "+r.URL.Path)
		default: // a redirect (path cleaning): let the mux answer
			s.mux.ServeHTTP(w, r)
		}
		return
	}
	s.mux.ServeHTTP(w, r)
}

// statusOnly captures the status and headers of the mux's own 404 and 405
// answers (the Allow header of a 405 is kept) and drops their text.
type statusOnly struct {
	header http.Header
	status int
}

func (s *statusOnly) Header() http.Header { return s.header }
func (s *statusOnly) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
}
func (s *statusOnly) Write(b []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	return len(b), nil
}
