package workflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// A queue whose data is of another format is neither read nor written: the
// worker's Run returns ErrDataFormat at once, having published nothing, and
// a client's Start fails with it, having created nothing.
func TestOtherDataFormatRefused(t *testing.T) {
	t.Parallel()
	rdb := redistest.Shared(t).Client(t)
	queue := testkit.Queue(t, "fmt")
	prefix := "cairn:{" + queue + "}:"
	if err := rdb.Set(ctxb, prefix+"format", "2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	def := workflow.Definition{Name: "fmt", Steps: []workflow.Step{{Name: "a", Run: noop}}}
	w, err := workflow.NewWorker(rdb, workflow.WorkerConfig{SkipRedisChecks: true,
		EngineConfig: workflow.EngineConfig{Queue: queue, Logger: testkit.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Register(def); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctxb, time.Minute)
	defer cancel()
	err = w.Run(ctx)
	if !errors.Is(err, workflow.ErrDataFormat) || !strings.Contains(err.Error(), "format 2") ||
		!strings.Contains(err.Error(), "docs/upgrading.md") {
		t.Fatalf("Worker.Run = %v, want ErrDataFormat naming format 2 and what to do", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Worker.Run retried a format refusal until the deadline")
	}
	c := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: testkit.Logger(t),
		Definitions: []workflow.Definition{def}})
	if _, err := c.Start(ctxb, "fmt", nil, nil); !errors.Is(err, workflow.ErrDataFormat) {
		t.Fatalf("Client.Start = %v, want ErrDataFormat", err)
	}
	keys, err := rdb.Keys(ctxb, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != prefix+"format" {
		t.Fatalf("the refusals wrote %v", keys)
	}
	if got := rdb.Get(ctxb, prefix+"format").Val(); got != "2" {
		t.Fatalf("format record changed to %q", got)
	}
}

// A worker records the format on a new queue, and its clients start runs.
func TestDataFormatRecorded(t *testing.T) {
	t.Parallel()
	rdb := redistest.Shared(t).Client(t)
	queue := testkit.Queue(t, "fmt")
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	def := workflow.Definition{Name: "fmt", Steps: []workflow.Step{{Name: "a", Run: noop}}}
	testkit.StartWorker(t, rdb, workflow.WorkerConfig{SkipRedisChecks: true,
		EngineConfig: workflow.EngineConfig{Queue: queue, Logger: testkit.Logger(t)}}, def)
	if got := rdb.Get(ctxb, "cairn:{"+queue+"}:format").Val(); got != "1" {
		t.Fatalf("format record %q, want 1", got)
	}
	c := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: testkit.Logger(t)})
	run, err := c.Start(ctxb, "fmt", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := testkit.WaitRun(t, c, run.ID, time.Minute); got.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s", got.Status)
	}
}
