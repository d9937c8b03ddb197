package oteltrace_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"time"

	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow/oteltrace"
)

// With no OTEL_* variable set, tracing is off: TracerProvider is nil,
// and an engine given nil does no tracing work.
func ExampleFromEnv() {
	os.Unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	os.Unsetenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	os.Unsetenv("OTEL_TRACES_EXPORTER")
	tracing, err := oteltrace.FromEnv(context.Background(), "orders-service")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(tracing.Enabled(), tracing.TracerProvider() == nil)
	// Output: false true
}

// Spans to the OTLP endpoint of OTEL_EXPORTER_OTLP_ENDPOINT (here a
// receiver of the example's own): give TracerProvider to
// workflow.EngineConfig and workflow.ClientConfig, and every run is a
// trace.
func ExampleTracing_TracerProvider() {
	var collector testkit.OTLPReceiver
	srv := httptest.NewServer(&collector)
	defer srv.Close()
	os.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	defer os.Unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT")

	tracing, err := oteltrace.FromEnv(context.Background(), "orders-service") // a bad OTEL_* value is an error
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(tracing.Enabled(), tracing.Exporter(), tracing.Protocol())
	// workflow.EngineConfig{TracerProvider: tracing.TracerProvider(), ...}
	_, span := tracing.TracerProvider().Tracer("example").Start(context.Background(), "hello")
	span.End()
	// Before the process exits: export the spans still buffered.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tracing.Shutdown(ctx); err != nil {
		fmt.Println(err)
	}
	for _, s := range collector.Spans() {
		fmt.Println(s.Service, s.Name)
	}
	// Output:
	// true otlp http/protobuf
	// orders-service hello
}
