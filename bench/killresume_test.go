package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// BenchmarkKillResume measures how soon a step whose worker is killed with
// SIGKILL begins again on another worker. Two worker processes (the
// cmd/worker binary with its defaults, CAIRN_DEMO_CHAOS on) serve one queue
// on a private redis-server. Each of CAIRN_BENCH_KILL_ROUNDS rounds
// (default 6) starts a chaos run whose first step blocks once it has
// begun (demo.ChaosInput.BlockStep), waits until the step's body has
// recorded its start (demo.AuditKey, with its worker's pid), waits a random
// time in [0, FenceTTL) so that the kill falls anywhere in the fence's
// renewal cycle, kills that worker's process group with SIGKILL and
// releases the body. It then reads the run's journal until the resumed
// attempt's attempt_started (details resumed) appears, on the surviving
// worker, and measures from the kill to that entry (both on this machine's
// clock; the journal keeps milliseconds), and to the attempt_crashed entry
// of the sweep that found the crash. The killed worker is replaced before
// the next round, which waits for the run to finish. Every wait is bounded
// (two minutes).
//
// It prints a line per round and
//
//	killresume p50 <ms> max <ms> (found p50 <ms> max <ms>)
//
// and reports ms_kill_to_resume (the p50) and ms_kill_to_resume_max. The
// workers read the CAIRN_* environment of the benchmark as well, so that
// CAIRN_FENCE_TTL=10s CAIRN_SWEEP_INTERVAL=2s measures the settings before
// issue 26.
func BenchmarkKillResume(b *testing.B) {
	rounds := envInt(b, "CAIRN_BENCH_KILL_ROUNDS", 6)
	const step, bound = "s1", 2 * time.Minute
	bin := proctest.Build(b, "github.com/cairnhq/cairn/cmd/worker")
	srv := redistest.Start(b, nil)
	rdb := srv.Client(b)
	queue := newQueue("killresume")
	env := []string{"CAIRN_REDIS_URL=" + srv.URL(), "CAIRN_QUEUE=" + queue, "CAIRN_HTTP_ADDR=",
		"CAIRN_LOG_LEVEL=info", "CAIRN_DEMO_CHAOS=true"}
	ctx := context.Background()
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: slog.New(slog.DiscardHandler)})
	start := func() *proctest.Proc {
		p := proctest.Start(b, bin, env)
		p.WaitForOutput(b, "worker started", bound)
		return p
	}
	workers := []*proctest.Proc{start(), start()}

	// poll calls fn until it reports done, every 10ms for at most bound.
	poll := func(what string, fn func() (bool, error)) {
		b.Helper()
		for end := time.Now().Add(bound); ; time.Sleep(10 * time.Millisecond) {
			done, err := fn()
			if err != nil {
				b.Fatalf("%s: %v", what, err)
			}
			if done {
				return
			}
			if time.Now().After(end) {
				b.Fatalf("%s: not after %s", what, bound)
			}
		}
	}

	fmt.Printf("\nBenchmarkKillResume: kill -9 of the worker running a step to the step's resumed attempt on the other, "+
		"%d rounds (CAIRN_FENCE_TTL %q, CAIRN_SWEEP_INTERVAL %q; load %s)\n", rounds,
		os.Getenv("CAIRN_FENCE_TTL"), os.Getenv("CAIRN_SWEEP_INTERVAL"), loadAverage())
	fences := "cairn:{" + queue + "}:idx:fences" // by fence_expires_at, ms
	var resumed, found []time.Duration
	for round := range rounds {
		run, err := client.Start(ctx, demo.ChaosName, demo.ChaosInput{BlockStep: step}, nil)
		if err != nil {
			b.Fatal(err)
		}
		var running int // the index in workers of the one running the body
		poll("the body of "+step+" to start", func() (bool, error) {
			audit, err := rdb.LRange(ctx, demo.AuditKey(queue), 0, -1).Result()
			if err != nil {
				return false, err
			}
			for _, s := range audit {
				e, err := demo.ParseAudit(s)
				if err != nil {
					return false, err
				}
				if e.RunID == run.ID && e.Step == step && e.Phase == "start" {
					running = slices.IndexFunc(workers, func(p *proctest.Proc) bool { return p.PID() == e.PID })
					return running >= 0, nil
				}
			}
			return false, nil
		})
		// The fence's TTL, as the begin took it: its expiry less the
		// attempt's start (the first renewal is a third of it away).
		var ttl time.Duration
		poll("the fence of "+step, func() (bool, error) {
			exp, err := rdb.ZScore(ctx, fences, run.ID).Result()
			if err != nil {
				return false, err
			}
			evs, err := client.Events(ctx, run.ID)
			if err != nil {
				return false, err
			}
			for _, ev := range evs {
				if ev.Type == workflow.EventAttemptStarted && ev.Step == step {
					ttl = time.UnixMilli(int64(exp)).Sub(ev.At)
				}
			}
			return ttl > 0, nil
		})
		time.Sleep(rand.N(ttl)) // the kill falls anywhere in the renewal cycle
		killed := time.Now()
		workers[running].Kill(b)
		exp, err := rdb.ZScore(ctx, fences, run.ID).Result()
		if err != nil {
			b.Fatal(err)
		}
		expires := time.UnixMilli(int64(exp))
		if err := rdb.Set(ctx, demo.ReleaseKey(queue, run.ID), "1", 0).Err(); err != nil {
			b.Fatal(err)
		}
		var crashAt, resumeAt time.Time
		poll("the resumed attempt of "+step, func() (bool, error) {
			evs, err := client.Events(ctx, run.ID)
			if err != nil {
				return false, err
			}
			for _, ev := range evs {
				switch {
				case ev.Step != step:
				case ev.Type == workflow.EventAttemptCrashed:
					crashAt = ev.At
				case ev.Type == workflow.EventAttemptStarted && ev.Details["resumed"] == "1":
					resumeAt = ev.At
				}
			}
			return !resumeAt.IsZero(), nil
		})
		resumed, found = append(resumed, resumeAt.Sub(killed)), append(found, crashAt.Sub(killed))
		fmt.Printf("  round %d: resumed %5d ms after the kill; fence TTL %s, expired at %5d ms, crash found at %5d ms (load %s)\n",
			round+1, resumeAt.Sub(killed).Milliseconds(), ttl, expires.Sub(killed).Milliseconds(),
			crashAt.Sub(killed).Milliseconds(), loadAverage())
		workers[running] = start()
		poll("run "+run.ID+" to end", func() (bool, error) {
			r, err := client.Get(ctx, run.ID)
			if err != nil {
				return false, err
			}
			if r.Status.Terminal() && r.Status != workflow.StatusSucceeded {
				return false, fmt.Errorf("run %s", r.Status)
			}
			return r.Status == workflow.StatusSucceeded, nil
		})
	}
	slices.Sort(resumed)
	slices.Sort(found)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	fmt.Printf("killresume p50 %.0f ms  max %.0f ms  (crash found p50 %.0f ms  max %.0f ms; load %s)\n",
		ms(resumed[len(resumed)/2]), ms(resumed[len(resumed)-1]), ms(found[len(found)/2]), ms(found[len(found)-1]),
		strings.TrimSpace(loadAverage()))
	reportTarget(b, ms(resumed[len(resumed)/2]), "ms_kill_to_resume")
	b.ReportMetric(ms(resumed[len(resumed)-1]), "ms_kill_to_resume_max")
	b.ReportMetric(0, "ns/op")
}

// The worker's defaults that BenchmarkFenceCost prices:
// workflow.EngineConfig.FenceTTL (CAIRN_FENCE_TTL) and
// workflow.ReconcilerConfig.SweepInterval (CAIRN_SWEEP_INTERVAL).
const (
	defaultFenceTTL      = 3 * time.Second
	defaultSweepInterval = 500 * time.Millisecond
)

// BenchmarkFenceCost counts, under valgrind's callgrind (as
// BenchmarkScriptInstructions does), what a fence costs Redis: the
// instructions of a renewal (renew.lua, Store.Renew, with its EVALSHA) of
// a running step's fence, and of a sweep of a queue with nothing to
// repair, as the reconciler sweeps now (Store.SweepDue, no lock: the
// expired fences read at every sweep, asynq's leases too every 2s) and as
// it swept before issue 26 (the sweep lock taken, the expired fences and
// stalled leases read, the lock released: four round trips). Each is the
// mean of CAIRN_BENCH_COST_RUNS calls (default 200). With the worker's
// defaults (a renewal every third of the fence TTL, 3s; a sweep every
// 500ms) and those before (10s, 2s), it prints what a running step's
// renewals cost Redis per second and what an idle worker's sweeps do, and
// reports instr/renew, instr/s/running-step and instr/s/idle-sweeps.
func BenchmarkFenceCost(b *testing.B) {
	runs := envInt(b, "CAIRN_BENCH_COST_RUNS", 200)
	cg := startCallgrind(b, os.Getenv("CAIRN_BENCH_CALLGRIND_DIR"))
	rdb := cg.rdb
	ctx := context.Background()
	const queue = "fencecost"
	client := publishNoop(b, rdb, queue)
	store := retrystate.New(rdb, queue)
	run, err := client.Start(ctx, workflowName, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	const token = "token"
	if bg, err := store.Begin(ctx, retrystate.BeginParams{RunID: run.ID, Index: 0, TaskID: tasks.ID(run.ID, 0, 1, 0),
		Token: token, FenceTTL: time.Minute, Retention: time.Hour, Now: time.Now()}); err != nil || bg.Outcome != retrystate.OutcomeOK {
		b.Fatalf("begin: %+v %v", bg, err)
	}
	renew := func() {
		if r, err := store.Renew(ctx, retrystate.RenewParams{RunID: run.ID, Index: 0, Token: token, TTL: time.Minute,
			Now: time.Now()}); err != nil || r != retrystate.Renewed {
			b.Fatalf("renew: %v %v", r, err)
		}
	}
	// An empty queue of its own for the sweeps (the run's fence is alive
	// anyway): nothing due.
	idle := retrystate.New(rdb, "fencecost_idle")
	sweepIdle := func(leases bool) func() {
		return func() {
			now := time.Now()
			var leaseBefore time.Time
			if leases {
				leaseBefore = now.Add(tasks.AsynqLeaseDuration - 8*time.Second)
			}
			if due, err := idle.SweepDue(ctx, now, leaseBefore); err != nil || due {
				b.Fatalf("sweep check: %v %v", due, err)
			}
		}
	}
	sweepLocked := func() {
		now := time.Now()
		if ok, err := idle.TryLock(ctx, retrystate.LockSweep, token, 30*time.Second); err != nil || !ok {
			b.Fatalf("sweep lock: %v %v", ok, err)
		}
		if dead, err := idle.ExpiredFences(ctx, now, 1000); err != nil || len(dead) > 0 {
			b.Fatalf("expired fences: %v %v", dead, err)
		}
		if ids, err := idle.StalledTasks(ctx, now.Add(tasks.AsynqLeaseDuration-8*time.Second), 1000); err != nil || len(ids) > 0 {
			b.Fatalf("stalled tasks: %v %v", ids, err)
		}
		if err := idle.Unlock(ctx, retrystate.LockSweep, token); err != nil {
			b.Fatal(err)
		}
	}
	// The first of each goes through unmeasured: it loads the scripts.
	renew()
	sweepIdle(true)()
	sweepLocked()
	per := func(label string, fn func()) int64 {
		return cg.count(label, func() {
			for range runs {
				fn()
			}
		}) / int64(runs)
	}
	r, sf, si, sl := per("renew", renew), per("sweep idle fences", sweepIdle(false)), per("sweep idle", sweepIdle(true)),
		per("sweep locked idle", sweepLocked)

	fmt.Printf("\nBenchmarkFenceCost: instructions redis-server executes per call (callgrind), %d calls each\n", runs)
	fmt.Printf("  renew (renew.lua)                                  %9d\n", r)
	fmt.Printf("  sweep, nothing due: fences read (SweepDue)         %9d\n", sf)
	fmt.Printf("  sweep, nothing due: fences and leases read         %9d\n", si)
	fmt.Printf("  sweep, nothing due, under the lock (before)        %9d\n", sl)
	// An idle worker's sweeps per second: now, one in every
	// stalledEvery/SweepInterval reads the leases too; before, each took
	// the lock.
	const stalledEvery = 2 * time.Second
	sweeps, leaseReads := time.Second.Seconds()/defaultSweepInterval.Seconds(), time.Second.Seconds()/stalledEvery.Seconds()
	idleNow := (sweeps-leaseReads)*float64(sf) + leaseReads*float64(si)
	idleBefore := float64(sl) / 2
	const fenceBefore = 10 * time.Second
	fmt.Printf("  a running step's renewals: %.0f instr/s (a renewal every %s; before, every %s: %.0f instr/s)\n",
		float64(r)/(defaultFenceTTL/3).Seconds(), defaultFenceTTL/3, (fenceBefore / 3).Round(time.Millisecond),
		float64(r)/(fenceBefore/3).Seconds())
	fmt.Printf("  an idle worker's sweeps: %.0f instr/s (every %s; before, every 2s: %.0f instr/s)\n",
		idleNow, defaultSweepInterval, idleBefore)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(r), "instr/renew")
	b.ReportMetric(float64(r)/(defaultFenceTTL/3).Seconds(), "instr/s/running-step")
	b.ReportMetric(idleNow, "instr/s/idle-sweeps")
}
