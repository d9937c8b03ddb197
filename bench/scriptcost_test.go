package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// BenchmarkScriptInstructions counts the instructions redis-server executes
// for each begin and complete script of a step, under valgrind's callgrind.
// Unlike time, an instruction count does not depend on what else the
// machine is doing, so it tells whether a change to a script made it cheaper
// even on a noisy machine. It drives CAIRN_BENCH_COST_RUNS runs (default
// 200) of the 3-step workflow through retrystate's Begin and Complete
// directly, step by step, and reports the mean per call of each script at
// each step, and over all of them. (The figures include the EVALSHA
// command around the script, and reading the request: about 38,000
// instructions for an empty script.) Then it seeds as many scheduled
// retries whose tasks are missing (as BenchmarkReconcileRetries does) and
// reports the reconciler's check of one (Store.CheckTasks, pipelined): the
// check that repairs it, and the check of it healthy.
// With CAIRN_BENCH_CALLGRIND_DIR set, callgrind's dumps (one per measured
// script and step, named after it) are written there and kept, for
// callgrind_annotate.
func BenchmarkScriptInstructions(b *testing.B) {
	valgrind, err1 := exec.LookPath("valgrind")
	control, err2 := exec.LookPath("callgrind_control")
	if err1 != nil || err2 != nil {
		b.Fatal("valgrind is not installed; BenchmarkScriptInstructions counts Redis's instructions with it: apt-get install -y valgrind")
	}
	runs := envInt(b, "CAIRN_BENCH_COST_RUNS", 200)
	dir := b.TempDir()
	if keep := os.Getenv("CAIRN_BENCH_CALLGRIND_DIR"); keep != "" {
		// Keep the dumps, to read with callgrind_annotate.
		if err := os.MkdirAll(keep, 0o750); err != nil {
			b.Fatal(err)
		}
		dir = keep
	}
	srv := redistest.Start(b, &redistest.Options{
		Wrapper:      []string{valgrind, "--tool=callgrind", "--callgrind-out-file=" + filepath.Join(dir, "callgrind.out.%p")},
		ReadyTimeout: 2 * time.Minute,
	})
	pid := strconv.Itoa(srv.PID())
	rdb := srv.Client(b)
	ctx := context.Background()
	const queue = "cost"

	client := publishNoop(b, rdb, queue)
	store := retrystate.New(rdb, queue)

	// The first run goes through unmeasured: it loads the scripts.
	ids := make([]string, runs+1)
	for i := range ids {
		r, err := client.Start(ctx, workflowName, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = r.ID
	}
	step := func(ids []string, idx int, measure func(string, func())) {
		tokens := make([]string, len(ids))
		next := make([]*retrystate.Dispatch, len(ids))
		measure(fmt.Sprintf("begin s%d", idx+1), func() {
			for i, id := range ids {
				tokens[i] = fmt.Sprintf("token%d", i)
				bg, err := store.Begin(ctx, retrystate.BeginArgs{RunID: id, Index: idx, TaskID: tasks.ID(id, idx, 1, 0),
					Token: tokens[i], FenceTTL: 10 * time.Second, Retention: time.Hour, Now: time.Now()})
				if err != nil || bg.Outcome != retrystate.OutcomeOK {
					b.Fatalf("begin %s step %d: outcome %s, %v", id, idx, bg.Outcome, err)
				}
				next[i] = bg.Started.Next
			}
		})
		measure(fmt.Sprintf("complete s%d", idx+1), func() {
			for i, id := range ids {
				a := retrystate.CompleteArgs{RunID: id, Index: idx, Token: tokens[i], Output: "null",
					Retention: time.Hour, Now: time.Now()}
				if n := next[i]; n != nil {
					np := tasks.Step{RunID: id, Workflow: workflowName, Index: n.Index, Name: n.Name, Attempt: n.Attempt}
					a.NextTaskID, a.NextMessage = np.ID(), np.AsynqMessage(queue, n.Timeout)
				}
				c, err := store.Complete(ctx, a)
				if err != nil || c.Outcome == retrystate.OutcomeFenced {
					b.Fatalf("complete %s step %d: %+v, %v", id, idx, c, err)
				}
			}
		})
	}
	for idx := range stepsPerChain {
		step(ids[:1], idx, func(_ string, fn func()) { fn() })
	}

	callgrind := func(args ...string) {
		if out, err := exec.Command(control, append(args, pid)...).CombinedOutput(); err != nil {
			b.Fatalf("callgrind_control %v: %v\n%s", args, err, out)
		}
	}
	type row struct {
		label string
		instr int64
	}
	var rows []row
	measure := func(label string, fn func()) {
		callgrind("-z")
		fn()
		callgrind("-d", label)
		n, err := lastDumpTotal(dir)
		if err != nil {
			b.Fatal(err)
		}
		rows = append(rows, row{label, n / int64(runs)})
	}
	for idx := range stepsPerChain {
		step(ids[1:], idx, measure)
	}

	var begin, complete int64
	fmt.Printf("\n%s: instructions redis-server executes per script call (callgrind), %d runs of %d steps\n",
		b.Name(), runs, stepsPerChain)
	for _, r := range rows {
		fmt.Printf("  %-12s %9d\n", r.label, r.instr)
		if strings.HasPrefix(r.label, "begin") {
			begin += r.instr
		} else {
			complete += r.instr
		}
	}
	fmt.Printf("  %-12s %9d\n", "per run", begin+complete)

	// The reconciler's check of a scheduled retry (Store.CheckTasks,
	// pipelined): of one whose task is missing (it repairs it), then of the
	// same, healthy.
	retries := seedScheduledRetries(b, rdb, queue, runs+1)
	// The first goes through unmeasured: it loads the script.
	if _, err := store.CheckTasks(ctx, retries[:1], retrystate.CheckArgs{Grace: 10 * time.Second, MaxAuto: 3,
		Now: time.Now().Add(time.Minute)}); err != nil {
		b.Fatal(err)
	}
	retries = retries[1:]
	var checks []row
	for _, label := range []string{"check, repairs", "check, healthy"} {
		args := retrystate.CheckArgs{Grace: 10 * time.Second, MaxAuto: 3, Now: time.Now().Add(time.Minute)}
		rows = rows[:0]
		measure(label, func() {
			// Pipelines of 200, as the reconciler sends them: a longer one
			// could outlast the client's read timeout under valgrind.
			for lo := 0; lo < len(retries); lo += 200 {
				cs, err := store.CheckTasks(ctx, retries[lo:min(lo+200, len(retries))], args)
				if err != nil {
					b.Fatal(err)
				}
				for _, c := range cs {
					if c.Err != nil || (label == "check, repairs") != (c.Result.Outcome == retrystate.OutcomeDispatch) {
						b.Fatalf("%s %s: %+v", label, c.RunID, c)
					}
				}
			}
		})
		checks = append(checks, rows...)
	}
	for _, r := range checks {
		fmt.Printf("  %-14s %9d\n", r.label, r.instr)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(begin)/stepsPerChain, "instr/begin")
	b.ReportMetric(float64(complete)/stepsPerChain, "instr/complete")
	b.ReportMetric(float64(checks[0].instr), "instr/check-repair")
	b.ReportMetric(float64(checks[1].instr), "instr/check")
}

// lastDumpTotal returns the instruction total of callgrind's latest dump in
// dir (callgrind.out.<pid>.<n>, n counting dumps).
func lastDumpTotal(dir string) (int64, error) {
	files, err := filepath.Glob(filepath.Join(dir, "callgrind.out.*.*"))
	if err != nil {
		return 0, fmt.Errorf("no callgrind dump in %s: %w", dir, err)
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("no callgrind dump in %s", dir)
	}
	num := func(f string) int {
		n, _ := strconv.Atoi(f[strings.LastIndexByte(f, '.')+1:])
		return n
	}
	last := slices.MaxFunc(files, func(a, b string) int { return num(a) - num(b) })
	f, err := os.Open(last)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "summary:"); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no summary line", last)
}
