// Package otelsetup configures OpenTelemetry tracing for Cairn's binaries
// from the standard OTEL_* environment variables.
//
// Tracing is on when an OTLP endpoint is configured (OTEL_EXPORTER_OTLP_ENDPOINT
// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER is "otlp",
// and off when OTEL_SDK_DISABLED is "true" or OTEL_TRACES_EXPORTER is
// "none". (The specification's default exporter is otlp to localhost; a
// worker with no collector would then log export failures forever, so the
// binaries ask for the endpoint to be named.) The protocol is
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL:
// "http/protobuf" (the default) or "grpc". Everything else (endpoint,
// headers, TLS, timeout, compression, the sampler, the batch processor's
// settings, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES) is read by the
// OpenTelemetry SDK and its exporters themselves.
package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
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
	off := &Tracing{Shutdown: func(context.Context) error { return nil }}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return off, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return off, nil
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return off, nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: this binary supports otlp and none", exp)
	}
	proto := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if proto == "" {
		proto = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	if proto == "" {
		proto = "http/protobuf"
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch proto {
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: use http/protobuf or grpc", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.NewSchemaless(attribute.String("service.name", service)), resource.Environment())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{Provider: tp, Protocol: proto, Shutdown: tp.Shutdown}, nil
}
