package bench

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/workflow"
)

// finishHook is an observer that signals each run's end (workflow name).
type finishHook struct {
	workflow.NopObserver
	done chan string
}

func (h finishHook) RunFinished(_ context.Context, _, wf string, _ workflow.RunStatus, _ string) {
	h.done <- wf
}

// BenchmarkRunLatency measures the latency of one run of 3 no-op steps on
// an idle worker (one run at a time, concurrency 10): from before
// Client.Start to the run's end as the worker's observer sees it, for the
// default execution (one asynq task per step) and inline continuation
// (workflow.Definition.Inline). CAIRN_BENCH_LATENCY_RUNS runs each (default
// 100); it reports p50 and p99 of each.
func BenchmarkRunLatency(b *testing.B) {
	runs := envInt(b, "CAIRN_BENCH_LATENCY_RUNS", 100)
	srv := redistest.Start(b, nil)
	rdb := srv.Client(b)
	const queue = "latency"
	hook := finishHook{done: make(chan string, 1)}
	w, err := workflow.NewWorker(rdb, workflow.WorkerConfig{Concurrency: 10,
		EngineConfig: workflow.EngineConfig{Queue: queue, Logger: slog.New(slog.DiscardHandler), Observer: hook}})
	if err != nil {
		b.Fatal(err)
	}
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	for _, inline := range []bool{false, true} {
		def := workflow.Definition{Name: fmt.Sprintf("lat_inline_%v", inline), Inline: inline}
		for i := range stepsPerChain {
			def.Steps = append(def.Steps, workflow.Step{Name: fmt.Sprintf("s%d", i+1), Run: noop})
		}
		if err := w.Register(def); err != nil {
			b.Fatal(err)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if err := w.Engine().Publish(ctx); err != nil {
		b.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	defer func() {
		stop()
		if err := <-errc; err != nil {
			b.Error(err)
		}
	}()
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: slog.New(slog.DiscardHandler)})

	fmt.Printf("\nBenchmarkRunLatency: one run of %d no-op steps at a time on an idle worker, %d runs each\n",
		stepsPerChain, runs)
	for _, inline := range []bool{false, true} {
		name := fmt.Sprintf("lat_inline_%v", inline)
		lat := make([]time.Duration, 0, runs)
		for range runs + 5 { // the first 5 warm up
			start := time.Now()
			if _, err := client.Start(ctx, name, nil, nil); err != nil {
				b.Fatal(err)
			}
			select {
			case <-hook.done:
			case <-time.After(30 * time.Second):
				b.Fatalf("%s: a run did not finish in 30s", name)
			}
			lat = append(lat, time.Since(start))
		}
		lat = lat[5:]
		slices.Sort(lat)
		p50, p99 := lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
		mode := "strict"
		if inline {
			mode = "inline"
		}
		fmt.Printf("  %-7s p50 %8s  p99 %8s\n", mode, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))
		reportTarget(b, float64(p50.Microseconds()), "p50_µs_"+mode)
		reportTarget(b, float64(p99.Microseconds()), "p99_µs_"+mode)
	}
	b.ReportMetric(0, "ns/op")
}
