package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/workflow"
)

// BenchmarkScale measures how Cairn scales out with worker processes and
// with Redis Cluster shards (make bench-scale). It runs the worker binary
// (the demo workflow: 3 steps that do almost nothing) as child processes and
// starts CAIRN_BENCH_SCALE_RUNS runs per queue (default 2000) from this
// process, 8 at a time, timing from the first start to the last run's end:
//
//   - one Redis, 1, 2 and 4 worker processes on one queue;
//   - a 3-master Redis Cluster: one queue (one master busy, 1 worker), then
//     three queues whose hash tags land on the three masters (1 worker
//     each, 3 in all).
//
// For each it reports steps/s, the CPU time per step of the workers and of
// Redis (every node), and Redis commands per step, by node: on a 2-core
// machine the absolute figures say little (the workers and Redis share the
// cores), but the cost per step and its spread over shards do.
func BenchmarkScale(b *testing.B) {
	runs := envInt(b, "CAIRN_BENCH_SCALE_RUNS", 2000)
	bin := proctest.Build(b, "github.com/cairnhq/cairn/cmd/worker")
	var rows []scaleRow

	single := redistest.Start(b, &redistest.Options{AppendOnly: true,
		Args: []string{"--maxmemory-policy", "noeviction"}})
	sc := single.Client(b)
	for _, n := range []int{1, 2, 4} {
		q := "scale_w" + strconv.Itoa(n)
		rows = append(rows, scalePhase(b, bin, scaleSetup{
			label: fmt.Sprintf("1 Redis, %d worker(s), 1 queue", n), url: single.URL(), rdb: sc,
			queues: []string{q}, workersPerQueue: n, runs: runs,
			nodes: []*redistest.Server{single}, nodeClients: []*redis.Client{sc}}))
	}

	cl := redistest.StartCluster(b, &redistest.ClusterOptions{Masters: 3, AppendOnly: true,
		Args: []string{"--maxmemory-policy", "noeviction"}})
	cl.WaitHealthy(b)
	cc := cl.Client(b)
	var nodeClients []*redis.Client
	for _, n := range cl.Masters {
		nodeClients = append(nodeClients, n.Client(b))
	}
	queues := cl.QueuesOnDistinctMasters("scale_c")
	rows = append(rows, scalePhase(b, bin, scaleSetup{
		label: "cluster of 3, 1 queue, 1 worker", url: cl.URL(), rdb: cc, queues: queues[:1],
		workersPerQueue: 1, runs: runs, nodes: cl.Masters, nodeClients: nodeClients}))
	rows = append(rows, scalePhase(b, bin, scaleSetup{
		label: "cluster of 3, 3 queues, 3 workers", url: cl.URL(), rdb: cc, queues: queues,
		workersPerQueue: 1, runs: runs, nodes: cl.Masters, nodeClients: nodeClients}))

	printScale(rows, runs)
	b.ReportMetric(0, "ns/op")
	for _, r := range rows {
		if strings.HasPrefix(r.label, "1 Redis, 1 worker") {
			b.ReportMetric(r.stepsPerSec, "steps/s_1worker")
			b.ReportMetric(r.workerCPU+r.redisCPU, "cpu_us/step_1worker")
		}
	}
}

type scaleSetup struct {
	label           string
	url             string
	rdb             redis.UniversalClient
	queues          []string
	workersPerQueue int
	runs            int // per queue
	// nodes are the Redis servers (a cluster's masters), with a client of
	// each: their CPU and commands are counted per node.
	nodes       []*redistest.Server
	nodeClients []*redis.Client
}

type scaleRow struct {
	label       string
	workers     int
	steps       int
	elapsed     time.Duration
	stepsPerSec float64
	// CPU time per step, µs: of the worker processes, of Redis (all nodes).
	workerCPU, redisCPU float64
	// commands per step, by node (server side, INFO commandstats), and each
	// node's share of Redis's CPU time.
	cmdsPerStep []float64
	cpuShare    []float64
}

// scalePhase runs one setup: its workers, its runs, its counters.
func scalePhase(b *testing.B, bin string, s scaleSetup) scaleRow {
	b.Helper()
	ctx := context.Background()
	var procs []*proctest.Proc
	for _, q := range s.queues {
		for range s.workersPerQueue {
			p := proctest.Start(b, bin, []string{"CAIRN_REDIS_URL=" + s.url, "CAIRN_QUEUE=" + q,
				"CAIRN_LOG_LEVEL=info", "CAIRN_CONCURRENCY=10", "CAIRN_SHUTDOWN_TIMEOUT=5s", "CAIRN_DEMO=true"})
			procs = append(procs, p)
		}
	}
	for _, p := range procs {
		p.WaitForOutput(b, "worker started", time.Minute)
	}
	quiet := slog.New(slog.DiscardHandler)
	clients := make([]*workflow.Client, len(s.queues))
	for i, q := range s.queues {
		clients[i] = workflow.NewClient(s.rdb, workflow.ClientConfig{Queue: q, Logger: quiet})
	}

	cpu0 := procsCPU(b, procs)
	rcpu0, cmds0 := nodesStats(b, s.nodeClients)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for i := range s.queues {
		next := make(chan int)
		for range 8 {
			wg.Go(func() {
				for range next {
					if _, err := clients[i].Start(ctx, demo.Name, nil, nil); err != nil {
						select {
						case errs <- err:
						default:
						}
					}
				}
			})
		}
		wg.Go(func() {
			defer close(next)
			for k := range s.runs {
				next <- k
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatalf("%s: start: %v", s.label, err)
	default:
	}
	for i := range s.queues {
		for {
			c, err := clients[i].Counts(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if c[string(workflow.StatusSucceeded)] >= int64(s.runs) {
				break
			}
			if bad := c[string(workflow.StatusFailed)] + c[string(workflow.StatusCancelled)]; bad > 0 {
				b.Fatalf("%s: %d runs did not succeed", s.label, bad)
			}
			if time.Since(start) > 5*time.Minute {
				b.Fatalf("%s: runs not done after 5m: %v", s.label, c)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	elapsed := time.Since(start)
	cpu1 := procsCPU(b, procs)
	rcpu1, cmds1 := nodesStats(b, s.nodeClients)
	for _, p := range procs {
		p.Signal(b, syscall.SIGTERM)
	}
	for _, p := range procs {
		if code := p.Wait(b, 30*time.Second); code != 0 {
			b.Errorf("%s: a worker exited %d", s.label, code)
		}
	}

	steps := 3 * s.runs * len(s.queues)
	row := scaleRow{label: s.label, workers: len(procs), steps: steps, elapsed: elapsed,
		stepsPerSec: float64(steps) / elapsed.Seconds(),
		workerCPU:   float64((cpu1 - cpu0).Microseconds()) / float64(steps)}
	var redisCPU time.Duration
	for i := range rcpu1 {
		redisCPU += rcpu1[i] - rcpu0[i]
	}
	row.redisCPU = float64(redisCPU.Microseconds()) / float64(steps)
	for i := range cmds1 {
		row.cmdsPerStep = append(row.cmdsPerStep, float64(cmds1[i]-cmds0[i])/float64(steps))
		row.cpuShare = append(row.cpuShare, float64(rcpu1[i]-rcpu0[i])/float64(max(redisCPU, 1)))
	}
	return row
}

// procsCPU is the CPU time the processes used so far (user and system).
func procsCPU(b *testing.B, procs []*proctest.Proc) time.Duration {
	b.Helper()
	var total time.Duration
	for _, p := range procs {
		d, err := procCPU(p.PID())
		if err != nil {
			b.Fatal(err)
		}
		total += d
	}
	return total
}

// procCPU reads a process's user and system time from /proc/<pid>/stat
// (fields 14 and 15, in clock ticks of 1/100 s on Linux).
func procCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(raw)
	// The command name (field 2) is in parentheses and may hold spaces.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// nodesStats reads each node's CPU time (INFO cpu) and the commands it has
// run (INFO commandstats).
func nodesStats(b *testing.B, nodes []*redis.Client) ([]time.Duration, []int64) {
	b.Helper()
	cpu := make([]time.Duration, len(nodes))
	cmds := make([]int64, len(nodes))
	for i, n := range nodes {
		info, err := n.Info(context.Background(), "cpu", "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch {
			case k == "used_cpu_sys" || k == "used_cpu_user":
				f, _ := strconv.ParseFloat(v, 64)
				cpu[i] += time.Duration(f * float64(time.Second))
			case strings.HasPrefix(k, "cmdstat_"):
				calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
				c, _ := strconv.ParseInt(calls, 10, 64)
				cmds[i] += c
			}
		}
	}
	return cpu, cmds
}

func printScale(rows []scaleRow, runs int) {
	fmt.Printf("\nBenchmarkScale: %d runs of the 3-step demo workflow per queue, started 8 at a time; "+
		"CPU in µs per step\n", runs)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "setup\tworkers\tsteps\ttime\tsteps/s\tworker CPU/step\tRedis CPU/step\tcommands/step by node\tRedis CPU by node\t")
	for _, r := range rows {
		var by, share []string
		for i, c := range r.cmdsPerStep {
			by = append(by, strconv.FormatFloat(c, 'f', 1, 64))
			share = append(share, strconv.FormatFloat(100*r.cpuShare[i], 'f', 0, 64)+"%")
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%.0f\t%.0f\t%.0f\t%s\t%s\t\n", r.label, r.workers, r.steps,
			r.elapsed.Round(10*time.Millisecond), r.stepsPerSec, r.workerCPU, r.redisCPU, strings.Join(by, " / "),
			strings.Join(share, " / "))
	}
	_ = tw.Flush()
}
