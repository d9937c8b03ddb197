package bench

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// BenchmarkIdleWorker measures what a worker with no runs costs Redis: the
// CPU time redis-server uses, and the commands it serves, per second of
// wall time, over CAIRN_BENCH_IDLE_SECONDS (default 10) of each of three
// phases on a private server: nothing connected (Redis's own cron), a raw
// asynq server on one queue with the Cairn worker's polling intervals, and
// a Cairn worker (workflow.Worker, default configuration, one workflow
// registered) with its reconciler, breakers and notifications. It prints a
// line per phase,
//
//	idle <phase> redis_cpu_ms/s <ms> commands/s <n>
//
// and reports the worker's as idle_redis_cpu_µs/s and idle_commands/s.
func BenchmarkIdleWorker(b *testing.B) {
	window := time.Duration(envInt(b, "CAIRN_BENCH_IDLE_SECONDS", 10)) * time.Second
	srv := redistest.Start(b, nil)
	ctl := newControl(srv.Addr())
	defer ctl.close()
	ctx := context.Background()

	measure := func(phase string) (cpuPerSecond time.Duration, cmdsPerSecond float64) {
		// The phase's clients have connected and made their start-up
		// calls; let them settle into their steady state first.
		time.Sleep(window / 5)
		if err := ctl.resetStats(ctx); err != nil {
			b.Fatal(err)
		}
		cpu0, err := ctl.cpu(ctx)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		time.Sleep(window)
		cpu1, err := ctl.cpu(ctx)
		if err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		cmds, err := ctl.commandStats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		cpuPerSecond = time.Duration(float64(cpu1-cpu0) / elapsed.Seconds())
		cmdsPerSecond = float64(sum(cmds)) / elapsed.Seconds()
		fmt.Printf("idle %-6s redis_cpu_ms/s %6.2f  commands/s %7.1f  (%s; load %s)\n", phase,
			float64(cpuPerSecond.Microseconds())/1000, cmdsPerSecond, elapsed.Round(time.Millisecond), loadAverage())
		return cpuPerSecond, cmdsPerSecond
	}

	fmt.Printf("\nBenchmarkIdleWorker: Redis CPU and commands per second with no runs, %s a phase\n", window)
	measure("redis")

	asynqClient := srv.Client(b)
	raw := asynq.NewServerFromRedisClient(asynqClient, phaseConfig{concurrency: 10, servers: 1,
		taskCheck: workerTaskCheckInterval, delayedCheck: workerDelayedTaskCheckInterval}.serverConfig(newQueue("idle"), 0))
	if err := raw.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })); err != nil {
		b.Fatal(err)
	}
	measure("asynq")
	raw.Shutdown()

	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	testkit.StartWorker(b, srv.Client(b), workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{
		Queue: newQueue("idle"), Logger: slog.New(slog.DiscardHandler)}},
		workflow.Definition{Name: "idle", Steps: []workflow.Step{{Name: "s1", Run: noop}}})
	cpu, cmds := measure("cairn")
	b.ReportMetric(float64(cpu.Microseconds()), "idle_redis_cpu_µs/s")
	b.ReportMetric(cmds, "idle_commands/s")
	b.ReportMetric(0, "ns/op")
}
