package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/workflow"
)

const (
	// stepsPerChain is the length of a raw asynq chain and of a Cairn run.
	stepsPerChain = 3
	// targetRatio is the goal: Cairn steps/s at least this fraction of raw
	// asynq tasks/s in the same run.
	targetRatio = 0.5

	// workerTaskCheckInterval and workerDelayedTaskCheckInterval are the
	// defaults workflow.NewWorker applies (workflow/worker.go). Both phases
	// set them explicitly, so they use the same asynq settings even if the
	// worker's defaults change; keep these in step with worker.go.
	workerTaskCheckInterval        = 20 * time.Millisecond
	workerDelayedTaskCheckInterval = 200 * time.Millisecond
	// asynqTaskCheckInterval and asynqDelayedTaskCheckInterval are asynq's
	// own defaults (asynq server.go, v0.26).
	asynqTaskCheckInterval        = time.Second
	asynqDelayedTaskCheckInterval = 5 * time.Second

	// phaseDeadline bounds the processing of one phase.
	phaseDeadline = 2 * time.Minute
	// stopDeadline bounds a worker's shutdown after its context ends.
	stopDeadline = time.Minute
	// setupWorkers enqueue chain heads and start runs, untimed.
	setupWorkers = 8

	rawTaskType  = "bench:chain"
	workflowName = "bench3"
)

// phaseConfig is what both phases of one comparison share.
type phaseConfig struct {
	// rounds is how often the raw and the Cairn phase alternate; the
	// target is judged on the median of the rounds' ratios, which a
	// passing hiccup of the machine does not move.
	rounds       int
	chains       int
	concurrency  int // in all, shared by the servers
	servers      int // asynq servers (Cairn workers) in the process
	taskCheck    time.Duration
	delayedCheck time.Duration
}

// concurrencyOf returns the concurrency of server i: the servers share
// cfg.concurrency as evenly as they can.
func (c phaseConfig) concurrencyOf(i int) int {
	n := c.concurrency / c.servers
	if i < c.concurrency%c.servers {
		n++
	}
	return max(n, 1)
}

func (c phaseConfig) serverConfig(queue string, i int) asynq.Config {
	return asynq.Config{
		Concurrency:              c.concurrencyOf(i),
		Queues:                   map[string]int{queue: 1},
		TaskCheckInterval:        c.taskCheck,
		DelayedTaskCheckInterval: c.delayedCheck,
		Logger:                   nopLogger{},
		LogLevel:                 asynq.FatalLevel,
	}
}

func configFromEnv(b *testing.B, chainsVar string, chains int, taskCheck, delayedCheck time.Duration) phaseConfig {
	cfg := phaseConfig{
		rounds:       1,
		chains:       envInt(b, chainsVar, chains),
		concurrency:  envInt(b, "CAIRN_BENCH_CONCURRENCY", 10),
		servers:      envInt(b, "CAIRN_BENCH_SERVERS", 1),
		taskCheck:    taskCheck,
		delayedCheck: delayedCheck,
	}
	if cfg.servers > cfg.concurrency {
		b.Fatalf("CAIRN_BENCH_SERVERS=%d is more than the concurrency, %d", cfg.servers, cfg.concurrency)
	}
	return cfg
}

// BenchmarkStepThroughput compares Cairn runs of 3 no-op steps with raw
// asynq chains of 3 no-op tasks, with the asynq polling intervals the Cairn
// worker uses by default. See the package documentation.
func BenchmarkStepThroughput(b *testing.B) {
	cfg := configFromEnv(b, "CAIRN_BENCH_CHAINS", 1000, workerTaskCheckInterval, workerDelayedTaskCheckInterval)
	cfg.rounds = envInt(b, "CAIRN_BENCH_ROUNDS", 5)
	compare(b, "asynq polling as the Cairn worker sets it by default", "tuned", cfg)
}

// BenchmarkStepThroughputAsynqDefaults is BenchmarkStepThroughput with
// asynq's own polling intervals, which the Cairn worker overrides, to
// document why. In "busy" more chains are in flight than the concurrency,
// so the queue only runs dry at the very end and the interval hardly
// matters. In "sparse" a single chain runs: after each task the fetch loop
// finds the queue empty and sleeps TaskCheckInterval/2 to 3/2 before it
// sees the successor, as every run with a worker to itself does.
// BenchmarkStepThroughputSparse is the reference for "sparse".
// CAIRN_BENCH_DEFAULTS=0 skips both.
func BenchmarkStepThroughputAsynqDefaults(b *testing.B) {
	skipDefaults(b)
	b.Run("busy", func(b *testing.B) {
		compare(b, "asynq's default polling (the Cairn worker overrides it), busy queue", "asynqdef_busy",
			configFromEnv(b, "CAIRN_BENCH_DEFAULTS_CHAINS", 200, asynqTaskCheckInterval, asynqDelayedTaskCheckInterval))
	})
	b.Run("sparse", func(b *testing.B) {
		compare(b, "asynq's default polling (the Cairn worker overrides it), sparse queue", "asynqdef_sparse",
			sparseConfig(b, asynqTaskCheckInterval, asynqDelayedTaskCheckInterval))
	})
}

// BenchmarkStepThroughputSparse is BenchmarkStepThroughput with a single
// chain: the reference for BenchmarkStepThroughputAsynqDefaults/sparse.
func BenchmarkStepThroughputSparse(b *testing.B) {
	skipDefaults(b)
	compare(b, "asynq polling as the Cairn worker sets it by default, sparse queue", "sparse",
		sparseConfig(b, workerTaskCheckInterval, workerDelayedTaskCheckInterval))
}

func skipDefaults(b *testing.B) {
	if os.Getenv("CAIRN_BENCH_DEFAULTS") == "0" {
		b.Skip("CAIRN_BENCH_DEFAULTS=0")
	}
}

// sparseConfig has CAIRN_BENCH_SPARSE_CHAINS chains, by default 1. (With
// no-op tasks, a few chains are enough to keep the queue from running dry
// most of the time.)
func sparseConfig(b *testing.B, taskCheck, delayedCheck time.Duration) phaseConfig {
	return configFromEnv(b, "CAIRN_BENCH_SPARSE_CHAINS", 1, taskCheck, delayedCheck)
}

// compare runs the raw asynq phase then the Cairn phase b.N times on the
// shared redis-server, reports the metrics and prints a table.
func compare(b *testing.B, title, tag string, cfg phaseConfig) {
	srv := redistest.Shared(b)
	ctl := newControl(srv.Addr())
	defer ctl.close()
	version, err := ctl.version(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	labels := loadScriptLabels()
	var raw, cairn result
	var ratios []float64
	for range b.N {
		for range max(cfg.rounds, 1) {
			r := runRaw(b, srv, ctl, cfg, newQueue(tag+"_raw"), labels)
			c := runCairn(b, srv, ctl, cfg, newQueue(tag+"_cairn"), labels)
			ratios = append(ratios, c.perSec()/r.perSec())
			raw.add(r)
			cairn.add(c)
		}
	}
	ratio := median(ratios)

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(raw.perSec(), "raw_tasks/s")
	b.ReportMetric(cairn.perSec(), "cairn_steps/s")
	b.ReportMetric(ratio, "ratio")
	b.ReportMetric(raw.cmdsPerUnit(), "cmds/raw_task")
	b.ReportMetric(cairn.cmdsPerUnit(), "cmds/cairn_step")
	b.ReportMetric(raw.tripsPerUnit(), "trips/raw_task")
	b.ReportMetric(cairn.tripsPerUnit(), "trips/cairn_step")

	phases := []struct {
		name string
		r    result
	}{{"raw asynq tasks", raw}, {"Cairn steps", cairn}}
	fmt.Printf("\n%s: %s\n", b.Name(), title)
	fmt.Printf("  redis-server %s on loopback; GOMAXPROCS %d; load average %s\n",
		version, runtime.GOMAXPROCS(0), loadAverage())
	fmt.Printf("  concurrency %d (%d asynq server(s)); TaskCheckInterval %s; DelayedTaskCheckInterval %s\n",
		cfg.concurrency, cfg.servers, cfg.taskCheck, cfg.delayedCheck)
	fmt.Printf("  %d chains (runs) of %d no-op tasks (steps) per phase; %d round(s) of raw then Cairn; %d iteration(s)\n",
		cfg.chains, stepsPerChain, max(cfg.rounds, 1), b.N)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  \tphase\tunits\telapsed\tunits/s\tcmds/unit\ttrips/unit\t\n")
	for _, p := range phases {
		fmt.Fprintf(tw, "  \t%s\t%d\t%s\t%.0f\t%.1f\t%.2f\t\n", p.name, p.r.units,
			p.r.elapsed.Round(time.Millisecond), p.r.perSec(), p.r.cmdsPerUnit(), p.r.tripsPerUnit())
	}
	_ = tw.Flush()
	tw = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  \twhere the time goes\tredis CPU/unit\tGo CPU/unit\tCPU/unit\tredis busy\tGo busy\tdequeue wait\t\n") //nolint:dupword // column headers
	for _, p := range phases {
		fmt.Fprintf(tw, "  \t%s\t%s\t%s\t%s\t%.0f%%\t%.0f%%\t%s\t\n", p.name,
			p.r.perUnit(p.r.redisCPU), p.r.perUnit(p.r.goCPU), p.r.perUnit(p.r.redisCPU+p.r.goCPU),
			p.r.busy(p.r.redisCPU), p.r.busy(p.r.goCPU), p.r.dequeueWait())
	}
	_ = tw.Flush()
	fmt.Printf("  CPU per raw task / CPU per Cairn step = %.3f (the ratio to expect when CPU-bound)\n",
		(raw.redisCPU+raw.goCPU).Seconds()/float64(raw.units)/((cairn.redisCPU+cairn.goCPU).Seconds()/float64(cairn.units)))
	verdict := "PASS"
	if ratio < targetRatio {
		verdict = "BELOW TARGET"
	}
	if len(ratios) > 1 {
		parts := make([]string, len(ratios))
		for i, r := range ratios {
			parts[i] = fmt.Sprintf("%.3f", r)
		}
		fmt.Printf("  ratio per round: %s\n", strings.Join(parts, " "))
	}
	fmt.Printf("  ratio Cairn steps/s / raw tasks/s = %.3f, median of %d round(s) (target >= %.1f): %s\n",
		ratio, len(ratios), targetRatio, verdict)
	if testing.Verbose() {
		printDetail("raw asynq, per task", raw)
		printDetail("Cairn, per step", cairn)
	}
}

// loadAverage returns the 1-minute load average, as a hint of how much
// else the machine was doing.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// result is the measurement of one phase (or the sum over b.N iterations).
type result struct {
	units   int64         // tasks (raw) or steps (Cairn) processed
	elapsed time.Duration // from server start to the last unit done
	// redisCPU and goCPU are the CPU time redis-server and this process
	// used over elapsed.
	redisCPU, goCPU time.Duration
	// dequeues and dequeueTime: asynq's dequeue calls over elapsed, and
	// the time the client waited for them.
	dequeues    int64
	dequeueTime time.Duration
	cmds        map[string]int64    // server commands by name (INFO commandstats)
	trips       int64               // client round trips
	calls       map[string]callStat // client round trips by label, with -v
	server      map[string]callStat // server execution time (slow log), with -v
}

func (r *result) add(o result) {
	r.units += o.units
	r.elapsed += o.elapsed
	r.redisCPU += o.redisCPU
	r.goCPU += o.goCPU
	r.dequeues += o.dequeues
	r.dequeueTime += o.dequeueTime
	r.trips += o.trips
	if r.cmds == nil {
		r.cmds = map[string]int64{}
		r.calls = map[string]callStat{}
		r.server = map[string]callStat{}
	}
	for k, v := range o.cmds {
		r.cmds[k] += v
	}
	addStats(r.calls, o.calls)
	addStats(r.server, o.server)
}

func addStats(to, from map[string]callStat) {
	for k, v := range from {
		s := to[k]
		s.n += v.n
		s.spent += v.spent
		to[k] = s
	}
}

func (r *result) perSec() float64       { return float64(r.units) / r.elapsed.Seconds() }
func (r *result) cmdsPerUnit() float64  { return float64(sum(r.cmds)) / float64(r.units) }
func (r *result) tripsPerUnit() float64 { return float64(r.trips) / float64(r.units) }

func (r *result) perUnit(d time.Duration) time.Duration {
	return (d / time.Duration(r.units)).Round(100 * time.Nanosecond)
}

// busy returns d as a percentage of elapsed (100% is one core).
func (r *result) busy(d time.Duration) float64 { return 100 * d.Seconds() / r.elapsed.Seconds() }

func (r *result) dequeueWait() time.Duration {
	if r.dequeues == 0 {
		return 0
	}
	return (r.dequeueTime / time.Duration(r.dequeues)).Round(time.Microsecond)
}

// meter measures a phase from the start of processing to its last unit.
type meter struct {
	start       time.Time
	redis0, go0 time.Duration
	ctl         *control
	hook        *tripCounter
}

// startMeter zeroes the counters and starts the clock.
func startMeter(b *testing.B, ctl *control, hook *tripCounter) *meter {
	b.Helper()
	ctx := context.Background()
	if err := ctl.resetStats(ctx); err != nil {
		b.Fatal(err)
	}
	if hook.detail {
		if err := ctl.startSlowlog(ctx); err != nil {
			b.Fatal(err)
		}
	}
	r0, err := ctl.cpu(ctx)
	if err != nil {
		b.Fatal(err)
	}
	hook.reset()
	return &meter{ctl: ctl, hook: hook, redis0: r0, go0: processCPU(), start: time.Now()}
}

// stop stops the clock, the CPU meters and the dequeue timer into r.
func (m *meter) stop(b *testing.B, r *result) {
	b.Helper()
	r.elapsed = time.Since(m.start)
	r.goCPU = processCPU() - m.go0
	r.dequeues = m.hook.dequeues.Load()
	r.dequeueTime = time.Duration(m.hook.dequeueTime.Load())
	r1, err := m.ctl.cpu(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	r.redisCPU = r1 - m.redis0
}

// finish reads the command counts into r once the phase's servers have
// stopped, so that they include the last acknowledgements.
func (m *meter) finish(b *testing.B, r *result) {
	b.Helper()
	cmds, err := m.ctl.commandStats(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	r.cmds = cmds
	r.trips = m.hook.trips.Load()
	r.calls = m.hook.snapshot()
	if m.hook.detail {
		if r.server, err = m.ctl.serverTime(context.Background(), m.hook.labels); err != nil {
			b.Fatal(err)
		}
	}
}

func printDetail(title string, r result) {
	fmt.Printf("  %s:\n", title)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "    server commands (INFO commandstats)\tper unit\t\n")
	for _, k := range topCounts(r.cmds) {
		fmt.Fprintf(tw, "    %s\t%.3f\t\n", k, float64(r.cmds[k])/float64(r.units))
	}
	_ = tw.Flush()
	printStats("client round trips", "mean latency", r.units, r.calls)
	printStats("server execution (SLOWLOG)", "mean", r.units, r.server)
}

// printStats prints calls and time per unit by label, most time first,
// commands called by scripts last (their time is in the scripts' too).
func printStats(title, mean string, units int64, m map[string]callStat) {
	spent := make(map[string]int64, len(m))
	var total time.Duration
	for k, v := range m {
		spent[k] = int64(v.spent)
		if !strings.HasPrefix(k, inScript) {
			total += v.spent
		}
	}
	var top, inner []string
	for _, k := range topCounts(spent) {
		if strings.HasPrefix(k, inScript) {
			inner = append(inner, k)
		} else {
			top = append(top, k)
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "    %s\tper unit\ttime/unit\t%s\t\n", title, mean)
	for _, k := range append(top, inner...) {
		s := m[k]
		fmt.Fprintf(tw, "    %s\t%.3f\t%s\t%s\t\n", k, float64(s.n)/float64(units),
			(s.spent / time.Duration(units)).Round(100*time.Nanosecond), (s.spent / time.Duration(s.n)).Round(time.Microsecond))
	}
	fmt.Fprintf(tw, "    total\t\t%s\t\t\n", (total / time.Duration(units)).Round(100*time.Nanosecond))
	_ = tw.Flush()
}

// newWorkload returns the client of a phase's workload: the asynq servers
// and client, and Cairn, share it, as in a worker process. Its hook counts
// round trips.
func newWorkload(b *testing.B, srv *redistest.Server, queue string, labels *scriptLabels) (*redis.Client, *tripCounter) {
	b.Helper()
	hook := newTripCounter(testing.Verbose(), labels.forQueue(queue))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	rdb.AddHook(hook)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		_ = rdb.Close()
		b.Fatal(err)
	}
	return rdb, hook
}

type chainPayload struct {
	Chain int `json:"chain"`
	Index int `json:"index"`
}

func chainTask(chain, index int) *asynq.Task {
	p, _ := json.Marshal(chainPayload{Chain: chain, Index: index}) // two ints always marshal
	return asynq.NewTask(rawTaskType, p)
}

// runRaw processes cfg.chains chains of stepsPerChain no-op asynq tasks,
// each enqueueing the next of its chain.
func runRaw(b *testing.B, srv *redistest.Server, ctl *control, cfg phaseConfig, queue string, labels *scriptLabels) result {
	b.Helper()
	ctx := context.Background()
	rdb, hook := newWorkload(b, srv, queue, labels)
	defer func() { _ = rdb.Close() }()
	client := asynq.NewClientFromRedisClient(rdb)

	total := int64(cfg.chains * stepsPerChain)
	var ran atomic.Int64
	done := make(chan struct{})
	mux := asynq.NewServeMux()
	mux.HandleFunc(rawTaskType, func(ctx context.Context, t *asynq.Task) error {
		var p chainPayload
		if err := json.Unmarshal(t.Payload(), &p); err != nil {
			return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
		}
		if p.Index+1 < stepsPerChain {
			if _, err := client.EnqueueContext(ctx, chainTask(p.Chain, p.Index+1), asynq.Queue(queue)); err != nil {
				return err
			}
		}
		if ran.Add(1) == total {
			close(done)
		}
		return nil
	})

	if err := parallel("raw-setup", cfg.chains, setupWorkers, func(i int) error {
		_, err := client.EnqueueContext(ctx, chainTask(i, 0), asynq.Queue(queue))
		return err
	}); err != nil {
		b.Fatalf("raw asynq: enqueue chain heads: %v", err)
	}

	servers := make([]*asynq.Server, cfg.servers)
	for i := range servers {
		servers[i] = asynq.NewServerFromRedisClient(rdb, cfg.serverConfig(queue, i))
	}
	shutdown := func() {
		for _, s := range servers {
			s.Shutdown() // a no-op on a server that is not running
		}
	}
	defer shutdown()
	m := startMeter(b, ctl, hook)
	// The servers' goroutines inherit the label, for -cpuprofile.
	pprof.Do(ctx, pprof.Labels("phase", "raw"), func(context.Context) {
		for _, s := range servers {
			if err := s.Start(mux); err != nil {
				b.Fatalf("raw asynq: start server: %v", err)
			}
		}
	})
	deadline := time.NewTimer(phaseDeadline)
	defer deadline.Stop()
	select {
	case <-done:
	case <-deadline.C:
		b.Fatalf("raw asynq: only %d of %d tasks ran in %s", ran.Load(), total, phaseDeadline)
	}
	r := result{units: total}
	m.stop(b, &r)
	// The acknowledgements of the last tasks and the servers' shutdown
	// are part of the command count, not of the time.
	shutdown()
	m.finish(b, &r)
	return r
}

// succeededKey is the index of a queue's succeeded runs, as
// retrystate/keys.go (byStatus) names it; the benchmark polls its size.
func succeededKey(queue string) string {
	return "cairn:{" + queue + "}:idx:status:" + string(workflow.StatusSucceeded)
}

// runCairn processes cfg.chains runs of a workflow of stepsPerChain no-op
// steps on cfg.servers workflow.Workers.
func runCairn(b *testing.B, srv *redistest.Server, ctl *control, cfg phaseConfig, queue string, labels *scriptLabels) result {
	b.Helper()
	ctx := context.Background()
	rdb, hook := newWorkload(b, srv, queue, labels)
	defer func() { _ = rdb.Close() }()
	log := slog.New(slog.DiscardHandler)

	var lastRan atomic.Int64 // executions of the last step's body
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	last := func(context.Context, *workflow.StepContext) (any, error) {
		lastRan.Add(1)
		return nil, nil
	}
	def := workflow.Definition{Name: workflowName}
	for i := range stepsPerChain {
		fn := noop
		if i == stepsPerChain-1 {
			fn = last
		}
		def.Steps = append(def.Steps, workflow.Step{Name: fmt.Sprintf("s%d", i+1), Run: fn})
	}
	workers := make([]*workflow.Worker, cfg.servers)
	for i := range workers {
		w, err := workflow.NewWorker(rdb, workflow.WorkerConfig{
			EngineConfig:             workflow.EngineConfig{Queue: queue, Logger: log},
			Concurrency:              cfg.concurrencyOf(i),
			TaskCheckInterval:        cfg.taskCheck,
			DelayedTaskCheckInterval: cfg.delayedCheck,
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Register(def); err != nil {
			b.Fatal(err)
		}
		workers[i] = w
	}
	// Run publishes the definitions too; Start needs them now.
	if err := workers[0].Engine().Publish(ctx); err != nil {
		b.Fatal(err)
	}
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: log})
	if err := parallel("cairn-setup", cfg.chains, setupWorkers, func(int) error {
		_, err := client.Start(ctx, workflowName, nil, nil)
		return err
	}); err != nil {
		b.Fatalf("cairn: start runs: %v", err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	runDone := make(chan error, len(workers))
	running := 0
	stop := func() {
		cancel()
		t := time.NewTimer(stopDeadline)
		defer t.Stop()
		for ; running > 0; running-- {
			select {
			case err := <-runDone:
				if err != nil {
					b.Errorf("cairn: worker: %v", err)
				}
			case <-t.C:
				b.Fatalf("cairn: %d worker(s) did not stop within %s of their context ending", running, stopDeadline)
			}
		}
	}
	defer stop()
	m := startMeter(b, ctl, hook)
	// The workers' goroutines inherit the label, for -cpuprofile.
	pprof.Do(ctx, pprof.Labels("phase", "cairn"), func(context.Context) {
		for _, w := range workers {
			running++
			go func() { runDone <- w.Run(runCtx) }()
		}
	})

	// Poll the succeeded index every 20ms; once every last step has run,
	// every 1ms, so that the poll adds little to the measured time.
	key := succeededKey(queue)
	want := int64(cfg.chains)
	end := m.start.Add(phaseDeadline)
	for {
		n, err := ctl.zcard(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if n >= want {
			break
		}
		if time.Now().After(end) {
			b.Fatalf("cairn: only %d of %d runs succeeded in %s", n, want, phaseDeadline)
		}
		interval := 20 * time.Millisecond
		if lastRan.Load() >= want {
			interval = time.Millisecond
		}
		t := time.NewTimer(interval)
		select {
		case err := <-runDone:
			t.Stop()
			running--
			b.Fatalf("cairn: a worker stopped early: %v", err)
		case <-t.C:
		}
	}
	r := result{units: int64(cfg.chains * stepsPerChain)}
	m.stop(b, &r)
	stop()
	m.finish(b, &r)
	return r
}

// median returns the median of xs (the mean of the middle two for an even
// count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
