package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/tasks"
)

// BenchmarkPickup measures the design question behind Cairn's own dequeue
// (issue 26): how long a task waits in the pending list of an idle worker
// before its handler starts, with asynq's fetch loop (which polls, sleeping
// TaskCheckInterval ± half of it, 20 ms, when the queue is empty), and with
// a prototype fetcher that blocks on the pending list itself (BLMOVE to the
// active list, then one script that does the rest of asynq's dequeue: the
// task's state and lease), and what each costs an idle Redis in commands a
// second. CAIRN_BENCH_PICKUP_TASKS tasks (default 100) are enqueued one at
// a time by asynq's client, each once the previous has started and after a
// pause, so that the fetcher is idle. It prints p50, p99 and max of each,
// and reports p99_µs_pickup_asynq, p99_µs_pickup_blocking and
// p99_µs_pickup_cairn (the worker's own dequeue, tasks.Dequeuer, with its
// heartbeat).
//
// The prototype is a measurement, not a fetcher Cairn runs: it has no
// recovery of a task taken by a fetcher that died between its two calls,
// which a real one needs (a list of its own, swept by the reconciler).
func BenchmarkPickup(b *testing.B) {
	n := envInt(b, "CAIRN_BENCH_PICKUP_TASKS", 100)
	srv := redistest.Start(b, nil)
	rdb := srv.Client(b)
	ctl := newControl(srv.Addr())
	defer ctl.close()
	ctx := context.Background()
	client := asynq.NewClientFromRedisClient(rdb)

	// run enqueues n tasks one at a time on queue and returns how long
	// each waited before started received its enqueue time.
	run := func(queue string, started <-chan time.Time) []time.Duration {
		waits := make([]time.Duration, 0, n)
		for i := range n + 5 { // the first 5 warm up
			time.Sleep(time.Duration(15+i%7*5) * time.Millisecond) // idle again, off the poll's beat
			at := time.Now()
			if _, err := client.Enqueue(asynq.NewTask("pickup", []byte(strconv.FormatInt(at.UnixNano(), 10))),
				asynq.Queue(queue), asynq.MaxRetry(0)); err != nil {
				b.Fatal(err)
			}
			select {
			case s := <-started:
				if i >= 5 {
					waits = append(waits, s.Sub(at))
				}
			case <-time.After(30 * time.Second):
				b.Fatal("a task did not start within 30s")
			}
		}
		return waits
	}
	idle := func() float64 {
		if err := ctl.resetStats(ctx); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		time.Sleep(3 * time.Second)
		cmds, err := ctl.commandStats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return float64(sum(cmds)) / time.Since(start).Seconds()
	}
	report := func(label, metric string, waits []time.Duration, cmds float64) {
		slices.Sort(waits)
		p50, p99 := waits[len(waits)/2], waits[min(len(waits)-1, len(waits)*99/100)]
		fmt.Printf("  %-9s pickup p50 %8s  p99 %8s  max %8s  idle commands/s %6.1f\n", label,
			p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), waits[len(waits)-1].Round(10*time.Microsecond), cmds)
		b.ReportMetric(float64(p99.Microseconds()), metric)
	}
	fmt.Printf("\nBenchmarkPickup: enqueue to handler start on an idle fetcher, %d tasks each (load %s)\n", n, loadAverage())

	// asynq's fetch loop, at the interval a Cairn worker sets.
	{
		queue := newQueue("pickup_asynq")
		started := make(chan time.Time, 1)
		srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 10, Queues: map[string]int{queue: 1},
			TaskCheckInterval: 20 * time.Millisecond, LogLevel: asynq.FatalLevel})
		mux := asynq.NewServeMux()
		mux.HandleFunc("pickup", func(context.Context, *asynq.Task) error {
			started <- time.Now()
			return nil
		})
		if err := srv.Start(mux); err != nil {
			b.Fatal(err)
		}
		waits := run(queue, started)
		cmds := idle()
		srv.Shutdown()
		report("asynq", "p99_µs_pickup_asynq", waits, cmds)
	}

	// A fetcher that blocks on the pending list.
	{
		queue := newQueue("pickup_blocking")
		started := make(chan time.Time, 1)
		fctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- blockingFetch(fctx, rdb, queue, func() { started <- time.Now() })
		}()
		waits := run(queue, started)
		cmds := idle()
		stop()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		report("blocking", "p99_µs_pickup_blocking", waits, cmds)
	}

	// The worker's own dequeue (tasks.Dequeuer, as internal/engine's
	// processor drives it): BLMOVE into the worker's claim list, take.lua,
	// done.lua, and its housekeeping once a second (the heartbeat).
	{
		queue := newQueue("pickup_cairn")
		started := make(chan time.Time, 1)
		fctx, stop := context.WithCancel(ctx)
		done := make(chan error, 2)
		dq := tasks.NewDequeuer(rdb, queue, "bench")
		go func() {
			for fctx.Err() == nil {
				if _, err := dq.Housekeep(fctx, time.Now(), 10*time.Second); err != nil && fctx.Err() == nil {
					done <- err
					return
				}
				select {
				case <-fctx.Done():
				case <-time.After(time.Second):
				}
			}
			done <- nil
		}()
		go func() {
			done <- dequeuerFetch(fctx, dq, func() { started <- time.Now() })
		}()
		waits := run(queue, started)
		cmds := idle()
		stop()
		for range 2 {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
		report("cairn", "p99_µs_pickup_cairn", waits, cmds)
	}
	b.ReportMetric(0, "ns/op")
}

// dequeuerFetch takes the tasks of dq's queue with the worker's own
// dequeue, one at a time, blocking a second at a time, and calls handle
// for each, until ctx ends (nil) or Redis fails.
func dequeuerFetch(ctx context.Context, dq *tasks.Dequeuer, handle func()) error {
	for ctx.Err() == nil {
		id, err := dq.Claim(context.WithoutCancel(ctx), time.Second)
		if err != nil {
			return err
		}
		if id == "" {
			continue
		}
		m, out, err := dq.Take(ctx, id, time.Now())
		if err != nil || out != tasks.Taken {
			return fmt.Errorf("take %s: %v, %w", id, out, err)
		}
		handle()
		if err := dq.Done(ctx, m, time.Now()); err != nil {
			return err
		}
	}
	return nil
}

// takeScript does what asynq's dequeue does besides moving the ID from
// pending to active (which BLMOVE did): the task's state, and its lease.
var takeScript = redis.NewScript(`
redis.call("HSET", KEYS[1], "state", "active")
redis.call("HDEL", KEYS[1], "pending_since")
redis.call("ZADD", KEYS[2], ARGV[1], ARGV[2])
return redis.call("HGET", KEYS[1], "msg")
`)

// doneScript is asynq's done of a task that keeps no result: out of the
// active list and the lease set, its record deleted.
var doneScript = redis.NewScript(`
redis.call("LREM", KEYS[1], 0, ARGV[1])
redis.call("ZREM", KEYS[2], ARGV[1])
return redis.call("DEL", KEYS[3])
`)

// blockingFetch takes queue's tasks as they come, blocking on its pending
// list for at most a second at a time, and calls handle for each, until
// ctx ends (nil) or Redis fails.
func blockingFetch(ctx context.Context, rdb *redis.Client, queue string, handle func()) error {
	k := tasks.QueueKeys(queue)
	for ctx.Err() == nil {
		id, err := rdb.BLMove(ctx, k.Pending(), k.Active(), "RIGHT", "LEFT", time.Second).Result()
		if errors.Is(err, redis.Nil) || ctx.Err() != nil {
			continue
		}
		if err != nil {
			return err
		}
		lease := strconv.FormatInt(time.Now().Add(30*time.Second).Unix(), 10)
		if err := takeScript.Run(ctx, rdb, []string{k.Task(id), k.Lease()}, lease, id).Err(); err != nil {
			return err
		}
		handle()
		if err := doneScript.Run(ctx, rdb, []string{k.Active(), k.Lease(), k.Task(id)}, id).Err(); err != nil {
			return err
		}
	}
	return nil
}
