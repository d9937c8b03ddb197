package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/workflow"
)

func TestMain(m *testing.M) { redistest.Main(m) }

var queueSeq atomic.Int64

var nonWord = regexp.MustCompile(`[^A-Za-z0-9]+`)

// env is one test's isolated slice of a shared redis-server: its own queue.
type env struct {
	t      *testing.T
	rdb    *redis.Client
	queue  string
	client *workflow.Client
	log    *slog.Logger
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("CAIRN_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	q := fmt.Sprintf("t%d_%s", queueSeq.Add(1), nonWord.ReplaceAllString(t.Name(), "_"))
	if len(q) > 60 {
		q = q[:60]
	}
	log := testLogger(t)
	return &env{t: t, rdb: rdb, queue: q, log: log,
		client: workflow.NewClient(rdb, workflow.ClientConfig{Queue: q, Logger: log})}
}

// fastPolicy retries quickly so tests stay short.
func fastPolicy() workflow.Policy {
	return workflow.Policy{MaxAttempts: 4, InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2,
		MaxInterval: time.Second, Jitter: workflow.JitterNone}
}

// startWorker runs an in-process worker for the test's queue until the test ends.
func (e *env) startWorker(cfg workflow.WorkerConfig, defs ...workflow.Definition) *workflow.Worker {
	e.t.Helper()
	cfg.Queue = e.queue
	if cfg.Logger == nil {
		cfg.Logger = e.log
	}
	w, err := workflow.NewWorker(e.rdb, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := w.Register(defs...); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("worker: %v", err)
		}
	})
	select {
	case <-w.Ready():
	case <-time.After(10 * time.Second):
		e.t.Fatal("worker not ready after 10s")
	}
	return w
}

// eventually polls cond until it holds or the deadline passes.
func (e *env) eventually(timeout time.Duration, what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wait waits for a run to end.
func (e *env) wait(id string, timeout time.Duration) *workflow.Run {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	run, err := e.client.Wait(ctx, id, 20*time.Millisecond)
	if err != nil {
		e.t.Fatalf("waiting for run %s: %v (last status %+v)", id, err, run)
	}
	return run
}

func (e *env) events(id string) []workflow.Event {
	e.t.Helper()
	evs, err := e.client.Events(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

func countEvents(evs []workflow.Event, typ, step string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ && (step == "" || ev.Step == step) {
			n++
		}
	}
	return n
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
