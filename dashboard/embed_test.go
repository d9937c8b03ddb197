package dashboard_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/embedded"
)

// embeddedRedis is a client of a fresh embedded store.
func embeddedRedis(t *testing.T) *redis.Client {
	t.Helper()
	store, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	rdb := redis.NewClient(&redis.Options{Addr: store.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// get sends a GET to url with token (none: "") and returns the status and
// the body.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMount: the dashboard, the API and /metrics on a service's mux, with
// the tokens of the worker's tokens file, next to the service's routes.
func TestMount(t *testing.T) {
	t.Parallel()
	rdb := embeddedRedis(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(tokensFile), 0o600); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "the service's orders") })
	mux.HandleFunc("GET /api/v1/orders", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "the service's API") })
	srv, err := dashboard.Mount(mux, dashboard.Options{
		Redis:      rdb,
		Queue:      "mount",
		TokensFile: tokens,
		Metrics:    http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "cairn_metrics 1\n") }),
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if srv.AuthDisabled() {
		t.Fatal("Mount with a tokens file: authentication disabled")
	}
	hs := httptest.NewServer(mux)
	defer hs.Close()
	for _, c := range []struct {
		path, token string
		status      int
		body        string
	}{
		{"/orders", "", 200, "the service's orders"},
		{"/api/v1/orders", "", 200, "the service's API"},
		{"/api/v1/me", aliceToken, 200, `"subject":"alice"`},
		{"/api/v1/me", "", 401, "urn:cairn:problem:unauthorized"},
		{"/api/v1/no-such-endpoint", aliceToken, 404, "urn:cairn:problem:not-found"},
		{"/api/v1/workflows", rootToken, 200, `"runs"`},
		{"/healthz", "", 200, ""},
		{"/metrics", rootToken, 200, "cairn_metrics 1"},
		{"/metrics", "", 401, "unauthorized"},
		{"/signin", "", 200, "<form"},
		{"/nothing-here", "", 404, "404 page not found"},
	} {
		status, body := get(t, hs.URL+c.path, c.token)
		if status != c.status || !strings.Contains(body, c.body) {
			t.Errorf("GET %s: %d %.200q, want %d with %q", c.path, status, body, c.status, c.body)
		}
	}
}

// TestMountRefusesTakenRoutes: a mux that routes one of the dashboard's
// paths already is refused, and nothing of the dashboard is registered.
func TestMountRefusesTakenRoutes(t *testing.T) {
	t.Parallel()
	rdb := embeddedRedis(t)
	for _, taken := range []string{"GET /metrics", "/api/v1/", "/{$}", "POST /signin"} {
		mux := http.NewServeMux()
		mux.HandleFunc(taken, func(http.ResponseWriter, *http.Request) {})
		_, err := dashboard.Mount(mux, dashboard.Options{Redis: rdb, Logger: slog.New(slog.DiscardHandler)})
		if err == nil || !strings.Contains(err.Error(), "already") {
			t.Errorf("%s taken: Mount said %v, want an error", taken, err)
			continue
		}
		if _, p := mux.Handler(httptest.NewRequest(http.MethodGet, "/healthz", nil)); p != "" {
			t.Errorf("%s taken: /healthz is routed to %q after the error, want nothing registered", taken, p)
		}
	}
	// A catch-all of the service's is fine: the dashboard's patterns are
	// more specific.
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(http.ResponseWriter, *http.Request) {})
	srv, err := dashboard.Mount(mux, dashboard.Options{Redis: rdb, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("a catch-all: %v", err)
	}
	_ = srv.Close()
}

// TestMountWithoutTokens: without a tokens file the routes answer
// requests that came in on loopback, and 403 to the others.
func TestMountWithoutTokens(t *testing.T) {
	t.Parallel()
	rdb := embeddedRedis(t)
	mux := http.NewServeMux()
	srv, err := dashboard.Mount(mux, dashboard.Options{Redis: rdb, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(mux) // on 127.0.0.1
	defer hs.Close()
	if status, body := get(t, hs.URL+"/api/v1/me", ""); status != 200 || !strings.Contains(body, `"role":"admin"`) {
		t.Errorf("on loopback: %d %q, want 200 as the admin", status, body)
	}
	for _, local := range []net.Addr{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 8080}, nil} {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/me", nil)
		if local != nil {
			req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, local))
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "CAIRN_API_TOKENS_FILE") {
			t.Errorf("on %v: %d %q, want 403 naming the tokens file", local, rec.Code, rec.Body.String())
		}
	}
}

// TestOpen: what Open refuses, and the CSRF key of a shared secret.
func TestOpen(t *testing.T) {
	t.Parallel()
	rdb := embeddedRedis(t)
	quiet := slog.New(slog.DiscardHandler)
	_, err := dashboard.Open(dashboard.Options{Redis: rdb, TokensFile: filepath.Join(t.TempDir(), "missing"), Logger: quiet})
	if _, ok := errors.AsType[*dashboard.ConfigError](err); !ok || !strings.HasPrefix(err.Error(), "CAIRN_API_TOKENS_FILE: ") {
		t.Errorf("a missing tokens file: %v, want a ConfigError naming CAIRN_API_TOKENS_FILE", err)
	}
	_, err = dashboard.Open(dashboard.Options{Redis: rdb, Addr: "0.0.0.0:8080", Logger: quiet})
	if _, ok := errors.AsType[*dashboard.ConfigError](err); !ok {
		t.Errorf("no tokens on every interface: %v, want a ConfigError", err)
	}
	if _, err := dashboard.Open(dashboard.Options{}); err == nil {
		t.Error("no Redis: accepted")
	}
	const secret = "4e07408562bedb8b60ce05c1decfe3ad16b72230967de01f640b7e4729b49fce"
	csrf := func(secret string) string {
		s, err := dashboard.Open(dashboard.Options{Redis: rdb, Secret: secret, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return s.CSRFToken(aliceToken)
	}
	if a, b := csrf(secret), csrf(secret); a != b {
		t.Errorf("two servers of one secret: CSRF tokens %q and %q, want the same", a, b)
	}
	if a, b := csrf(""), csrf(""); a == b {
		t.Errorf("two servers without a secret: the same CSRF token %q, want random keys", a)
	}
}

// TestMountCoversEveryRoute: every route the server registers (Routes:
// the API, health, metrics, asynqmon) reaches the server through a mux
// that Mount filled, so a route added later under a new prefix fails here
// until MountPatterns has it.
func TestMountCoversEveryRoute(t *testing.T) {
	t.Parallel()
	rdb := embeddedRedis(t)
	mux := http.NewServeMux()
	srv, err := dashboard.Mount(mux, dashboard.Options{Redis: rdb, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	wildcard := regexp.MustCompile(`\{[^}]*\}`)
	routes := dashboard.Routes(srv)
	if len(routes) < 10 {
		t.Fatalf("Routes: %v, want the server's routes", routes)
	}
	for _, pattern := range routes {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			method, path = http.MethodGet, pattern
		}
		path = strings.TrimSuffix(wildcard.ReplaceAllString(path, "x"), "/") + "/"
		if !strings.HasSuffix(pattern, "/") {
			path = strings.TrimSuffix(path, "/")
		}
		if path == "" {
			path = "/"
		}
		_, got := mux.Handler(httptest.NewRequest(method, path, nil))
		if !slices.Contains(dashboard.MountPatterns, got) {
			t.Errorf("route %q (%s %s) reaches %q on the service's mux, not one of MountPatterns", pattern, method, path, got)
		}
	}
}
