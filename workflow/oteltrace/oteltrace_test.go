package oteltrace_test

import (
	"context"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow/oteltrace"
)

// clearOTEL unsets the OTEL_* variables of the test's environment.
func clearOTEL(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// exportOne makes the tracing the environment asks for, records one span
// and flushes it.
func exportOne(t *testing.T, wantExporter, wantProto string) {
	t.Helper()
	tr, err := oteltrace.FromEnv(context.Background(), "cairn-worker")
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled() || tr.Exporter() != wantExporter || tr.Protocol() != wantProto {
		t.Fatalf("tracing on %v with %q over %q, want on with %s over %q", tr.Enabled(), tr.Exporter(), tr.Protocol(),
			wantExporter, wantProto)
	}
	_, span := tr.TracerProvider().Tracer("test").Start(context.Background(), "hello")
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown (the export): %v", err)
	}
}

func names(o *testkit.OTLPReceiver) []string {
	var out []string
	for _, s := range o.Spans() {
		out = append(out, s.Service+"/"+s.Name)
	}
	return out
}

// TestExportOverHTTP: with an endpoint set, spans go to it over
// OTLP/HTTP (protobuf), with the service name from OTEL_SERVICE_NAME.
func TestExportOverHTTP(t *testing.T) {
	clearOTEL(t)
	var got testkit.OTLPReceiver
	srv := httptest.NewServer(&got)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "svc-http")
	exportOne(t, "otlp", "http/protobuf")
	if s := names(&got); len(s) != 1 || s[0] != "svc-http/hello" {
		t.Errorf("received %v, want [svc-http/hello]", s)
	}
}

// TestExportOverGRPC: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc exports over
// gRPC, whatever OTEL_EXPORTER_OTLP_PROTOCOL says; without
// OTEL_SERVICE_NAME the service is FromEnv's.
func TestExportOverGRPC(t *testing.T) {
	clearOTEL(t)
	var got testkit.OTLPReceiver
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(gs, &got)
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"+ln.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
	exportOne(t, "otlp", "grpc")
	if s := names(&got); len(s) != 1 || s[0] != "cairn-worker/hello" {
		t.Errorf("received %v, want [cairn-worker/hello]", s)
	}
}

// TestConsole: OTEL_TRACES_EXPORTER=console writes the spans as JSON on
// standard output (the exporter's writer is the process's os.Stdout as the
// program starts: the test runs itself, and reads what the child wrote).
func TestConsole(t *testing.T) {
	if os.Getenv("OTELTRACE_CONSOLE_CHILD") == "1" {
		exportOne(t, "console", "")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestConsole$", "-test.count=1")
	cmd.Env = append(os.Environ(), "OTELTRACE_CONSOLE_CHILD=1", "OTEL_TRACES_EXPORTER=console",
		"OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_SDK_DISABLED=")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"Name":"hello"`) {
		t.Errorf("the child: %v; output %q, want the span hello as JSON", err, out)
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
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: `OTEL_TRACES_EXPORTER="zipkin": this program supports otlp, console and none`},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			wantErr: `OTEL_EXPORTER_OTLP_PROTOCOL="http/json": use http/protobuf or grpc`},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "thrift"},
			wantErr: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
	} {
		clearOTEL(t)
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		tr, err := oteltrace.FromEnv(context.Background(), "cairn-worker")
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v: error %v, want %s", c.env, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", c.env, err)
			continue
		}
		if tr.Enabled() != c.on || (tr.TracerProvider() != nil) != c.on {
			t.Errorf("%v: tracing on %v (provider %v), want %v", c.env, tr.Enabled(), tr.TracerProvider(), c.on)
		}
		if err := tr.Shutdown(context.Background()); err != nil && !c.on {
			t.Errorf("%v: shutdown of tracing that is off: %v", c.env, err)
		}
	}
}
