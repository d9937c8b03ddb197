package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// seedFinished writes finished runs as the scripts would leave them, at
// their smallest: a run hash of a succeeded 3-step run with no input and
// no output (the fields the indexes, the listings and the trimming read;
// no definition copy, no journal), expiring after the retention, its
// entries in idx:all and idx:status:succeeded by created_at, and its
// run_succeeded entry in the notification stream (capped as notify() caps
// it).
// KEYS[1] idx:all, KEYS[2] idx:status:succeeded, KEYS[3] notifications
// ARGV[1] the run key prefix (cairn:{q}:run:), ARGV[2] retention ms,
// ARGV[3] the notification stream's MAXLEN, ARGV[4...] run ID, created_at
// ms, in pairs.
var seedFinished = redis.NewScript(`
local prefix, ttl, maxlen = ARGV[1], ARGV[2], ARGV[3]
for i = 4, #ARGV, 2 do
  local id, at = ARGV[i], ARGV[i + 1]
  local key = prefix .. id
  redis.call("HSET", key, "workflow", "bench3", "owner", "", "status", "succeeded", "steps", "3", "current", "2",
    "created_at", at, "started_at", at, "updated_at", at, "finished_at", at,
    "s0.status", "succeeded", "s1.status", "succeeded", "s2.status", "succeeded")
  redis.call("PEXPIRE", key, ttl)
  redis.call("ZADD", KEYS[1], at, id)
  redis.call("ZADD", KEYS[2], at, id)
  redis.call("XADD", KEYS[3], "MAXLEN", "~", maxlen, "*", "type", "run_succeeded", "at", at, "run", id,
    "workflow", "bench3", "owner", "")
end
return (#ARGV - 3) / 2
`)

// notifyMaxLen is NOTIFY_MAXLEN of retrystate/lua/lib/notify.lua.
const notifyMaxLen = 100000

// BenchmarkRetainedRuns shows whether finished runs kept in Redis (for the
// retention, 7 days by default) slow the step path. On a private
// redis-server it seeds CAIRN_BENCH_RETAINED_RUNS finished runs (default
// 100,000; 1,000,000 for the full figure) in one queue with a Lua script
// (seedFinished: minimal run hashes, their index entries, the notification
// stream at its cap), created over the last 6 days. Then, for
// CAIRN_BENCH_RETAINED_ROUNDS rounds (default 3), it runs a Cairn phase as
// BenchmarkStepThroughput's (end to end, CAIRN_BENCH_RETAINED_CHAINS runs,
// default 3000) on a fresh queue and on the queue holding the retained
// runs, and times each script of a run's life called directly and one at a
// time (Client.Start, then Begin and Complete of each step, for
// CAIRN_BENCH_RETAINED_DIRECT runs, default 1000) on both, server side
// (SLOWLOG with a threshold of 0) and client side. A first phase, before
// the seeding, shows the effect of the keyspace's size alone. Last, the
// seeded runs' hashes are deleted (as their expiry would) and a reconciler
// whose clock is past their retention trims their index entries
// (TrimIndexes, 10,000 runs per pass): it reports how long that takes.
func BenchmarkRetainedRuns(b *testing.B) {
	n := envInt(b, "CAIRN_BENCH_RETAINED_RUNS", 100000)
	rounds := envInt(b, "CAIRN_BENCH_RETAINED_ROUNDS", 3)
	direct := envInt(b, "CAIRN_BENCH_RETAINED_DIRECT", 1000)
	cfg := configFromEnv(b, "CAIRN_BENCH_RETAINED_CHAINS", 3000, workerTaskCheckInterval, workerDelayedTaskCheckInterval)
	cfg.clock = endToEnd
	cfg.noMemory = true
	ctx := context.Background()
	srv := redistest.Start(b, &redistest.Options{Args: []string{"--maxmemory-policy", "noeviction"}})
	ctl := newControl(srv.Addr())
	defer ctl.close()
	labels := loadScriptLabels()
	const retained = "retained"

	loads := []string{loadAverage()}
	empty := runCairn(b, srv, ctl, cfg, strict, "retained_before", labels)

	used0, err := ctl.usedMemory(ctx)
	if err != nil {
		b.Fatal(err)
	}
	seedStart := time.Now()
	ids := seedRetained(b, ctl.rdb, retained, n)
	seedTime := time.Since(seedStart)
	used1, err := ctl.usedMemory(ctx)
	if err != nil {
		b.Fatal(err)
	}
	loads = append(loads, loadAverage())

	var fresh, kept result
	var ratios []float64
	segments := lifeSegments()
	costs := [2][][]float64{make([][]float64, len(segments)), make([][]float64, len(segments))} // fresh, kept: server µs
	trips := [2][][]float64{make([][]float64, len(segments)), make([][]float64, len(segments))} // client µs
	for r := range rounds {
		q := "fresh_" + strconv.Itoa(r)
		f := runCairn(b, srv, ctl, cfg, strict, q, labels)
		k := runCairn(b, srv, ctl, cfg, strict, retained, labels)
		ratios = append(ratios, k.perSec()/f.perSec())
		fresh.add(f)
		kept.add(k)
		for i, queue := range []string{q, retained} {
			server, client := lifeCosts(b, srv, ctl, labels, queue, direct)
			for s := range segments {
				costs[i][s] = append(costs[i][s], server[s])
				trips[i][s] = append(trips[i][s], client[s])
			}
		}
		loads = append(loads, loadAverage())
	}

	// The retained runs expire: their hashes go (as expiry would delete
	// them), and the reconciler trims their index entries.
	usedKept, err := ctl.usedMemory(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for lo := 0; lo < len(ids); lo += 1000 {
		pipe := ctl.rdb.Pipeline()
		for _, id := range ids[lo:min(lo+1000, len(ids))] {
			pipe.Unlink(ctx, "cairn:{"+retained+"}:run:"+id)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	usedExpired, err := ctl.usedMemory(ctx)
	if err != nil {
		b.Fatal(err)
	}
	trimTime, passes, trimmed := trimRetained(b, ctl.rdb, retained)
	usedTrimmed, err := ctl.usedMemory(ctx)
	if err != nil {
		b.Fatal(err)
	}
	loads = append(loads, loadAverage())

	ratio := median(ratios)
	fmt.Printf("\n%s: %d retained finished runs in the queue of the step path\n", b.Name(), n)
	fmt.Printf("  load average (1 min) before, after seeding, after each round, after trimming: %s\n", strings.Join(loads, " "))
	fmt.Printf("  seeded in %s; Redis used_memory grew %.0f MB, %.0f bytes per seeded run (a minimal run hash, "+
		"2 index entries, a notification)\n", seedTime.Round(time.Millisecond), float64(used1-used0)/1e6,
		float64(used1-used0)/float64(n))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  \tCairn phase (%d runs, end to end)\tsteps/s\tcmds/step\tredis CPU/step\tGo CPU/step\t\n", cfg.chains)
	for _, p := range []struct {
		name string
		r    result
	}{{"before seeding (empty server)", empty}, {"fresh queue", fresh}, {"queue with the retained runs", kept}} {
		fmt.Fprintf(tw, "  \t%s\t%.0f\t%.1f\t%s\t%s\t\n", p.name, p.r.perSec(), p.r.cmdsPerUnit(),
			p.r.perUnit(p.r.redisCPU), p.r.perUnit(p.r.goCPU))
	}
	_ = tw.Flush()
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  \tone call at a time, median of rounds\tRedis µs, fresh\tRedis µs, retained\tclient µs, fresh\tclient µs, retained\t\n")
	for s, name := range segments {
		fmt.Fprintf(tw, "  \t%s\t%.1f\t%.1f\t%.0f\t%.0f\t\n", name, median(costs[0][s]), median(costs[1][s]),
			median(trips[0][s]), median(trips[1][s]))
	}
	_ = tw.Flush()
	fmt.Printf("  expiry: deleting the seeded runs' hashes freed %.0f MB; then Reconciler.Pass trimmed the index entries "+
		"of %d runs in %s (%d passes, the last trimming nothing), which freed %.0f MB\n",
		float64(usedKept-usedExpired)/1e6, trimmed, trimTime.Round(time.Millisecond), passes,
		float64(usedExpired-usedTrimmed)/1e6)
	parts := make([]string, len(ratios))
	for i, r := range ratios {
		parts[i] = fmt.Sprintf("%.3f", r)
	}
	fmt.Printf("retained %d steps/s ratio %.3f  (steps/s on the queue with the retained runs / on a fresh queue, median of %d round(s): %s)\n",
		n, ratio, len(ratios), strings.Join(parts, " "))
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ratio, "ratio_retained")
	b.ReportMetric(float64(used1-used0)/float64(n), "bytes/seeded_run")
	b.ReportMetric(trimTime.Seconds(), "s/trim")
}

// seedRetained seeds n finished runs in queue, created over the 6 days
// before the last hour, and returns their IDs.
func seedRetained(b *testing.B, rdb *redis.Client, queue string, n int) []string {
	b.Helper()
	ctx := context.Background()
	prefix := "cairn:{" + queue + "}:"
	keys := []string{prefix + "idx:all", prefix + "idx:status:" + string(workflow.StatusSucceeded), prefix + "notifications"}
	first := time.Now().Add(-6*24*time.Hour - time.Hour)
	step := 6 * 24 * time.Hour / time.Duration(n)
	ids := make([]string, n)
	const batch = 1000
	for lo := 0; lo < n; lo += batch {
		argv := []any{prefix + "run:", retention.Milliseconds(), notifyMaxLen}
		for i := lo; i < min(lo+batch, n); i++ {
			at := first.Add(time.Duration(i) * step)
			ids[i] = workflow.NewRunID(at)
			argv = append(argv, ids[i], at.UnixMilli())
		}
		if err := seedFinished.Run(ctx, rdb, keys, argv...).Err(); err != nil {
			b.Fatalf("seed finished runs: %v", err)
		}
	}
	return ids
}

// lifeSegments names the calls lifeCosts times.
func lifeSegments() []string {
	out := []string{"Client.Start (create.lua, enqueue, reads)"}
	for i := range stepsPerChain {
		out = append(out, fmt.Sprintf("begin s%d", i+1), fmt.Sprintf("complete s%d", i+1))
	}
	out[len(out)-1] += " (run succeeds)"
	return out
}

// lifeCosts takes that many runs (runs) of the benchmark's workflow on queue through
// their life one call at a time, as the engine would (Client.Start, then
// Store.Begin and Store.Complete of each step, the next step's task written
// by complete), and returns for each segment of lifeSegments the Redis
// execution time per call (every command of the segment, from SLOWLOG) and
// the time per call as the client saw it, in µs.
func lifeCosts(b *testing.B, srv *redistest.Server, ctl *control, labels *scriptLabels, queue string, runs int) (server, client []float64) {
	b.Helper()
	ctx := context.Background()
	rdb, _ := newWorkload(b, srv, queue, labels)
	defer func() { _ = rdb.Close() }()
	starter := publishNoop(b, rdb, queue)
	store := retrystate.New(rdb, queue)
	// A first run loads the scripts, unmeasured.
	life(b, starter, store, queue, 1, func(_ int, fn func()) { fn() })
	server = make([]float64, len(lifeSegments()))
	client = make([]float64, len(server))
	life(b, starter, store, queue, runs, func(seg int, fn func()) {
		if err := ctl.startSlowlog(ctx); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		fn()
		client[seg] = float64(time.Since(t0).Microseconds()) / float64(runs)
		st, err := ctl.serverTime(ctx, labels.forQueue(queue))
		if err != nil {
			b.Fatal(err)
		}
		var total time.Duration
		for label, s := range st {
			if !strings.HasPrefix(label, inScript) {
				total += s.spent
			}
		}
		server[seg] = float64(total.Nanoseconds()) / 1e3 / float64(runs)
	})
	return server, client
}

// life starts n runs and takes them through their steps, each segment
// (the starts, then the begins and the completes of each step) in a call
// of measure.
func life(b *testing.B, starter *workflow.Client, store *retrystate.Store, queue string, n int, measure func(seg int, fn func())) {
	b.Helper()
	ctx := context.Background()
	ids := make([]string, n)
	measure(0, func() {
		for i := range ids {
			r, err := starter.Start(ctx, workflowName, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			ids[i] = r.ID
		}
	})
	next := make([]*retrystate.Dispatch, n)
	for idx := range stepsPerChain {
		measure(1+2*idx, func() {
			for i, id := range ids {
				bg, err := store.Begin(ctx, retrystate.BeginParams{RunID: id, Index: idx, TaskID: tasks.ID(id, idx, 1, 0),
					Token: "t" + strconv.Itoa(i), FenceTTL: 10 * time.Second, Retention: retention, Now: time.Now()})
				if err != nil || bg.Outcome != retrystate.OutcomeOK {
					b.Fatalf("begin %s step %d: outcome %s, %v", id, idx, bg.Outcome, err)
				}
				next[i] = bg.Started.Next
			}
		})
		measure(2+2*idx, func() {
			for i, id := range ids {
				a := retrystate.CompleteParams{RunID: id, Index: idx, Token: "t" + strconv.Itoa(i), Output: "null",
					Retention: retention, Now: time.Now()}
				if nx := next[i]; nx != nil {
					np := tasks.Step{RunID: id, Workflow: workflowName, Index: nx.Index, Name: nx.Name, Attempt: nx.Attempt}
					a.NextTaskID, a.NextMessage = np.ID(), np.AsynqMessage(queue, nx.Timeout)
				}
				c, err := store.Complete(ctx, a)
				if err != nil || c.Outcome == retrystate.OutcomeFenced {
					b.Fatalf("complete %s step %d: %+v, %v", id, idx, c, err)
				}
			}
		})
	}
}

// trimRetained runs reconciliation passes, with a clock a retention and a
// day ahead, until one trims nothing, and returns the time, the passes and
// the index entries trimmed.
func trimRetained(b *testing.B, rdb *redis.Client, queue string) (time.Duration, int, int) {
	b.Helper()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	engine, err := workflow.NewEngine(rdb, workflow.EngineConfig{Queue: queue, Logger: log,
		Clock: offsetClock{offset: retention + 24*time.Hour}})
	if err != nil {
		b.Fatal(err)
	}
	rec := engine.NewReconciler(workflow.ReconcilerConfig{})
	start := time.Now()
	passes, trimmed := 0, 0
	for {
		rep, err := rec.Pass(ctx)
		if err != nil {
			b.Fatalf("trim pass: %v", err)
		}
		passes++
		got := rep.Repairs["trimmed"]
		trimmed += got
		if got == 0 {
			return time.Since(start), passes, trimmed
		}
	}
}
