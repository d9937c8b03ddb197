package workflow_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// env is one test's isolated slice of a shared redis-server: its own queue.
type env struct {
	t      *testing.T
	rdb    *redis.Client
	queue  string
	client *workflow.Client
	log    *slog.Logger
}

func testLogger(t testing.TB) *slog.Logger { return testkit.Logger(t) }

func newEnv(t *testing.T) *env {
	t.Helper()
	rdb := redistest.Shared(t).Client(t)
	q := testkit.Queue(t, "t")
	log := testkit.Logger(t)
	return &env{t: t, rdb: rdb, queue: q, log: log,
		client: workflow.NewClient(rdb, workflow.ClientConfig{Queue: q, Logger: log})}
}

// fastPolicy retries quickly so tests stay short.
// publishedEngine makes an engine on rdb with cfg, registers defs and
// publishes them.
func publishedEngine(t *testing.T, rdb redis.UniversalClient, cfg workflow.EngineConfig, defs ...workflow.Definition) *workflow.Engine {
	t.Helper()
	eng, err := workflow.NewEngine(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(defs...); err != nil {
		t.Fatal(err)
	}
	if err := eng.Publish(ctxb); err != nil {
		t.Fatal(err)
	}
	return eng
}

func fastPolicy() workflow.Policy {
	return workflow.Policy{MaxAttempts: 4, InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2,
		MaxInterval: time.Second, Jitter: workflow.JitterNone}
}

// startWorker runs an in-process worker for the test's queue until the test ends.
func (e *env) startWorker(cfg workflow.WorkerConfig, defs ...workflow.Definition) {
	e.t.Helper()
	cfg.Queue = e.queue
	if cfg.Logger == nil {
		cfg.Logger = e.log
	}
	testkit.StartWorker(e.t, e.rdb, cfg, defs...)
}

// eventually polls cond until it holds or the deadline passes.
func (e *env) eventually(timeout time.Duration, what string, cond func() bool) {
	e.t.Helper()
	testkit.Eventually(e.t, timeout, what, cond)
}

// wait waits for a run to end.
func (e *env) wait(id string, timeout time.Duration) *workflow.Run {
	e.t.Helper()
	return testkit.WaitRun(e.t, e.client, id, timeout)
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
	return testkit.CountEvents(evs, typ, step)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
