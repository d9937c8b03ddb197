// Package otelsetup configures OpenTelemetry tracing for Cairn's CLI from
// the standard OTEL_* environment variables: when tracing is on and what
// is refused are internal/otelenv's, as for the worker (workflow/oteltrace);
// the exporter is OTLP only (OTEL_TRACES_EXPORTER "otlp" or "none"), over
// "http/protobuf" (the default) or "grpc". The worker's
// workflow/oteltrace makes its exporter with OpenTelemetry's autoexport,
// which links the OTLP exporters of metrics and logs too: the CLI, which
// exports one span per `enqueue start`, links only the trace exporters.
// Everything else (endpoint, headers, TLS, timeout, compression, the
// sampler, the batch processor's settings, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES) is read by the OpenTelemetry SDK and its
// exporters themselves.
package otelsetup

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairnhq/cairn/internal/otelenv"
)

// Tracing is the tracer provider of a binary and how to flush it.
type Tracing struct {
	// Provider is nil when tracing is off.
	Provider trace.TracerProvider
	// Protocol is the OTLP protocol in use ("" when off).
	Protocol string
	// Shutdown flushes the spans not yet exported and stops the exporter.
	Shutdown func(context.Context) error
}

// Getenv reads an environment variable (os.Getenv, or a test's map).
type Getenv func(string) string

// FromEnv returns the tracing the environment asks for; service is the
// service.name to use when OTEL_SERVICE_NAME does not set one. A value it
// cannot use (an unknown protocol or exporter) is an error, so a typo does
// not silently turn tracing off.
func FromEnv(ctx context.Context, service string, getenv Getenv) (*Tracing, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	choice, err := otelenv.Decide(getenv, []string{"otlp"})
	if err != nil {
		return nil, err
	}
	if choice.Off() {
		return &Tracing{Shutdown: func(context.Context) error { return nil }}, nil
	}
	var exp sdktrace.SpanExporter
	if choice.Protocol == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	tp, err := otelenv.Provider(exp, service)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, err
	}
	return &Tracing{Provider: tp, Protocol: choice.Protocol, Shutdown: tp.Shutdown}, nil
}
