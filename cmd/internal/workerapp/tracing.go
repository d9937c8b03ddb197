package workerapp

import (
	"context"
	"log/slog"
	"time"

	"github.com/cairnhq/cairn/workflow/oteltrace"
)

// startTracing sets up OpenTelemetry tracing as the OTEL_* environment
// asks (package workflow/oteltrace, which a service that embeds Cairn
// uses too); stop exports the spans still buffered, within 5 s, as the
// process is stopping. The OTEL_* variables are read from the process's
// environment, where the exporters read theirs, not from Main's environ.
func startTracing(ctx context.Context, log *slog.Logger) (tracing *oteltrace.Tracing, stop func(), err error) {
	tracing, err = oteltrace.FromEnv(ctx, "cairn-worker")
	if err != nil {
		return nil, nil, &startError{err}
	}
	if tracing.Enabled() {
		log.Info("tracing with OpenTelemetry", "exporter", tracing.Exporter(), "protocol", tracing.Protocol())
	}
	return tracing, func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tracing.Shutdown(flushCtx); err != nil {
			log.Warn("could not export the last spans", "error", err)
		}
	}, nil
}
