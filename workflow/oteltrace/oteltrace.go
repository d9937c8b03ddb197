// Package oteltrace sets up OpenTelemetry tracing from the standard OTEL_*
// environment variables, as Cairn's worker does, for a Go service that
// embeds Cairn: pass [Tracing.TracerProvider] to
// workflow.EngineConfig.TracerProvider (and ClientConfig's, and
// dashboard.Options') and every run becomes a trace (docs/go.md, Tracing).
//
// Tracing is on when an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT
// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER names an
// exporter, and off when OTEL_SDK_DISABLED is "true" or
// OTEL_TRACES_EXPORTER is "none". (The specification's default exporter
// is otlp to localhost; a service with no collector would then log export
// failures forever, so the endpoint or the exporter must be named.) The
// exporter is made by OpenTelemetry's autoexport package
// (go.opentelemetry.io/contrib/exporters/autoexport): OTEL_TRACES_EXPORTER
// "otlp" (the default), over OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL, "http/protobuf" (the default) or "grpc";
// or "console", spans as JSON on standard output. Another exporter or
// protocol is an error, so a typo does not silently turn tracing off.
// Everything else (endpoint, headers, TLS, timeout, compression, the
// sampler, the batch processor's settings, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES) is read by the SDK and the exporters
// themselves, from the process's environment.
//
// Linking this package links autoexport, and with it the OTLP exporters
// of traces, metrics and logs (a few megabytes); Cairn's CLI, which
// exports only the span of `enqueue start`, sets up its tracing without
// it.
package oteltrace

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairnhq/cairn/internal/otelenv"
)

// Exporters are the values of OTEL_TRACES_EXPORTER that FromEnv accepts
// besides "none".
var Exporters = []string{"otlp", "console"}

// Tracing is a process's tracing: its TracerProvider, or none when the
// environment leaves tracing off.
type Tracing struct {
	provider *sdktrace.TracerProvider
	exporter string
	protocol string
}

// FromEnv returns the tracing the OTEL_* environment asks for; service is
// the service.name of the spans when OTEL_SERVICE_NAME (or
// OTEL_RESOURCE_ATTRIBUTES) does not set one. Call Shutdown before the
// process exits, to export the spans still buffered.
func FromEnv(ctx context.Context, service string) (*Tracing, error) {
	choice, err := otelenv.Decide(os.Getenv, Exporters)
	if err != nil {
		return nil, err
	}
	if choice.Off() {
		return &Tracing{}, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry %s trace exporter: %w", choice.Exporter, err)
	}
	tp, err := otelenv.Provider(exp, service)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, err
	}
	return &Tracing{provider: tp, exporter: choice.Exporter, protocol: choice.Protocol}, nil
}

// Enabled reports whether tracing is on.
func (t *Tracing) Enabled() bool { return t.provider != nil }

// TracerProvider returns the provider, or nil when tracing is off (an
// engine or client given nil does no tracing work).
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t.provider == nil {
		return nil
	}
	return t.provider
}

// Exporter is OTEL_TRACES_EXPORTER's value in force ("otlp" when only an
// endpoint is set; "" when tracing is off).
func (t *Tracing) Exporter() string { return t.exporter }

// Protocol is the OTLP protocol in use, "http/protobuf" or "grpc" (""
// for another exporter, or when tracing is off).
func (t *Tracing) Protocol() string { return t.protocol }

// Shutdown exports the spans not yet exported, within ctx, and stops the
// exporter. It does nothing when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.provider == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}
