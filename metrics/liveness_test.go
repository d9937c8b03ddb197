package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/metrics"
	"github.com/cairnhq/cairn/workflow"
)

// TestWorkersAlive: cairn_workers counts the workers whose heartbeat on the
// queue is alive, two, then none once they have stopped; a queue without
// workers reports 0; cairn_redis_up is 1 and cairn_info names the queue.
func TestWorkersAlive(t *testing.T) {
	t.Parallel()
	rdb := redistest.Shared(t).Client(t)
	queue, idle := testkit.Queue(t, "alive"), testkit.Queue(t, "idle")
	m, err := metrics.New(prometheus.NewRegistry(), metrics.Config{Redis: rdb, Queue: queue, Queues: []string{queue, idle},
		Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var stops []func()
	for range 2 {
		stops = append(stops, runWorker(t, rdb, queue))
	}
	fams := scrapeWhen(t, m.Handler(), "2 workers alive", func(fams map[string]*dto.MetricFamily) bool {
		n, _, _ := sample(fams, "cairn_workers", "queue", queue)
		return n == 2
	})
	check(t, fams,
		expectation{"cairn_workers", []string{"queue", idle}, 0},
		expectation{"cairn_redis_up", nil, 1},
		expectation{"cairn_info", []string{"queue", queue}, 1},
	)
	if n := len(fams["cairn_info"].GetMetric()); n != 1 {
		t.Errorf("%d cairn_info series, want 1: %v", n, fams["cairn_info"])
	}
	for _, stop := range stops {
		stop()
	}
	// A clean exit ends the worker's heartbeat at once (Leave).
	scrapeWhen(t, m.Handler(), "no worker alive once both stopped", func(fams map[string]*dto.MetricFamily) bool {
		n, _, ok := sample(fams, "cairn_workers", "queue", queue)
		return ok && n == 0
	})
}

// runWorker runs a worker on queue until the returned stop, which waits
// for it to return (the test's end stops it otherwise).
func runWorker(t *testing.T, rdb redis.UniversalClient, queue string) (stop func()) {
	t.Helper()
	w, err := workflow.NewWorker(rdb, workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{
		Queue: queue, Logger: testkit.Logger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Register(demo.Definition(workflow.Policy{})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}
	t.Cleanup(stop)
	select {
	case <-w.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("worker not ready after 30s")
	}
	return stop
}

// TestRedisDown: with Redis unreachable, cairn_redis_up is 0, cairn_workers
// is left out and the failed read is counted (source "workers");
// cairn_info is still there.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testkit.FreeAddr(t), MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	queue := testkit.Queue(t, "down")
	m, err := metrics.New(prometheus.NewRegistry(), metrics.Config{Redis: rdb, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, m.Handler())
	check(t, fams,
		expectation{"cairn_redis_up", nil, 0},
		expectation{"cairn_info", []string{"queue", queue}, 1},
	)
	if _, _, ok := sample(fams, "cairn_workers", "queue", queue); ok {
		t.Error("cairn_workers reported although its read failed")
	}
	if n, _, _ := sample(scrape(t, m.Handler()), "cairn_metrics_collect_errors_total", "source", "workers"); n < 1 {
		t.Errorf("collect errors (workers) = %v, want at least 1", n)
	}
}

// TestNoRedisNoLiveness: without Redis only cairn_info is reported, with
// the default queue.
func TestNoRedisNoLiveness(t *testing.T) {
	t.Parallel()
	m, err := metrics.New(prometheus.NewRegistry(), metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, m.Handler())
	check(t, fams, expectation{"cairn_info", []string{"queue", workflow.DefaultQueue}, 1})
	for _, name := range []string{"cairn_redis_up", "cairn_workers"} {
		if _, ok := fams[name]; ok {
			t.Errorf("%s reported without Redis", name)
		}
	}
}
