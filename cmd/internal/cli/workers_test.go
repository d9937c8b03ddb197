package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// TestWorkersCommand: workers lists the queue's live workers (a table, or
// a JSON array), with a worker's control characters shown as spaces; with
// none it says so. status says when no live worker serves the queue of a
// run that waits for one, and not once one does.
func TestWorkersCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	eng, err := workflow.NewEngine(e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: testkit.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(demo.Definition(workflow.Policy{})); err != nil {
		t.Fatal(err)
	}
	if err := eng.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	run, err := e.client.Start(ctx, demo.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	r := e.run("workers")
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, `no live worker serves queue "`+e.queue+`"`) {
		t.Fatalf("workers with none:\n%s", r)
	}
	r = e.run("workers", "--json")
	mustSucceed(t, r)
	if strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("workers --json with none:\n%s", r)
	}
	r = e.run("status", run.ID)
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, `no live worker serves queue "`+e.queue+`": this run waits until one starts`) {
		t.Fatalf("status of a pending run with no worker:\n%s", r)
	}

	// A worker's heartbeat and record, as a worker on Cairn's dequeue
	// writes them (it takes no task: the run stays pending).
	dq := tasks.NewDequeuer(e.rdb, e.queue, "h1:77:abc")
	dq.Describe(func() tasks.WorkerInfo {
		return tasks.WorkerInfo{Host: "h1\x1b[31mred", PID: 77, Queues: []string{e.queue}, Concurrency: 5, InFlight: 1,
			StartedAt: time.Now(), Version: "v0.1.0"}
	})
	if _, err := dq.Housekeep(ctx, time.Now(), time.Minute); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dq.Leave(ctx) }()
	r = e.run("workers")
	mustSucceed(t, r)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "WORKER") || !strings.Contains(lines[1], "h1:77:abc") ||
		!strings.Contains(lines[1], "h1 [31mred") || !strings.Contains(lines[1], "1/5") || !strings.Contains(lines[1], "v0.1.0") ||
		strings.Contains(r.stdout, "\x1b[31m") {
		t.Fatalf("workers:\n%q", r.stdout)
	}
	r = e.run("workers", "--json")
	mustSucceed(t, r)
	var ws []workflow.WorkerInfo
	if err := json.Unmarshal([]byte(r.stdout), &ws); err != nil || len(ws) != 1 || ws[0].ID != "h1:77:abc" ||
		ws[0].Kind != workflow.WorkerKindCairn || ws[0].InFlight != 1 || ws[0].Concurrency != 5 {
		t.Fatalf("workers --json: %v\n%s", err, r.stdout)
	}
	r = e.run("status", run.ID)
	mustSucceed(t, r)
	if strings.Contains(r.stdout, "no live worker") {
		t.Fatalf("status with a live worker:\n%s", r)
	}
	checkOneErrorLine(t, e.run("workers", "x"), 2, "workers")
}
