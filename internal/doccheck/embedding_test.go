package doccheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/metrics"
	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/oteltrace"
	"github.com/cairnhq/cairn/workflow/redisurl"
)

// docs/embedding.md's service, which docs/examples/service/main.go holds
// too (TestEmbeddingExampleIsTheDocs).

// snippet: embedding-service
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

// end snippet

// TestEmbeddingService runs docs/embedding.md's service on a redis-server
// with the worker's variables: a run started through the service's own
// route succeeds on its embedded worker; the dashboard's API and /metrics
// answer on the service's mux with the tokens file's tokens; the run's
// spans reach the OTLP endpoint of OTEL_EXPORTER_OTLP_ENDPOINT; and the
// service stops when its context ends.
func TestEmbeddingService(t *testing.T) {
	srv := redistest.Start(t, nil)
	var spans testkit.OTLPReceiver
	collector := httptest.NewServer(&spans)
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_SDK_DISABLED", "")
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("svc-admin-token-000001 root admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	env := map[string]string{
		"CAIRN_REDIS_URL":        srv.URL(),
		"CAIRN_API_TOKENS_FILE":  tokens,
		"CAIRN_DASHBOARD_SECRET": "4e07408562bedb8b60ce05c1decfe3ad16b72230967de01f640b7e4729b49fce",
		"ADDR":                   addr,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, func(k string) string { return env[k] }) }()

	base := "http://" + addr
	var runID string
	testkit.Eventually(t, deadline, "the service to start a run on POST /orders", func() bool {
		resp, err := http.PostForm(base+"/orders", url.Values{"sku": {"A-1"}})
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var got struct {
			RunID string `json:"run_id"`
		}
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&got) == nil && (func() bool { runID = got.RunID; return runID != "" })()
	})
	client := workflow.NewClient(srv.Client(t), workflow.ClientConfig{Queue: "orders", Logger: slog.New(slog.DiscardHandler)})
	if r := testkit.WaitRun(t, client, runID, deadline); r.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s: %s (%s), want succeeded", runID, r.Status, r.FailureReason)
	}
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
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
	for _, c := range []struct {
		path, token string
		status      int
		body        string
	}{
		{"/api/v1/workflows/" + runID, "svc-admin-token-000001", 200, `"status":"succeeded"`},
		{"/api/v1/workflows/" + runID, "", 401, "unauthorized"},
		{"/metrics", "svc-admin-token-000001", 200, `cairn_runs_finished_total{code="",status="succeeded",workflow="order"} 1`},
		{"/readyz", "", 200, ""},
	} {
		if status, body := get(c.path, c.token); status != c.status || !strings.Contains(body, c.body) {
			t.Errorf("GET %s: %d %.300q, want %d with %q", c.path, status, body, c.status, c.body)
		}
	}
	testkit.Eventually(t, deadline, "the run's span to reach the collector", func() bool {
		return len(spans.Named("cairn.run order")) == 1
	})
	if s := spans.Named("cairn.run order")[0]; s.Service != "orders" {
		t.Errorf("the run's span is of service %q, want orders", s.Service)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the service returned %v", err)
		}
	case <-time.After(deadline):
		t.Fatal("the service did not stop when its context ended")
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("the service still listens after it stopped")
	}
}

// TestEmbeddingExampleIsTheDocs: docs/examples/service/main.go, which its
// Dockerfile builds, holds docs/embedding.md's service as it is.
func TestEmbeddingExampleIsTheDocs(t *testing.T) {
	main, err := os.ReadFile(filepath.Join("..", "..", "docs", "examples", "service", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("embedding_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(self), "// snippet: embedding-service\n")
	region, _, ok := strings.Cut(rest, "// end snippet")
	if !ok || region == "" {
		t.Fatal("embedding_test.go has no region embedding-service")
	}
	if !strings.Contains(string(main), strings.TrimSpace(region)+"\n") {
		t.Error("docs/examples/service/main.go does not hold the region embedding-service of embedding_test.go as it is: copy it there")
	}
}
