package core

import (
	"context"
	"log/slog"
)

// Logger is what the engine logs through: a *slog.Logger, or a lineLogger.
type Logger interface {
	Debug(msg string, args ...any)
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
	Error(msg string, args ...any)
}

// LineLogger logs with a fixed set of attributes (run, step, attempt),
// added to each line only when the line's level is enabled: a delivery
// costs no logger of its own unless it logs.
type LineLogger struct {
	L     *slog.Logger
	Attrs []any
}

// Debug logs msg with args after ll's attributes.
func (ll LineLogger) Debug(msg string, args ...any) { ll.log(slog.LevelDebug, msg, args) }

// Info logs msg with args after ll's attributes.
func (ll LineLogger) Info(msg string, args ...any) { ll.log(slog.LevelInfo, msg, args) }

// Warn logs msg with args after ll's attributes.
func (ll LineLogger) Warn(msg string, args ...any) { ll.log(slog.LevelWarn, msg, args) }

// Error logs msg with args after ll's attributes.
func (ll LineLogger) Error(msg string, args ...any) { ll.log(slog.LevelError, msg, args) }

func (ll LineLogger) log(level slog.Level, msg string, args []any) {
	ctx := context.Background()
	if !ll.L.Enabled(ctx, level) {
		return
	}
	all := make([]any, 0, len(ll.Attrs)+len(args))
	ll.L.Log(ctx, level, msg, append(append(all, ll.Attrs...), args...)...)
}

// Logger returns a *slog.Logger with the attributes.
func (ll LineLogger) Logger() *slog.Logger { return ll.L.With(ll.Attrs...) }
