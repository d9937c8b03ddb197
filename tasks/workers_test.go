package tasks_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/tasks"
)

// TestWorkerRecords: a worker's heartbeat writes its record, which Workers
// reads with the heartbeat's expiry; a worker whose heartbeat expired is no
// longer listed even while its record is left, and another worker's
// housekeeping deletes that record; a clean Leave deletes the worker's
// record at once; Served answers from the heartbeat set.
func TestWorkerRecords(t *testing.T) {
	f := newDequeueFixture(t, "dq_workers")
	k := tasks.QueueKeys(f.queue)
	now := time.UnixMilli(time.Now().UnixMilli()).UTC()
	started := now.Add(-time.Minute)
	inFlight := 0
	a := tasks.NewDequeuer(f.rdb, f.queue, "hosta:12:aaaa")
	a.Describe(func() tasks.WorkerInfo {
		return tasks.WorkerInfo{Host: "hosta", PID: 12, Queues: []string{f.queue}, Concurrency: 7, InFlight: inFlight,
			StartedAt: started, Version: "v9.9.9"}
	})
	served, err := tasks.Served(f.ctx, f.rdb, f.queue, now)
	if err != nil || served {
		t.Fatalf("Served with no worker = %v, %v; want false", served, err)
	}
	if _, err := a.Housekeep(f.ctx, now, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ws, more, err := tasks.Workers(f.ctx, f.rdb, f.queue, now)
	if err != nil || more || len(ws) != 1 {
		t.Fatalf("Workers = %+v, %v, %v; want one", ws, more, err)
	}
	want := tasks.WorkerInfo{ID: "hosta:12:aaaa", Kind: tasks.KindCairn, Host: "hosta", PID: 12, Queues: []string{f.queue},
		Concurrency: 7, StartedAt: started, Version: "v9.9.9", Heartbeat: now, Expires: now.Add(10 * time.Second)}
	if !equalInfo(ws[0], want) {
		t.Fatalf("worker %+v\nwant %+v", ws[0], want)
	}
	if ttl := f.rdb.PTTL(f.ctx, k.WorkerRecord("hosta:12:aaaa")).Val(); ttl <= 0 || ttl > 10*time.Second {
		t.Fatalf("record TTL %v, want the heartbeat's (10s)", ttl)
	}
	if served, err := tasks.Served(f.ctx, f.rdb, f.queue, now); err != nil || !served {
		t.Fatalf("Served with a live worker = %v, %v", served, err)
	}
	if served, err := tasks.Served(f.ctx, f.rdb, "dq_workers_other", now); err != nil || served {
		t.Fatalf("Served of another queue = %v, %v; want false", served, err)
	}

	// The next heartbeat carries what moved.
	inFlight = 3
	if _, err := a.Housekeep(f.ctx, now.Add(time.Second), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ws, _, _ = tasks.Workers(f.ctx, f.rdb, f.queue, now.Add(time.Second))
	if len(ws) != 1 || ws[0].InFlight != 3 || !ws[0].Heartbeat.Equal(now.Add(time.Second)) {
		t.Fatalf("after a second heartbeat: %+v", ws)
	}

	// A worker without a record (a dequeuer not described): what its ID
	// tells.
	b := tasks.NewDequeuer(f.rdb, f.queue, "hostb:34:bbbb")
	if _, err := b.Housekeep(f.ctx, now.Add(5*time.Second), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ws, _, _ = tasks.Workers(f.ctx, f.rdb, f.queue, now.Add(5*time.Second))
	if len(ws) != 2 || ws[1].ID != "hostb:34:bbbb" || ws[1].Host != "hostb" || ws[1].PID != 34 || ws[1].Version != "" {
		t.Fatalf("workers %+v, want a's and b's (from its ID)", ws)
	}

	// a stops renewing (killed): at 11 s its heartbeat expired. Its record
	// is still there, but it is not listed, nor counted by Served.
	later := now.Add(11500 * time.Millisecond)
	ws, _, _ = tasks.Workers(f.ctx, f.rdb, f.queue, later)
	if len(ws) != 1 || ws[0].ID != "hostb:34:bbbb" {
		t.Fatalf("workers after a's heartbeat expired: %+v; want b alone", ws)
	}
	// b's housekeeping deletes a's record with its claims.
	if _, err := b.Housekeep(f.ctx, later, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := f.rdb.Exists(f.ctx, k.WorkerRecord("hosta:12:aaaa")).Val(); n != 0 {
		t.Fatal("the dead worker's record is still there after another worker's housekeeping")
	}
	// b leaves cleanly: nothing left.
	if err := b.Leave(f.ctx); err != nil {
		t.Fatal(err)
	}
	if served, err := tasks.Served(f.ctx, f.rdb, f.queue, later); err != nil || served {
		t.Fatalf("Served after the last worker left = %v, %v", served, err)
	}
	if ws, _, err := tasks.Workers(f.ctx, f.rdb, f.queue, later); err != nil || len(ws) != 0 {
		t.Fatalf("Workers after the last worker left = %+v, %v", ws, err)
	}

	// Leave deletes a described worker's record too.
	if _, err := a.Housekeep(f.ctx, later, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := f.rdb.Exists(f.ctx, k.WorkerRecord("hosta:12:aaaa")).Val(); n != 1 {
		t.Fatal("no record after a's heartbeat")
	}
	if err := a.Leave(f.ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.rdb.Exists(f.ctx, k.WorkerRecord("hosta:12:aaaa")).Val(); n != 0 {
		t.Fatal("a's record is still there after Leave")
	}
}

// TestWorkersAsynqServer: an asynq server (CAIRN_DEQUEUE=asynq, or a
// service's own server) has no Cairn heartbeat; Workers lists it from
// asynq's server records as KindAsynq, and Served counts it, for the queues
// it serves only.
func TestWorkersAsynqServer(t *testing.T) {
	f := newDequeueFixture(t, "dq_asynqsrv")
	srv := asynq.NewServerFromRedisClient(f.rdb, asynq.Config{Concurrency: 3,
		Queues: map[string]int{f.queue: 1, "dq_asynqsrv_b": 1}, LogLevel: asynq.FatalLevel})
	block := make(chan struct{})
	running := make(chan struct{}, 1)
	mux := asynq.NewServeMux()
	mux.HandleFunc("job", func(context.Context, *asynq.Task) error {
		running <- struct{}{}
		<-block
		return nil
	})
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	defer close(block)
	f.enqueue("a")
	<-running
	// asynq writes its records on its own heartbeat (every 5 s).
	var ws []tasks.WorkerInfo
	testkit.Eventually(t, 60*time.Second, "the asynq server listed with its task in flight", func() bool {
		var err error
		ws, _, err = tasks.Workers(f.ctx, f.rdb, f.queue, time.Now())
		return err == nil && len(ws) == 1 && ws[0].InFlight == 1
	})
	w := ws[0]
	if w.Kind != tasks.KindAsynq || w.Concurrency != 3 || !slices.Equal(w.Queues, []string{f.queue, "dq_asynqsrv_b"}) ||
		w.PID == 0 || w.Host == "" || w.StartedAt.IsZero() {
		t.Fatalf("asynq server %+v", w)
	}
	if served, err := tasks.Served(f.ctx, f.rdb, f.queue, time.Now()); err != nil || !served {
		t.Fatalf("Served with an asynq server = %v, %v", served, err)
	}
	if served, err := tasks.Served(f.ctx, f.rdb, "dq_asynqsrv_other", time.Now()); err != nil || served {
		t.Fatalf("Served of a queue the asynq server does not serve = %v, %v", served, err)
	}
}

func equalInfo(a, b tasks.WorkerInfo) bool {
	return a.ID == b.ID && a.Kind == b.Kind && a.Host == b.Host && a.PID == b.PID && slices.Equal(a.Queues, b.Queues) &&
		a.Concurrency == b.Concurrency && a.InFlight == b.InFlight && a.StartedAt.Equal(b.StartedAt) &&
		a.Version == b.Version && a.Heartbeat.Equal(b.Heartbeat) && a.Expires.Equal(b.Expires) && a.Status == b.Status
}
