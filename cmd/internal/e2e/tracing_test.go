package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestTracingExported: worker binaries with OTEL_EXPORTER_OTLP_ENDPOINT set
// export their spans over OTLP/HTTP; a run started through the HTTP API
// with a W3C traceparent header joins the caller's trace: the API's start
// span is a child of the header's span, and every attempt belongs to it,
// on either of two workers: the step that fails on the first worker is
// retried on the second (the first stopped in between), which also records
// the run's span.
func TestTracingExported(t *testing.T) {
	var recv testkit.OTLPReceiver
	collector := httptest.NewServer(&recv)
	defer collector.Close()
	srv := redistest.Start(t, nil)
	bin := proctest.Build(t, workerPkg)
	const queue = "traced-e2e"
	otel := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL, "OTEL_BSP_SCHEDULE_DELAY=100",
		"CAIRN_RETRY_INITIAL_INTERVAL=3s", "CAIRN_RETRY_JITTER=none"}
	w, base, client := startAPIWorker(t, bin, srv, queue, append(otel, "OTEL_SERVICE_NAME=e2e-worker-a")...)
	w.WaitForOutput(t, "tracing with OpenTelemetry", 10*time.Second)

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/workflows",
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
	runs, _, err := client.List(ctxb, workflow.ListOptions{Limit: 1})
	if err != nil || len(runs) != 1 {
		t.Fatalf("list: %v %v", runs, err)
	}
	// The first worker fails transform's first attempt, then stops (its
	// spans are exported as it does); the second runs the retry.
	testkit.Premise(t, 20*time.Second, "transform's retry to be scheduled", func() bool {
		r, err := client.Get(ctxb, runs[0].ID)
		return err == nil && r.Step("transform").RetryState == workflow.RetryScheduled
	})
	w.Signal(t, syscall.SIGTERM)
	if code := w.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the first worker exited %d", code)
	}
	if r, err := client.Get(ctxb, runs[0].ID); err != nil || r.Step("transform").Attempts != 1 {
		t.Fatalf("premise: transform's retry began before the first worker stopped (%v); the test needs it on the second", err)
	}
	startWorker(t, bin, workerEnv(srv, queue, append(otel, "OTEL_SERVICE_NAME=e2e-worker-b")...))
	if r := testkit.WaitRun(t, client, runs[0].ID, 30*time.Second); r.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s", r.Status)
	}
	testkit.Eventually(t, 20*time.Second, "the run's span to be exported", func() bool { return len(recv.Named("cairn.run demo")) == 1 })

	start := recv.Named("cairn.start demo")
	if len(start) != 1 || start[0].Trace != traceID || start[0].Parent != parentID || start[0].Service != "e2e-worker-a" {
		t.Fatalf("start spans %+v, want one in trace %s, child of %s, from e2e-worker-a", start, traceID, parentID)
	}
	for step, want := range map[string]string{"fetch": "a", "transform": "a b", "deliver": "b"} {
		got := recv.Named("cairn.attempt demo." + step)
		var by []string
		for _, s := range got {
			by = append(by, strings.TrimPrefix(s.Service, "e2e-worker-"))
		}
		if strings.Join(by, " ") != want {
			t.Errorf("attempt spans of %s from workers %v, want %s", step, by, want)
		}
		for _, s := range got {
			if s.Trace != traceID || s.Parent != start[0].ID {
				t.Errorf("attempt of %s in trace %s with parent %s, want %s and the start span %s", step, s.Trace, s.Parent,
					traceID, start[0].ID)
			}
		}
	}
	if rs := recv.Named("cairn.run demo"); rs[0].Trace != traceID || rs[0].Parent != start[0].ID || rs[0].Service != "e2e-worker-b" {
		t.Errorf("run span %+v, want in trace %s, child of the start span", rs[0], traceID)
	}
}
