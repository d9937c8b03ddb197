package otelsetup_test

import (
	"context"
	"net"
	"net/http/httptest"
	"strings"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/cairnhq/cairn/cmd/internal/otelsetup"
	"github.com/cairnhq/cairn/internal/testkit"
)

// names returns what a receiver was sent, as "service/span".
func names(o *testkit.OTLPReceiver) []string {
	var out []string
	for _, s := range o.Spans() {
		out = append(out, s.Service+"/"+s.Name)
	}
	return out
}

// exportOne makes the tracing the environment asks for, records one span
// and flushes it.
func exportOne(t *testing.T, wantProto string) {
	t.Helper()
	tr, err := otelsetup.FromEnv(context.Background(), "cairn-worker", nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Provider == nil || tr.Protocol != wantProto {
		t.Fatalf("tracing %+v, want on with %s", tr, wantProto)
	}
	_, span := tr.Provider.Tracer("test").Start(context.Background(), "hello")
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown (the export): %v", err)
	}
}

// TestExportOverHTTP: with an endpoint set, spans go to it over
// OTLP/HTTP (protobuf), with the service name from OTEL_SERVICE_NAME.
func TestExportOverHTTP(t *testing.T) {
	var got testkit.OTLPReceiver
	srv := httptest.NewServer(&got)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "svc-http")
	exportOne(t, "http/protobuf")
	if s := names(&got); len(s) != 1 || s[0] != "svc-http/hello" {
		t.Errorf("received %v, want [svc-http/hello]", s)
	}
}

// TestExportOverGRPC: OTEL_EXPORTER_OTLP_PROTOCOL=grpc exports over gRPC;
// without OTEL_SERVICE_NAME the service is cairn-worker.
func TestExportOverGRPC(t *testing.T) {
	var got testkit.OTLPReceiver
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(gs, &got)
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_SERVICE_NAME", "")
	exportOne(t, "grpc")
	if s := names(&got); len(s) != 1 || s[0] != "cairn-worker/hello" {
		t.Errorf("received %v, want [cairn-worker/hello]", s)
	}
}

// TestFromEnv: when tracing is off, and what is refused.
func TestFromEnv(t *testing.T) {
	for _, c := range []struct {
		env     map[string]string
		on      bool
		wantErr string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_SERVICE_NAME": "x"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: "OTEL_TRACES_EXPORTER"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			wantErr: "OTEL_EXPORTER_OTLP_PROTOCOL"},
	} {
		tr, err := otelsetup.FromEnv(context.Background(), "cairn-worker", func(k string) string { return c.env[k] })
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v: error %v, want one naming %s", c.env, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", c.env, err)
			continue
		}
		if (tr.Provider != nil) != c.on {
			t.Errorf("%v: tracing on %v, want %v", c.env, tr.Provider != nil, c.on)
		}
		if err := tr.Shutdown(context.Background()); err != nil && !c.on {
			t.Errorf("%v: shutdown of tracing that is off: %v", c.env, err)
		}
	}
}
