package engine

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/tasks"
)

// shiftedClock is the system clock moved by a fixed offset.
type shiftedClock struct{ by atomic.Int64 }

func (c *shiftedClock) Now() time.Time { return time.Now().Add(time.Duration(c.by.Load())) }

// waitWorkers waits for housekeeping passes of o until the client lists
// workers that cond accepts, and returns them.
func waitWorkers(t *testing.T, o *ownWorker, c *Client, what string, cond func([]WorkerInfo) bool) []WorkerInfo {
	t.Helper()
	deadline := time.Now().Add(deadlineOwn)
	for {
		ws, _, err := c.Workers(context.Background())
		if err == nil && cond(ws) {
			return ws
		}
		if _, ok := o.proc.housekept.Wait(time.Until(deadline)); !ok {
			t.Fatalf("%s: not within %s (last read: %+v, %v)", what, deadlineOwn, ws, err)
		}
	}
}

// TestWorkersListed: a worker on the own dequeue is listed with its record
// once it started; its in-flight count moves while a step blocks and once
// it returned; a clean exit removes it at once; a killed worker's record
// is left behind, but once its heartbeat expired (the client's injected
// clock past it) it is no longer listed nor serves the queue.
func TestWorkersListed(t *testing.T) {
	rdb := redistest.Start(t, nil).Client(t)
	const queue = "own_workers"
	ctx := context.Background()
	c := NewClient(rdb, ClientConfig{Queue: queue})
	if served, err := c.Served(ctx); err != nil || served {
		t.Fatalf("Served before any worker = %v, %v", served, err)
	}

	entered, release := make(chan struct{}), make(chan struct{})
	o := startOwnWorker(t, rdb, queue, time.Second, oneStep("block", func(context.Context, *core.StepContext) (any, error) {
		close(entered)
		<-release
		return nil, nil
	}))
	ws := waitWorkers(t, o, c, "the worker listed", func(ws []WorkerInfo) bool { return len(ws) == 1 })
	w := ws[0]
	host, _ := os.Hostname()
	if w.ID != o.w.engine.id || w.Kind != WorkerKindCairn || w.Host != host || w.PID != os.Getpid() ||
		len(w.Queues) != 1 || w.Queues[0] != queue || w.Concurrency != 10 || w.InFlight != 0 || w.Version != "devel" ||
		w.StartedAt.IsZero() || w.LastHeartbeat == nil || w.HeartbeatExpires == nil ||
		!w.HeartbeatExpires.After(*w.LastHeartbeat) {
		t.Fatalf("worker %+v", w)
	}
	if served, err := c.Served(ctx); err != nil || !served {
		t.Fatalf("Served with a live worker = %v, %v", served, err)
	}

	run, err := c.Start(ctx, "block", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(deadlineOwn):
		t.Fatal("the step did not start")
	}
	waitWorkers(t, o, c, "one attempt in flight", func(ws []WorkerInfo) bool { return len(ws) == 1 && ws[0].InFlight == 1 })
	close(release)
	if r := waitEnded(t, c, run.ID); r.Status != core.StatusSucceeded {
		t.Fatalf("run %s", r.Status)
	}
	waitWorkers(t, o, c, "nothing in flight", func(ws []WorkerInfo) bool { return len(ws) == 1 && ws[0].InFlight == 0 })

	// A clean exit: gone at once, record and all.
	o.stop()
	if ws, _, err := c.Workers(ctx); err != nil || len(ws) != 0 {
		t.Fatalf("Workers after a clean exit = %+v, %v", ws, err)
	}
	if n := rdb.Exists(ctx, tasks.QueueKeys(queue).WorkerRecord(o.w.engine.id)).Val(); n != 0 {
		t.Fatal("the worker's record is left after its clean exit")
	}
	if served, err := c.Served(ctx); err != nil || served {
		t.Fatalf("Served after the worker left = %v, %v", served, err)
	}

	// A killed worker: its last heartbeat and record are left behind.
	ghost := newProcessor(o.w.engine, rdb, 4, time.Second, "v1.2.3")
	ghost.housekeep(ctx)
	clock := &shiftedClock{}
	c = NewClient(rdb, ClientConfig{Queue: queue, Clock: clock})
	if ws, _, err := c.Workers(ctx); err != nil || len(ws) != 1 || ws[0].Version != "v1.2.3" || ws[0].Concurrency != 4 {
		t.Fatalf("Workers with the killed worker's heartbeat still on = %+v, %v", ws, err)
	}
	clock.by.Store(int64(heartbeatTTL + time.Second))
	if ws, _, err := c.Workers(ctx); err != nil || len(ws) != 0 {
		t.Fatalf("Workers once the killed worker's heartbeat expired = %+v, %v", ws, err)
	}
	if served, err := c.Served(ctx); err != nil || served {
		t.Fatalf("Served once the killed worker's heartbeat expired = %v, %v", served, err)
	}
	if ttl := rdb.PTTL(ctx, tasks.QueueKeys(queue).WorkerRecord(o.w.engine.id)).Val(); ttl <= 0 || ttl > heartbeatTTL {
		t.Fatalf("the killed worker's record has TTL %v, want it to expire on its own within %v", ttl, heartbeatTTL)
	}
}

// TestWorkersAsynqMode: a worker on asynq's processor (DequeueAsynq) has
// no Cairn heartbeat; it is listed from asynq's own server record, as an
// asynq server of the queue, and serves the queue until it stops.
func TestWorkersAsynqMode(t *testing.T) {
	rdb := redistest.Start(t, nil).Client(t)
	const queue = "asynq_workers"
	ctx := context.Background()
	w, err := NewWorker(rdb, WorkerConfig{EngineConfig: EngineConfig{Queue: queue, Logger: testLog(t)},
		Dequeue: DequeueAsynq, Concurrency: 3, ShutdownTimeout: time.Second, SkipRedisChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Register(oneStep("noop", func(context.Context, *core.StepContext) (any, error) { return nil, nil })); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}
	select {
	case <-w.Ready():
	case <-time.After(deadlineOwn):
		stop()
		t.Fatal("worker not ready")
	}
	c := NewClient(rdb, ClientConfig{Queue: queue})
	// asynq writes its server record when its heartbeater starts, in the
	// background of its Start.
	var ws []WorkerInfo
	deadline := time.Now().Add(deadlineOwn)
	for {
		ws, _, err = c.Workers(ctx)
		if err == nil && len(ws) == 1 {
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("the asynq server not listed: %+v, %v", ws, err)
		}
		time.Sleep(20 * time.Millisecond) // asynq's heartbeater gives no signal
	}
	if g := ws[0]; g.Kind != WorkerKindAsynq || g.Concurrency != 3 || len(g.Queues) != 1 || g.Queues[0] != queue ||
		g.PID != os.Getpid() || g.LastHeartbeat != nil || g.Version != "" {
		t.Errorf("asynq server %+v", g)
	}
	if served, err := c.Served(ctx); err != nil || !served {
		t.Errorf("Served with an asynq server = %v, %v", served, err)
	}
	stop()
	// asynq's Shutdown clears its server record.
	if ws, _, err := c.Workers(ctx); err != nil || len(ws) != 0 {
		t.Errorf("Workers after the asynq server stopped = %+v, %v", ws, err)
	}
	if served, err := c.Served(ctx); err != nil || served {
		t.Errorf("Served after the asynq server stopped = %v, %v", served, err)
	}
}
