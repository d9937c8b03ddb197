package doccheck

import (
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cairnhq/cairn/internal/testkit"
)

// deadline bounds every wait of these tests: only a broken mechanism (a run
// that never ends, a server that never stops) misses it.
const deadline = 30 * time.Second

// quietDefaultLogger makes slog's default logger, which snippets that set
// no Logger log through, t's logger until t ends. A test that calls it
// must not run in parallel with others.
func quietDefaultLogger(t *testing.T) {
	t.Helper()
	prev := slog.Default()
	slog.SetDefault(testkit.Logger(t))
	t.Cleanup(func() { slog.SetDefault(prev) })
}

// waitGoroutines waits until the goroutines started since before was taken
// (goleak.IgnoreCurrent) have ended: those of a snippet that starts a
// worker or a server with `go` and gives the test no handle to wait on.
// The test must not run in parallel with others.
func waitGoroutines(t *testing.T, before goleak.Option) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		err := goleak.Find(before) // itself retries for a while
		if err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the snippet's goroutines did not end: %v", err)
		}
	}
}
