package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

const (
	// reconcileTarget is the goal of BenchmarkReconcileRetries: so many
	// scheduled retries whose tasks are missing reconciled in at most
	// reconcileTargetTime.
	reconcileTarget     = 100000
	reconcileTargetTime = 10 * time.Second
	// reconcileLimit bounds the passes of BenchmarkReconcileRetries.
	reconcileLimit = 5 * time.Minute
	// seeders create the seeded runs, this many at a time.
	seeders = 16
	// retention is the workers' default retention (CAIRN_RETENTION).
	retention = 7 * 24 * time.Hour
)

// offsetClock is the system clock moved by offset.
type offsetClock struct{ offset time.Duration }

func (c offsetClock) Now() time.Time { return time.Now().Add(c.offset) }

// BenchmarkReconcileRetries measures how long the reconciler takes to
// repair CAIRN_BENCH_RECONCILE_RUNS (default 100,000) scheduled retries
// whose asynq tasks are missing (as after a loss of asynq's scheduled set):
// the target is at most 10 s for 100,000. On a private redis-server it
// seeds the runs through the real paths, an hour in the past (so they are
// idle for longer than the reconciler's Grace): Client.Start of the 3-step
// workflow, Store.Begin of the first attempt, Store.Fail with a transient
// error and a retry due in an hour, written without its task (no predicted
// task ID), then deletes the first attempts' tasks Start enqueued. Then it
// calls Reconciler.Pass (default ReconcilerConfig;
// CAIRN_BENCH_RECONCILE_CONCURRENCY sets its Concurrency) until every
// retry's task exists in asynq's scheduled set, and reports the time, each
// pass, and per repair the Redis commands, round trips and CPU time of
// Redis and of the Go side. Then it times one more pass, a minute later (a
// reconciler whose clock is a minute ahead, past the repairs' Grace), with
// every task there: what a pass costs in the steady state, per run checked.
// With -cpuprofile, the passes' samples carry the label phase=reconcile
// (reconcile-steady for that last pass).
func BenchmarkReconcileRetries(b *testing.B) {
	n := envInt(b, "CAIRN_BENCH_RECONCILE_RUNS", reconcileTarget)
	concurrency := envInt(b, "CAIRN_BENCH_RECONCILE_CONCURRENCY", 5)
	ctx := context.Background()
	srv := redistest.Start(b, &redistest.Options{Args: []string{"--maxmemory-policy", "noeviction"}})
	ctl := newControl(srv.Addr())
	defer ctl.close()
	const queue = "reconcile"
	labels := loadScriptLabels()
	rdb, hook := newWorkloadAt(b, srv.Addr(), queue, labels)
	defer func() { _ = rdb.Close() }()
	log := slog.New(slog.DiscardHandler)

	engine, err := workflow.NewEngine(rdb, workflow.EngineConfig{Queue: queue, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	if err := engine.Register(benchDefinition()); err != nil {
		b.Fatal(err)
	}
	if err := engine.Publish(ctx); err != nil {
		b.Fatal(err)
	}

	seedStart := time.Now()
	load0 := loadAverage()
	ids := seedScheduledRetries(b, rdb, queue, n)
	seedTime := time.Since(seedStart)
	used, err := ctl.usedMemory(ctx)
	if err != nil {
		b.Fatal(err)
	}

	rec := engine.NewReconciler(workflow.ReconcilerConfig{Concurrency: concurrency})
	scheduled := tasks.QueueKeys(queue).Scheduled()
	type passRow struct {
		took            time.Duration
		repaired, tasks int64
	}
	var passes []passRow
	load1 := loadAverage()
	m := startMeter(b, ctl, hook)
	var repaired int64
	var stuck string
	pprof.Do(ctx, pprof.Labels("phase", "reconcile"), func(ctx context.Context) {
		for {
			t0 := time.Now()
			rep, err := rec.Pass(ctx)
			if err != nil {
				b.Fatalf("pass: %v", err)
			}
			if !rep.Locked {
				b.Fatal("pass: the reconcile lock is held by someone else")
			}
			have, err := ctl.zcard(ctx, scheduled)
			if err != nil {
				b.Fatal(err)
			}
			got := int64(rep.Repairs["retry_task_missing"])
			repaired += got
			passes = append(passes, passRow{took: time.Since(t0), repaired: got, tasks: have})
			if have >= int64(n) {
				return
			}
			if rep.Total() == 0 {
				stuck = fmt.Sprintf("a pass repaired nothing with %d of %d tasks missing", int64(n)-have, n)
				return
			}
			if time.Since(m.start) > reconcileLimit {
				stuck = fmt.Sprintf("stopped after %s with %d of %d tasks missing", reconcileLimit, int64(n)-have, n)
				return
			}
		}
	})
	r := result{units: max(repaired, 1)}
	m.stop(b, &r)
	m.finish(b, &r)
	load2 := loadAverage()

	// Every retry's task is there, scheduled, under the ID the run names.
	if stuck == "" {
		missing := 0
		for lo := 0; lo < len(ids); lo += 1000 {
			pipe := rdb.Pipeline()
			cmds := make([]*redis.IntCmd, 0, 1000)
			for _, id := range ids[lo:min(lo+1000, len(ids))] {
				cmds = append(cmds, pipe.Exists(ctx, tasks.QueueKeys(queue).Task(tasks.ID(id, 0, 2, 0))))
			}
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
			for _, c := range cmds {
				if c.Val() == 0 {
					missing++
				}
			}
		}
		if missing > 0 {
			stuck = fmt.Sprintf("%d retries' tasks are not where the run says", missing)
		}
	}

	// Then a pass in the steady state, every task there: a minute later (out
	// of the repairs' Grace), each scheduled retry is checked and found
	// healthy, and each idle run is left to the scheduled walk.
	var steady result
	if stuck == "" {
		later, err := workflow.NewEngine(rdb, workflow.EngineConfig{Queue: queue, Logger: log,
			Clock: offsetClock{offset: time.Minute}})
		if err != nil {
			b.Fatal(err)
		}
		if err := later.Register(benchDefinition()); err != nil {
			b.Fatal(err)
		}
		srec := later.NewReconciler(workflow.ReconcilerConfig{Concurrency: concurrency})
		sm := startMeter(b, ctl, hook)
		var rep workflow.Report
		pprof.Do(ctx, pprof.Labels("phase", "reconcile-steady"), func(ctx context.Context) {
			rep, err = srec.Pass(ctx)
		})
		steady.units = int64(max(rep.Checked, 1))
		sm.stop(b, &steady)
		if err != nil || !rep.Locked || rep.Total() != 0 {
			b.Fatalf("steady pass: %v (%+v), %v; want nothing repaired", rep, rep, err)
		}
	}

	verdict := "PASS"
	switch {
	case stuck != "":
		verdict = "INCOMPLETE: " + stuck
	case r.elapsed > reconcileTargetTime*time.Duration(n)/reconcileTarget:
		verdict = "ABOVE TARGET"
	}
	fmt.Printf("\n%s: %d scheduled retries whose tasks are missing, reconciled by Reconciler.Pass (Concurrency %d)\n",
		b.Name(), n, concurrency)
	fmt.Printf("  seeded in %s (Start, Begin, Fail through the real paths, %d at a time; Redis used_memory %.0f MB); "+
		"load average (1 min) %s before seeding, %s before the passes, %s after\n",
		seedTime.Round(time.Millisecond), seeders, float64(used)/1e6, load0, load1, load2)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  \tpass\ttook\tretry tasks repaired\ttasks in asynq's scheduled set\t\n")
	for i, p := range passes {
		fmt.Fprintf(tw, "  \t%d\t%s\t%d\t%d\t\n", i+1, p.took.Round(time.Millisecond), p.repaired, p.tasks)
	}
	_ = tw.Flush()
	fmt.Printf("  per repair: %.1f Redis commands, %.2f round trips, Redis CPU %s, Go CPU %s, %s of the clock (%d repairs)\n",
		r.cmdsPerUnit(), r.tripsPerUnit(), r.perUnit(r.redisCPU), r.perUnit(r.goCPU), r.perUnit(r.elapsed), repaired)
	fmt.Printf("  Redis busy %.0f%%, Go busy %.0f%% (100%% is one core)\n", r.busy(r.redisCPU), r.busy(r.goCPU))
	if steady.units > 1 {
		fmt.Printf("  then a pass with every task there: %s, %d runs checked (the retries; read again as idle runs, "+
			"they are left to the first walk); per run checked: Redis CPU %s, Go CPU %s\n",
			steady.elapsed.Round(time.Millisecond), steady.units, steady.perUnit(steady.redisCPU), steady.perUnit(steady.goCPU))
	}
	fmt.Printf("reconcile %d retries %s  (%d pass(es); target <= %s for %d: %s)\n", n,
		r.elapsed.Round(time.Millisecond), len(passes), reconcileTargetTime, reconcileTarget, verdict)
	if testing.Verbose() {
		printDetail("reconciler, per repair", r)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(r.elapsed.Seconds(), "s/reconcile")
	b.ReportMetric(float64(len(passes)), "passes")
	b.ReportMetric(r.cmdsPerUnit(), "cmds/repair")
	b.ReportMetric(r.tripsPerUnit(), "trips/repair")
	b.ReportMetric(steady.elapsed.Seconds(), "s/steady-pass")
	if stuck != "" {
		b.Errorf("reconcile: %s", stuck)
	}
}

// seedScheduledRetries creates n runs of the benchmark's workflow on queue,
// each with its first step's retry scheduled an hour from now and no task
// for it, as of an hour ago, and returns their IDs.
func seedScheduledRetries(b *testing.B, rdb *redis.Client, queue string, n int) []string {
	b.Helper()
	ctx := context.Background()
	past := offsetClock{offset: -time.Hour}
	log := slog.New(slog.DiscardHandler)
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: log, Clock: past})
	store := retrystate.New(rdb, queue)
	ids := make([]string, n)
	err := parallel("reconcile-seed", n, seeders, func(i int) error {
		run, err := client.Start(ctx, workflowName, nil, nil)
		if err != nil {
			return err
		}
		now := past.Now()
		bg, err := store.Begin(ctx, retrystate.BeginParams{RunID: run.ID, Index: 0, TaskID: tasks.ID(run.ID, 0, 1, 0),
			Token: "seed", FenceTTL: time.Minute, Retention: retention, Now: now})
		if err != nil {
			return err
		}
		if bg.Outcome != retrystate.OutcomeOK {
			return fmt.Errorf("begin %s: outcome %s", run.ID, bg.Outcome)
		}
		f, err := store.Fail(ctx, retrystate.FailParams{RunID: run.ID, Index: 0, Token: "seed", Error: "seeded failure",
			Class: retrystate.ClassTransient, Delay: 2 * time.Hour, Retention: retention, Now: now})
		if err != nil {
			return err
		}
		if f.Outcome != retrystate.OutcomeRetry || f.Enqueued {
			return fmt.Errorf("fail %s: outcome %s, task written %t", run.ID, f.Outcome, f.Enqueued)
		}
		ids[i] = run.ID
		return nil
	})
	if err != nil {
		b.Fatalf("seed: %v", err)
	}
	// The first attempts' tasks, which Start enqueued: gone, as asynq
	// deletes a task once done.
	for lo := 0; lo < n; lo += 1000 {
		pipe := rdb.Pipeline()
		for _, id := range ids[lo:min(lo+1000, n)] {
			pipe.Unlink(ctx, tasks.QueueKeys(queue).Task(tasks.ID(id, 0, 1, 0)))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if err := rdb.Del(ctx, tasks.QueueKeys(queue).Pending()).Err(); err != nil {
		b.Fatal(err)
	}
	return ids
}
