package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/internal/redistest"
)

// TestMain gives the whole run one redis-server, shared by every benchmark
// (each phase uses queues of its own) and stopped when they end; then it
// checks that the benchmarks left no goroutine running.
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	printTargets(os.Stdout)
	if err := redistest.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if code == 0 && !goroutinesBackTo(before, 5*time.Second) {
		buf := make([]byte, 1<<20)
		fmt.Fprintf(os.Stderr, "bench: goroutines left running (%d, %d before):\n%s\n",
			runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		code = 1
	}
	os.Exit(code)
}

// goroutinesBackTo waits up to timeout for the number of goroutines to
// fall to n.
func goroutinesBackTo(n int, timeout time.Duration) bool {
	for end := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		if runtime.NumGoroutine() <= n {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// queueSeq keeps queue names unique across phases, b.N iterations and
// -count repetitions on the shared server.
var queueSeq atomic.Int64

func newQueue(tag string) string { return fmt.Sprintf("bench_%s_%d", tag, queueSeq.Add(1)) }

// envInt reads a positive integer from the environment, def when unset.
func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// parallel calls fn(0..n-1) on up to workers goroutines and returns the
// first error. It is for setup, which is not timed; the goroutines carry the
// profiler label phase=label.
func parallel(label string, n, workers int, fn func(i int) error) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	ctx := pprof.WithLabels(context.Background(), pprof.Labels("phase", label))
	for range min(workers, n) {
		wg.Go(func() {
			pprof.SetGoroutineLabels(ctx)
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// nopLogger silences an asynq server: raw asynq logs nothing per task, and
// the Cairn worker in these benchmarks logs to a discarding slog handler.
type nopLogger struct{}

func (nopLogger) Debug(...any) {}
func (nopLogger) Info(...any)  {}
func (nopLogger) Warn(...any)  {}
func (nopLogger) Error(...any) {}
func (nopLogger) Fatal(...any) {}

var _ asynq.Logger = nopLogger{}
