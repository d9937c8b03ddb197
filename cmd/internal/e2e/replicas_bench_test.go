package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/cmd/internal/config"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// BenchmarkMinReplicas measures what CAIRN_REDIS_MIN_REPLICAS=1 costs, on
// a master (appendonly, fsync everysec) with one replica, both on
// loopback, with an in-process worker (concurrency 10) and client built as
// the binaries build them. Each round, for 0 and then 1 replica to wait
// for, on a queue of its own:
//
//   - start latency: 500 Client.Start calls one after another (create.lua,
//     and WAIT with 1), no worker running: median and 99th percentile;
//   - throughput: then a worker runs those 500 runs of 3 no-op steps:
//     steps per second from its start until every run has succeeded.
//
// Rounds alternate the two settings (7 of each) to spread the machine's
// noise; the figures are the medians over the rounds.
//
//	go test -run '^$' -bench MinReplicas -benchtime 1x ./cmd/internal/e2e/
func BenchmarkMinReplicas(b *testing.B) {
	const (
		rounds = 7
		runs   = 500
	)
	master := redistest.Start(b, &redistest.Options{AppendOnly: true, Args: []string{"--repl-diskless-sync-delay", "0"}})
	replica := redistest.Start(b, &redistest.Options{AppendOnly: true,
		Args: []string{"--replicaof", "127.0.0.1", strconv.Itoa(master.Port())}})
	testkit.Eventually(b, 10*time.Second, "the replica to be in sync", func() bool {
		info, err := replica.Client(b).Info(ctxb, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	def := workflow.Definition{Name: "noop", Steps: []workflow.Step{{Name: "a", Run: noop}, {Name: "b", Run: noop},
		{Name: "c", Run: noop}}}

	type figures struct{ p50, p99, stepsPerSec []float64 }
	results := map[int]*figures{0: {}, 1: {}}
	b.ResetTimer()
	for round := range rounds {
		for _, n := range []int{0, 1} {
			f := results[n]
			p50, p99, sps := minReplicasRound(b, master.URL(), n, fmt.Sprintf("bench%d_%d", round, n), def, runs)
			f.p50, f.p99, f.stepsPerSec = append(f.p50, p50), append(f.p99, p99), append(f.stepsPerSec, sps)
		}
	}
	b.StopTimer()
	for _, n := range []int{0, 1} {
		f := results[n]
		b.ReportMetric(median(f.p50), fmt.Sprintf("start_p50_µs/min_replicas=%d", n))
		b.ReportMetric(median(f.p99), fmt.Sprintf("start_p99_µs/min_replicas=%d", n))
		b.ReportMetric(median(f.stepsPerSec), fmt.Sprintf("steps/s/min_replicas=%d", n))
		b.Logf("min_replicas=%d: start p50 %.0fµs p99 %.0fµs, %.0f steps/s (rounds: %v steps/s)", n, median(f.p50),
			median(f.p99), median(f.stepsPerSec), roundAll(f.stepsPerSec))
	}
	b.Logf("steps/s with 1 replica to wait for: %.0f%% of without", 100*median(results[1].stepsPerSec)/median(results[0].stepsPerSec))
}

// minReplicasRound is one round of BenchmarkMinReplicas: it returns the
// median and 99th percentile of Start's latency in µs, and the steps per
// second of a worker.
func minReplicasRound(b *testing.B, url string, n int, queue string, def workflow.Definition, runs int) (p50, p99, stepsPerSec float64) {
	b.Helper()
	target, err := config.ParseRedisURL(url)
	if err != nil {
		b.Fatal(err)
	}
	rdb := target.NewClient()
	defer rdb.Close()
	rw := config.WaitForReplicas(rdb, n, time.Second, slog.New(slog.DiscardHandler))
	w, err := workflow.NewWorker(rdb, workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{Queue: queue,
		Logger: slog.New(slog.DiscardHandler)}, Concurrency: 10})
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Register(def); err != nil {
		b.Fatal(err)
	}
	// Publish the definition (the worker does at start) without running.
	if err := w.Engine().Publish(ctxb); err != nil {
		b.Fatal(err)
	}
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: slog.New(slog.DiscardHandler)})
	lat := make([]float64, 0, runs)
	for range runs {
		began := time.Now()
		if _, err := client.Start(ctxb, def.Name, nil, nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, float64(time.Since(began).Microseconds()))
	}
	slices.Sort(lat)

	ctx, cancel := context.WithCancel(ctxb)
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- w.Run(ctx) }()
	testkit.Eventually(b, 120*time.Second, "every run to succeed", func() bool {
		c, err := client.Counts(ctxb)
		return err == nil && c[string(workflow.StatusSucceeded)] == int64(runs)
	})
	took := time.Since(began)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if rw != nil && rw.Shortfalls() != 0 {
		b.Errorf("min_replicas=%d: %d of %d writes not confirmed in time", n, rw.Shortfalls(), rw.Waits())
	}
	return lat[len(lat)/2], lat[len(lat)*99/100], float64(3*runs) / took.Seconds()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func roundAll(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x + 0.5)
	}
	return out
}
