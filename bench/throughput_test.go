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
	// targetRatio is the goal of a variant without one of its own in the
	// table of targets (targets_test.go: strict 0.7, inline 1.5): Cairn
	// steps/s at least this fraction of raw asynq tasks/s in the same run.
	targetRatio = 0.5

	// workerTaskCheckInterval and workerDelayedTaskCheckInterval are the
	// defaults workflow.NewWorker applies (internal/engine/worker.go). Both phases
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
	// starters enqueue the chain heads and start the runs, this many at a
	// time: inside the clock end to end, before it otherwise.
	starters = 8

	rawTaskType  = "bench:chain"
	workflowName = "bench3"
)

// clockMode is what a phase's clock covers.
type clockMode int

const (
	// endToEnd: the servers (workers) run and have taken a warm-up chain
	// (run) through before the clock starts; the clock starts before the
	// first chain head is enqueued (the first run is started) and stops
	// when an in-process hook sees the last chain's last task (the last
	// run) done: the raw chain's last handler, the Cairn engine's
	// Observer.RunFinished. Starting the work is timed and counted.
	endToEnd clockMode = iota
	// processing: the chain heads are enqueued, the runs started, before
	// the clock and the counters start; the clock starts with the servers
	// (workers) and stops on the same hooks. Only the processing is
	// measured.
	processing
)

func (m clockMode) String() string {
	if m == processing {
		return "processing only (chain heads enqueued and runs started before the clock)"
	}
	return "end to end (from before the first enqueue or Start to the last chain or run done, seen by an in-process hook)"
}

// cairnVariant is one Cairn phase of a comparison: the benchmark's workflow
// as modify leaves it. Each variant runs after the raw phase of every
// round, and its median ratio to raw asynq is printed on a line "ratio
// <name> <median>".
type cairnVariant struct {
	name   string
	modify func(*workflow.Definition) // nil: the definition as it is
}

// strict is Cairn as it is by default: every step begun and checkpointed
// in Redis by its own scripts.
var strict = cairnVariant{name: "strict"}

// mainVariants are the Cairn phases of BenchmarkStepThroughput and
// BenchmarkStepThroughputProcessing: a name and a change to the
// definition. inline is inline continuation (workflow.Definition.Inline).
func mainVariants() []cairnVariant {
	return []cairnVariant{strict, {name: "inline", modify: func(d *workflow.Definition) { d.Inline = true }}}
}

// phaseConfig is what the phases of one comparison share.
type phaseConfig struct {
	// rounds is how often the raw and the Cairn phases alternate; the
	// target is judged on the median of the rounds' ratios, which a
	// passing hiccup of the machine does not move.
	rounds       int
	chains       int
	concurrency  int // in all, shared by the servers
	servers      int // asynq servers (Cairn workers) in the process
	taskCheck    time.Duration
	delayedCheck time.Duration
	clock        clockMode
	variants     []cairnVariant
	// noMemory skips measuring the memory the runs keep (a queue holding
	// many other runs).
	noMemory bool
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
		clock:        processing,
		variants:     []cairnVariant{strict},
		noMemory:     true,
	}
	if cfg.servers > cfg.concurrency {
		b.Fatalf("CAIRN_BENCH_SERVERS=%d is more than the concurrency, %d", cfg.servers, cfg.concurrency)
	}
	return cfg
}

// BenchmarkStepThroughput compares Cairn runs of 3 no-op steps with raw
// asynq chains of 3 no-op tasks end to end, starts included, with the asynq
// polling intervals the Cairn worker uses by default. See the package
// documentation.
func BenchmarkStepThroughput(b *testing.B) {
	cfg := configFromEnv(b, "CAIRN_BENCH_CHAINS", 3000, workerTaskCheckInterval, workerDelayedTaskCheckInterval)
	cfg.rounds = envInt(b, "CAIRN_BENCH_ROUNDS", 5)
	cfg.clock = endToEnd
	cfg.variants = mainVariants()
	cfg.noMemory = false
	compare(b, "asynq polling as the Cairn worker sets it by default", "e2e", cfg)
}

// BenchmarkStepThroughputProcessing is BenchmarkStepThroughput with only
// the processing timed and counted: the chain heads are enqueued and the
// runs started before the clock.
func BenchmarkStepThroughputProcessing(b *testing.B) {
	cfg := configFromEnv(b, "CAIRN_BENCH_CHAINS", 3000, workerTaskCheckInterval, workerDelayedTaskCheckInterval)
	cfg.rounds = envInt(b, "CAIRN_BENCH_PROCESSING_ROUNDS", 3)
	cfg.variants = mainVariants()
	cfg.noMemory = false
	compare(b, "asynq polling as the Cairn worker sets it by default", "tuned", cfg)
}

// BenchmarkStepThroughputAsynqDefaults repeats both phases with asynq's own
// polling intervals (processing only), which the Cairn worker overrides, to
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

// BenchmarkStepThroughputSparse is BenchmarkStepThroughputProcessing with a
// single chain: the reference for BenchmarkStepThroughputAsynqDefaults/sparse.
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

// compare runs, b.N times cfg.rounds times, the raw asynq phase then each
// Cairn variant's phase on the shared redis-server, reports the metrics and
// prints a table.
func compare(b *testing.B, title, tag string, cfg phaseConfig) {
	srv := redistest.Shared(b)
	ctl := newControl(srv.Addr())
	defer ctl.close()
	version, err := ctl.version(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	labels := loadScriptLabels()
	var raw result
	cairn := make([]result, len(cfg.variants))
	ratios := make([][]float64, len(cfg.variants))
	loads := []string{loadAverage()}
	for range b.N {
		for range max(cfg.rounds, 1) {
			r := runRaw(b, srv, ctl, cfg, newQueue(tag+"_raw"), labels)
			raw.add(r)
			for i, v := range cfg.variants {
				c := runCairn(b, srv, ctl, cfg, v, newQueue(tag+"_"+v.name), labels)
				ratios[i] = append(ratios[i], c.perSec()/r.perSec())
				cairn[i].add(c)
			}
			loads = append(loads, loadAverage())
		}
	}

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(raw.perSec(), "raw_tasks/s")
	b.ReportMetric(raw.cmdsPerUnit(), "cmds/raw_task")
	b.ReportMetric(raw.tripsPerUnit(), "trips/raw_task")
	for i, v := range cfg.variants {
		b.ReportMetric(cairn[i].perSec(), v.name+"_steps/s")
		reportTarget(b, median(ratios[i]), "ratio_"+v.name)
		b.ReportMetric(cairn[i].cmdsPerUnit(), "cmds/"+v.name+"_step")
		b.ReportMetric(cairn[i].tripsPerUnit(), "trips/"+v.name+"_step")
		if m := cairn[i].mem; m != nil {
			reportTarget(b, m.perRun(), "bytes/run_"+v.name)
		}
	}

	type phase struct {
		name string
		r    result
	}
	phases := []phase{{"raw asynq tasks", raw}}
	for i, v := range cfg.variants {
		phases = append(phases, phase{"Cairn " + v.name + " steps", cairn[i]})
	}
	fmt.Printf("\n%s: %s\n", b.Name(), title)
	fmt.Printf("  redis-server %s on loopback; GOMAXPROCS %d; load average (1 min) before and after each round: %s\n",
		version, runtime.GOMAXPROCS(0), strings.Join(loads, " "))
	fmt.Printf("  clock: %s\n", cfg.clock)
	fmt.Printf("  concurrency %d (%d asynq server(s)); TaskCheckInterval %s; DelayedTaskCheckInterval %s; %d starters\n",
		cfg.concurrency, cfg.servers, cfg.taskCheck, cfg.delayedCheck, starters)
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
	fmt.Fprintf(tw, "  \twhere the time goes\tredis CPU/unit\tof it kernel\tGo CPU/unit\tCPU/unit\tredis busy\tGo busy\tdequeue wait\t\n") //nolint:dupword // column headers
	for _, p := range phases {
		fmt.Fprintf(tw, "  \t%s\t%s\t%s\t%s\t%s\t%.0f%%\t%.0f%%\t%s\t\n", p.name,
			p.r.perUnit(p.r.redisCPU), p.r.perUnit(p.r.redisSys), p.r.perUnit(p.r.goCPU), p.r.perUnit(p.r.redisCPU+p.r.goCPU),
			p.r.busy(p.r.redisCPU), p.r.busy(p.r.goCPU), p.r.dequeueWait())
	}
	_ = tw.Flush()
	for i, v := range cfg.variants {
		c := cairn[i]
		fmt.Printf("  CPU per raw task / CPU per Cairn %s step = %.3f (the ratio to expect when CPU-bound)\n", v.name,
			(raw.redisCPU+raw.goCPU).Seconds()/float64(raw.units)/((c.redisCPU+c.goCPU).Seconds()/float64(c.units)))
	}
	for i, v := range cfg.variants {
		printRatio(v.name, ratios[i])
	}
	for i, v := range cfg.variants {
		if m := cairn[i].mem; m != nil {
			m.print(v.name)
		}
	}
	if testing.Verbose() {
		printDetail("raw asynq, per task", raw)
		for i, v := range cfg.variants {
			printDetail("Cairn "+v.name+", per step", cairn[i])
		}
	}
}

// printRatio prints the line "ratio <name> <median>" (at the start of the
// line, for grep) with the rounds' ratios and the verdict.
func printRatio(name string, ratios []float64) {
	ratio := median(ratios)
	goal, ok := goalOf("ratio_" + name)
	if !ok {
		goal = targetRatio
	}
	verdict := "PASS"
	if ratio < goal {
		verdict = "BELOW TARGET"
	}
	parts := make([]string, len(ratios))
	for i, r := range ratios {
		parts[i] = fmt.Sprintf("%.3f", r)
	}
	fmt.Printf("ratio %s %.3f  (Cairn %s steps/s / raw asynq tasks/s, median of %d round(s): %s; target >= %.1f: %s)\n",
		name, ratio, name, len(ratios), strings.Join(parts, " "), goal, verdict)
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

// result is the measurement of one phase (or the sum over rounds).
type result struct {
	units   int64         // tasks (raw) or steps (Cairn) processed
	elapsed time.Duration // what the clock covers (clockMode)
	// redisCPU and goCPU are the CPU time redis-server and this process
	// used over elapsed.
	redisCPU, goCPU time.Duration
	// redisSys is the part of redisCPU spent in the kernel.
	redisSys time.Duration
	// dequeues and dequeueTime: asynq's dequeue calls over elapsed, and
	// the time the client waited for them.
	dequeues    int64
	dequeueTime time.Duration
	cmds        map[string]int64    // server commands by name (INFO commandstats)
	trips       int64               // client round trips
	calls       map[string]callStat // client round trips by label, with -v
	server      map[string]callStat // server execution time (slow log), with -v
	// mem is the Redis memory the phase's finished runs keep (Cairn
	// phases; the last phase's when summed).
	mem *runMemory
}

func (r *result) add(o result) {
	r.units += o.units
	r.elapsed += o.elapsed
	r.redisCPU += o.redisCPU
	r.redisSys += o.redisSys
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
	if o.mem != nil {
		r.mem = o.mem
	}
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

// meter measures a phase while its clock runs.
type meter struct {
	start       time.Time
	redis0, go0 time.Duration
	sys0        time.Duration
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
	u0, s0, err := ctl.cpuSplit(ctx)
	if err != nil {
		b.Fatal(err)
	}
	hook.reset()
	return &meter{ctl: ctl, hook: hook, redis0: u0 + s0, sys0: s0, go0: processCPU(), start: time.Now()}
}

// stop stops the clock, the CPU meters and the dequeue timer into r.
func (m *meter) stop(b *testing.B, r *result) {
	b.Helper()
	r.elapsed = time.Since(m.start)
	r.goCPU = processCPU() - m.go0
	r.dequeues = m.hook.dequeues.Load()
	r.dequeueTime = time.Duration(m.hook.dequeueTime.Load())
	u1, s1, err := m.ctl.cpuSplit(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	r.redisCPU = u1 + s1 - m.redis0
	r.redisSys = s1 - m.sys0
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
	return newWorkloadAt(b, srv.Addr(), queue, labels)
}

func newWorkloadAt(b *testing.B, addr, queue string, labels *scriptLabels) (*redis.Client, *tripCounter) {
	b.Helper()
	hook := newTripCounter(testing.Verbose(), labels.forQueue(queue))
	rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
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

// finishLine counts the chains (runs) seen done and closes warm when the
// first is, done when the last is.
type finishLine struct {
	n      atomic.Int64
	warmAt int64 // 0: no warm-up
	doneAt int64
	warm   chan struct{}
	done   chan struct{}
	// bad counts runs that ended otherwise than succeeded.
	bad atomic.Int64
}

func newFinishLine(warmUp bool, chains int) *finishLine {
	f := &finishLine{doneAt: int64(chains), warm: make(chan struct{}), done: make(chan struct{})}
	if warmUp {
		f.warmAt = 1
		f.doneAt++
	}
	return f
}

func (f *finishLine) finished() {
	switch f.n.Add(1) {
	case f.warmAt:
		close(f.warm)
	case f.doneAt:
		close(f.done)
	}
}

// wait waits for ch (warm or done) at most phaseDeadline, or for a worker
// that stopped early (stopped, nil for none).
func (f *finishLine) wait(b *testing.B, what string, ch <-chan struct{}, stopped <-chan error) {
	b.Helper()
	deadline := time.NewTimer(phaseDeadline)
	defer deadline.Stop()
	select {
	case <-ch:
	case err := <-stopped:
		b.Fatalf("%s: a worker stopped early: %v", what, err)
	case <-deadline.C:
		b.Fatalf("%s: only %d of %d chains (runs) done in %s", what, f.n.Load(), f.doneAt, phaseDeadline)
	}
}

// runObserver tells a finishLine of the runs the engine finishes.
type runObserver struct {
	workflow.NopObserver
	line *finishLine
}

func (o runObserver) RunFinished(_ context.Context, _, _ string, status workflow.RunStatus, _ string) {
	if status != workflow.StatusSucceeded {
		o.line.bad.Add(1)
	}
	o.line.finished()
}

// runRaw processes cfg.chains chains of stepsPerChain no-op asynq tasks,
// each enqueueing the next of its chain.
func runRaw(b *testing.B, srv *redistest.Server, ctl *control, cfg phaseConfig, queue string, labels *scriptLabels) result {
	b.Helper()
	ctx := context.Background()
	rdb, hook := newWorkload(b, srv, queue, labels)
	defer func() { _ = rdb.Close() }()
	client := asynq.NewClientFromRedisClient(rdb)

	line := newFinishLine(cfg.clock == endToEnd, cfg.chains)
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
			return nil
		}
		line.finished()
		return nil
	})
	enqueueHeads := func(label string) {
		if err := parallel(label, cfg.chains, starters, func(i int) error {
			_, err := client.EnqueueContext(ctx, chainTask(i, 0), asynq.Queue(queue))
			return err
		}); err != nil {
			b.Fatalf("raw asynq: enqueue chain heads: %v", err)
		}
	}

	servers := make([]*asynq.Server, cfg.servers)
	for i := range servers {
		servers[i] = asynq.NewServerFromRedisClient(rdb, cfg.serverConfig(queue, i))
	}
	startServers := func() {
		// The servers' goroutines inherit the label, for -cpuprofile.
		pprof.Do(ctx, pprof.Labels("phase", "raw"), func(context.Context) {
			for _, s := range servers {
				if err := s.Start(mux); err != nil {
					b.Fatalf("raw asynq: start server: %v", err)
				}
			}
		})
	}
	shutdown := func() {
		for _, s := range servers {
			s.Shutdown() // a no-op on a server that is not running
		}
	}
	defer shutdown()

	var m *meter
	if cfg.clock == endToEnd {
		startServers()
		if _, err := client.EnqueueContext(ctx, chainTask(-1, 0), asynq.Queue(queue)); err != nil {
			b.Fatalf("raw asynq: enqueue the warm-up chain: %v", err)
		}
		line.wait(b, "raw asynq: warm-up", line.warm, nil)
		m = startMeter(b, ctl, hook)
		enqueueHeads("raw-start")
	} else {
		enqueueHeads("raw-setup")
		m = startMeter(b, ctl, hook)
		startServers()
	}
	line.wait(b, "raw asynq", line.done, nil)
	r := result{units: int64(cfg.chains * stepsPerChain)}
	m.stop(b, &r)
	// The acknowledgements of the last tasks and the servers' shutdown
	// are part of the command count, not of the time.
	shutdown()
	m.finish(b, &r)
	return r
}

// benchDefinition is the benchmark's workflow: stepsPerChain no-op steps.
func benchDefinition() workflow.Definition {
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	def := workflow.Definition{Name: workflowName}
	for i := range stepsPerChain {
		def.Steps = append(def.Steps, workflow.Step{Name: fmt.Sprintf("s%d", i+1), Run: noop})
	}
	return def
}

// runCairn processes cfg.chains runs of a workflow of stepsPerChain no-op
// steps, as variant v modifies it, on cfg.servers workflow.Workers, and
// measures the memory the finished runs keep.
func runCairn(b *testing.B, srv *redistest.Server, ctl *control, cfg phaseConfig, v cairnVariant, queue string, labels *scriptLabels) result {
	b.Helper()
	ctx := context.Background()
	rdb, hook := newWorkload(b, srv, queue, labels)
	defer func() { _ = rdb.Close() }()
	log := slog.New(slog.DiscardHandler)

	line := newFinishLine(cfg.clock == endToEnd, cfg.chains)
	def := benchDefinition()
	if v.modify != nil {
		v.modify(&def)
	}
	workers := make([]*workflow.Worker, cfg.servers)
	for i := range workers {
		w, err := workflow.NewWorker(rdb, workflow.WorkerConfig{
			EngineConfig:             workflow.EngineConfig{Queue: queue, Logger: log, Observer: runObserver{line: line}},
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
	startRuns := func(label string) {
		if err := parallel(label, cfg.chains, starters, func(int) error {
			_, err := client.Start(ctx, workflowName, nil, nil)
			return err
		}); err != nil {
			b.Fatalf("cairn: start runs: %v", err)
		}
	}

	mem0, err := ctl.usedMemory(ctx)
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	runDone := make(chan error, len(workers))
	running := 0
	startWorkers := func() {
		// The workers' goroutines inherit the label, for -cpuprofile.
		pprof.Do(ctx, pprof.Labels("phase", "cairn"), func(context.Context) {
			for _, w := range workers {
				running++
				go func() { runDone <- w.Run(runCtx) }()
			}
		})
	}
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

	var m *meter
	if cfg.clock == endToEnd {
		startWorkers()
		if _, err := client.Start(ctx, workflowName, nil, nil); err != nil {
			b.Fatalf("cairn: start the warm-up run: %v", err)
		}
		line.wait(b, "cairn: warm-up", line.warm, runDone)
		m = startMeter(b, ctl, hook)
		startRuns("cairn-start")
	} else {
		startRuns("cairn-setup")
		m = startMeter(b, ctl, hook)
		startWorkers()
	}
	line.wait(b, "cairn "+v.name, line.done, runDone)
	r := result{units: int64(cfg.chains * stepsPerChain)}
	m.stop(b, &r)
	stop()
	m.finish(b, &r)
	if n := line.bad.Load(); n > 0 {
		b.Fatalf("cairn %s: %d runs did not succeed", v.name, n)
	}
	if !cfg.noMemory {
		if r.mem, err = measureRunMemory(ctx, ctl, queue, int(line.doneAt), mem0); err != nil {
			b.Fatal(err)
		}
	}
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
