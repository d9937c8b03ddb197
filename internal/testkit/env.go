package testkit

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"sync/atomic"
	"testing"
)

// EnvTestLog names the environment variable that, when not empty, makes
// [Logger] and [LoggerTo] also write debug logs to stderr.
const EnvTestLog = "CAIRN_TEST_LOG"

// maxQueue bounds the length of a queue name from [Queue].
const maxQueue = 60

var (
	queueSeq atomic.Int64
	nonWord  = regexp.MustCompile(`[^A-Za-z0-9]+`)
)

// Queue returns a queue name for t, unique within the test binary (also
// across -count=n): prefix, a sequence number, then t's name with every run
// of other characters than letters and digits replaced by "_", cut to 60
// characters. Tests on a shared redis-server keep to their own queue.
func Queue(t testing.TB, prefix string) string {
	q := fmt.Sprintf("%s%d_%s", prefix, queueSeq.Add(1), nonWord.ReplaceAllString(t.Name(), "_"))
	if len(q) > maxQueue {
		q = q[:maxQueue]
	}
	return q
}

// Logger returns a logger for t's code under test: it discards everything,
// unless CAIRN_TEST_LOG is set, when it writes debug logs, marked with the
// test's name, to stderr.
func Logger(t testing.TB) *slog.Logger { return LoggerTo(t, io.Discard) }

// LoggerTo is [Logger] writing to w as well: at info level normally, at
// debug level (and to stderr too) when CAIRN_TEST_LOG is set.
func LoggerTo(t testing.TB, w io.Writer) *slog.Logger {
	if os.Getenv(EnvTestLog) != "" {
		return slog.New(slog.NewTextHandler(io.MultiWriter(os.Stderr, w), &slog.HandlerOptions{Level: slog.LevelDebug})).
			With("test", t.Name())
	}
	return slog.New(slog.NewTextHandler(w, nil))
}
