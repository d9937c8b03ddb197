package e2e

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// span is what the test reads of an exported span.
type span struct {
	service, name, trace, parent, id string
}

// otlpReceiver is a loopback OTLP/HTTP trace receiver.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []span
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	var req coltrace.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				o.spans = append(o.spans, span{service: service, name: s.GetName(), trace: hex.EncodeToString(s.GetTraceId()),
					parent: hex.EncodeToString(s.GetParentSpanId()), id: hex.EncodeToString(s.GetSpanId())})
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

func (o *otlpReceiver) named(name string) []span {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []span
	for _, s := range o.spans {
		if s.name == name {
			out = append(out, s)
		}
	}
	return out
}

// TestTracingExported: worker binaries with OTEL_EXPORTER_OTLP_ENDPOINT set
// export their spans over OTLP/HTTP; a run started through the HTTP API
// with a W3C traceparent header joins the caller's trace: the API's start
// span is a child of the header's span, and every attempt belongs to it,
// on either of two workers: the step that fails on the first worker is
// retried on the second (the first stopped in between), which also records
// the run's span.
func TestTracingExported(t *testing.T) {
	var recv otlpReceiver
	collector := httptest.NewServer(&recv)
	defer collector.Close()
	srv := redistest.Start(t, nil)
	bin := proctest.Build(t, workerPkg)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(browserAdminToken+" root admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	const queue = "traced-e2e"
	otel := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_BSP_SCHEDULE_DELAY=100",
		"CAIRN_RETRY_INITIAL_INTERVAL=3s", "CAIRN_RETRY_JITTER=none"}
	w := startWorker(t, bin, workerEnv(srv, queue, append(otel, "CAIRN_HTTP_ADDR="+addr, "CAIRN_API_TOKENS_FILE="+tokens,
		"OTEL_SERVICE_NAME=e2e-worker-a")...))
	w.WaitForOutput(t, "tracing with OpenTelemetry", 10*time.Second)
	w.WaitForOutput(t, "HTTP API listening", 30*time.Second)

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/workflows",
		strings.NewReader(`{"workflow":"demo","input":{"fail_step":"transform","fail_times":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+browserAdminToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/v1/workflows: %d %s", resp.StatusCode, body)
	}
	client := workflow.NewClient(srv.Client(t), workflow.ClientConfig{Queue: queue})
	runs, _, err := client.List(ctxb, workflow.ListOptions{Limit: 1})
	if err != nil || len(runs) != 1 {
		t.Fatalf("list: %v %v", runs, err)
	}
	// The first worker fails transform's first attempt, then stops (its
	// spans are exported as it does); the second runs the retry.
	testkit.Eventually(t, 20*time.Second, "transform's retry to be scheduled", func() bool {
		r, err := client.Get(ctxb, runs[0].ID)
		return err == nil && r.Step("transform").RetryState == workflow.RetryScheduled
	})
	w.Signal(t, syscall.SIGTERM)
	if code := w.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the first worker exited %d", code)
	}
	startWorker(t, bin, workerEnv(srv, queue, append(otel, "OTEL_SERVICE_NAME=e2e-worker-b")...))
	if r := testkit.WaitRun(t, client, runs[0].ID, 30*time.Second); r.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s", r.Status)
	}
	testkit.Eventually(t, 20*time.Second, "the run's span to be exported", func() bool { return len(recv.named("cairn.run demo")) == 1 })

	start := recv.named("cairn.start demo")
	if len(start) != 1 || start[0].trace != traceID || start[0].parent != parentID || start[0].service != "e2e-worker-a" {
		t.Fatalf("start spans %+v, want one in trace %s, child of %s, from e2e-worker-a", start, traceID, parentID)
	}
	for step, want := range map[string]string{"fetch": "a", "transform": "a b", "deliver": "b"} {
		got := recv.named("cairn.attempt demo." + step)
		var by []string
		for _, s := range got {
			by = append(by, strings.TrimPrefix(s.service, "e2e-worker-"))
		}
		if strings.Join(by, " ") != want {
			t.Errorf("attempt spans of %s from workers %v, want %s", step, by, want)
		}
		for _, s := range got {
			if s.trace != traceID || s.parent != start[0].id {
				t.Errorf("attempt of %s in trace %s with parent %s, want %s and the start span %s", step, s.trace, s.parent,
					traceID, start[0].id)
			}
		}
	}
	if rs := recv.named("cairn.run demo"); rs[0].trace != traceID || rs[0].parent != start[0].id || rs[0].service != "e2e-worker-b" {
		t.Errorf("run span %+v, want in trace %s, child of the start span", rs[0], traceID)
	}
}
