package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/internal/engine"
)

// readyTimeout bounds how long [StartWorker] waits for a worker to publish
// its definitions.
const readyTimeout = 10 * time.Second

// StartWorker creates an in-process worker on rdb with cfg, registers defs,
// runs it until the test ends and waits until it is ready (its definitions
// published, so clients can start runs). The worker's queue and logger are
// cfg's: give it the test's [Queue] and [Logger]. When the test ends the
// worker is stopped, and an error from its Run fails the test.
func StartWorker(t testing.TB, rdb redis.UniversalClient, cfg engine.WorkerConfig, defs ...core.Definition) *engine.Worker {
	t.Helper()
	w, err := engine.NewWorker(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Register(defs...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case <-w.Ready():
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("worker stopped before it was ready: %v", err)
	case <-timer.C:
		t.Fatalf("worker not ready after %s", readyTimeout)
	}
	return w
}

// runPoll is how often [WaitRun] reads the run.
const runPoll = 20 * time.Millisecond

// WaitRun waits until run id has ended and returns it; it fails the test if
// the run has not ended after timeout.
func WaitRun(t testing.TB, c *engine.Client, id string, timeout time.Duration) *core.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	run, err := c.Wait(ctx, id, runPoll)
	if err != nil {
		t.Fatalf("waiting for run %s: %v (last %+v)", id, err, run)
	}
	return run
}

// CountEvents counts the events of type typ in evs that belong to the step
// named by step or, when step is "", to any step.
func CountEvents(evs []core.Event, typ, step string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ && (step == "" || ev.Step == step) {
			n++
		}
	}
	return n
}
