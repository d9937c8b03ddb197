// Package otelenv holds what Cairn's tracing set-ups share (the public
// workflow/oteltrace, on OpenTelemetry's autoexport, and the CLI's
// cmd/internal/otelsetup, on the OTLP trace exporters alone): when the
// OTEL_* environment turns tracing on, which values are refused, and the
// TracerProvider around an exporter. It links no exporter itself, so a
// program links only the exporters of the set-up it uses.
//
// Tracing is on when an OTLP endpoint is configured
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or
// OTEL_TRACES_EXPORTER names an exporter, and off when OTEL_SDK_DISABLED is
// "true" or OTEL_TRACES_EXPORTER is "none". (The specification's default
// exporter is otlp to localhost; a program with no collector would then
// log export failures forever, so tracing asks for the endpoint or the
// exporter to be named.) For otlp, the protocol is
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL:
// "http/protobuf" (the default) or "grpc".
package otelenv

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Choice is what the environment asks for.
type Choice struct {
	// Exporter is OTEL_TRACES_EXPORTER's value ("otlp" when only an
	// endpoint is set); "" when tracing is off.
	Exporter string
	// Protocol is the OTLP protocol, for the otlp exporter ("" for
	// another).
	Protocol string
}

// Off reports whether tracing is off.
func (c Choice) Off() bool { return c.Exporter == "" }

// Decide reads the OTEL_* variables through getenv. exporters lists the
// values of OTEL_TRACES_EXPORTER the program supports besides "none" (it
// must include "otlp"); another value is an error naming the variable, as
// is an unknown OTLP protocol, so that a typo does not silently turn
// tracing off.
func Decide(getenv func(string) string, exporters []string) (Choice, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return Choice{}, nil
	}
	exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	switch {
	case exp == "none":
		return Choice{}, nil
	case exp == "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return Choice{}, nil
		}
		exp = "otlp"
	case !slices.Contains(exporters, exp):
		return Choice{}, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: this program supports %s and none", exp, strings.Join(exporters, ", "))
	}
	if exp != "otlp" {
		return Choice{Exporter: exp}, nil
	}
	name, proto := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		name, proto = "OTEL_EXPORTER_OTLP_PROTOCOL", getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "":
		proto = "http/protobuf"
	case "http/protobuf", "grpc":
	default:
		return Choice{}, fmt.Errorf("%s=%q: use http/protobuf or grpc", name, proto)
	}
	return Choice{Exporter: exp, Protocol: proto}, nil
}

// Provider returns a TracerProvider that batches spans to exp, with the
// resource of OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, service
// being the service.name when neither sets one. The sampler
// (OTEL_TRACES_SAMPLER) and the batch processor's settings (OTEL_BSP_*)
// are read by the SDK.
func Provider(exp sdktrace.SpanExporter, service string) (*sdktrace.TracerProvider, error) {
	res, err := resource.Merge(resource.NewSchemaless(attribute.String("service.name", service)), resource.Environment())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
