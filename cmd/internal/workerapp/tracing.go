package workerapp

import (
	"context"
	"log/slog"
	"time"

	"github.com/cairnhq/cairn/cmd/internal/otelsetup"
)

// startTracing sets up OpenTelemetry tracing as the OTEL_* environment
// asks (package otelsetup); stop exports the spans still buffered, within
// 5 s, as the process is stopping. The OTEL_* variables are read from the
// process's environment, where the OTLP exporters read theirs, not from
// Main's environ.
func startTracing(ctx context.Context, log *slog.Logger) (tracing *otelsetup.Tracing, stop func(), err error) {
	tracing, err = otelsetup.FromEnv(ctx, "cairn-worker", nil)
	if err != nil {
		return nil, nil, &startError{err}
	}
	if tracing.Provider != nil {
		log.Info("tracing with OpenTelemetry", "protocol", tracing.Protocol)
	}
	return tracing, func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tracing.Shutdown(flushCtx); err != nil {
			log.Warn("could not export the last spans", "error", err)
		}
	}, nil
}
