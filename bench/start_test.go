package bench

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/workflow"
)

// startBatch is how many starts one benchmark operation makes, so that
// -benchtime 1x still measures something.
const startBatch = 200

// BenchmarkStart measures starting work: a bare asynq enqueue of a chain
// head, and a Cairn Client.Start of a run of the 3-step workflow (one
// round trip: create.lua creates the run and its steps and writes the
// first task; the client keeps the definition), one call at a time; and
// Client.StartMany of batches of startManyBatch runs (one round trip a
// batch). It reports the round trips per start (trips/start).
func BenchmarkStart(b *testing.B) {
	b.Run("asynq_enqueue", func(b *testing.B) {
		queue := newQueue("start_raw")
		measureStarts(b, queue, func(rdb *redis.Client) func(ctx context.Context, i int) error {
			client := asynq.NewClientFromRedisClient(rdb)
			return func(ctx context.Context, i int) error {
				_, err := client.EnqueueContext(ctx, chainTask(i, 0), asynq.Queue(queue))
				return err
			}
		})
	})
	b.Run("cairn_start", func(b *testing.B) {
		queue := newQueue("start_cairn")
		measureStarts(b, queue, func(rdb *redis.Client) func(ctx context.Context, i int) error {
			client := publishNoop(b, rdb, queue)
			return func(ctx context.Context, _ int) error {
				_, err := client.Start(ctx, workflowName, nil, nil)
				return err
			}
		})
	})
	b.Run("cairn_start_many", func(b *testing.B) {
		queue := newQueue("start_many")
		measureStarts(b, queue, func(rdb *redis.Client) func(ctx context.Context, i int) error {
			client := publishNoop(b, rdb, queue)
			reqs := make([]workflow.StartRequest, startManyBatch)
			for i := range reqs {
				reqs[i] = workflow.StartRequest{Workflow: workflowName}
			}
			return func(ctx context.Context, i int) error {
				// One call in startManyBatch starts the batch (and the
				// warm-up call, i < 0, one batch); the others do nothing.
				if i >= 0 && i%startManyBatch != 0 {
					return nil
				}
				for _, r := range client.StartMany(ctx, reqs) {
					if r.Err != nil {
						return r.Err
					}
				}
				return nil
			}
		})
	})
}

// startManyBatch is the size of BenchmarkStart/cairn_start_many's batches
// (a divisor of startBatch).
const startManyBatch = 50

// measureStarts times b.N batches of startBatch sequential calls of the
// function setup returns, and reports the time, server commands and round
// trips per call.
func measureStarts(b *testing.B, queue string, setup func(rdb *redis.Client) func(ctx context.Context, i int) error) {
	srv := redistest.Shared(b)
	ctl := newControl(srv.Addr())
	defer ctl.close()
	rdb, hook := newWorkload(b, srv, queue, loadScriptLabels())
	defer func() { _ = rdb.Close() }()
	start := setup(rdb)
	ctx := context.Background()
	if err := start(ctx, -1); err != nil { // loads the scripts, fills the pool
		b.Fatal(err)
	}

	m := startMeter(b, ctl, hook)
	b.ResetTimer()
	for i := range b.N * startBatch {
		if err := start(ctx, i); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	r := result{units: int64(b.N * startBatch)}
	m.stop(b, &r)
	m.finish(b, &r)

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(r.elapsed.Microseconds())/float64(r.units), "µs/start")
	b.ReportMetric(r.cmdsPerUnit(), "cmds/start")
	b.ReportMetric(r.tripsPerUnit(), "trips/start")
	b.ReportMetric(float64(r.perUnit(r.redisCPU))/float64(time.Microsecond), "redis-µs/start")
	if testing.Verbose() {
		printDetail(b.Name()+", per start", r)
	}
}

// publishNoop registers and publishes the benchmark's workflow of
// stepsPerChain no-op steps on queue, and returns a client to start it.
func publishNoop(b *testing.B, rdb *redis.Client, queue string) *workflow.Client {
	b.Helper()
	log := slog.New(slog.DiscardHandler)
	e, err := workflow.NewEngine(rdb, workflow.EngineConfig{Queue: queue, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Register(benchDefinition()); err != nil {
		b.Fatal(err)
	}
	if err := e.Publish(context.Background()); err != nil {
		b.Fatal(err)
	}
	return workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: log})
}
