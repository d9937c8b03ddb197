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

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// BenchmarkScriptInstructions counts the instructions redis-server executes
// for each script of a run's step path, under valgrind's callgrind. Unlike
// time, an instruction count does not depend on what else the machine is
// doing, so it tells whether a change to a script made it cheaper even on a
// noisy machine. It starts CAIRN_BENCH_COST_RUNS runs (default 200) of the
// 3-step workflow with Client.Start (create.lua, which writes step 0's
// task), drives them through retrystate's Begin and Complete directly, step
// by step, and reports the mean per call of each script at each step, and
// their sum per run; then as many runs again as an inline workflow runs
// them (Definition.Inline: each complete but the last begins the next
// step, CompleteParams.InlineToken). (The figures include the EVALSHA command
// around the script, and reading the request: about 38,000 instructions for
// an empty script.) Then it seeds as many scheduled retries whose tasks are
// missing (as BenchmarkReconcileRetries does) and reports the reconciler's
// check of one (Store.CheckTasks, pipelined): the check that repairs it,
// and the check of it healthy. Last, for comparison, raw asynq's own work
// for a task (asynqTaskInstructions), and Cairn's per step with the asynq
// dequeue and done a strict step's task (an inline run's one task) costs.
// With CAIRN_BENCH_CALLGRIND_DIR set, callgrind's dumps (one per measured
// script and step, named after it) are written there and kept, for
// callgrind_annotate.
func BenchmarkScriptInstructions(b *testing.B) {
	runs := envInt(b, "CAIRN_BENCH_COST_RUNS", 200)
	cg := startCallgrind(b, os.Getenv("CAIRN_BENCH_CALLGRIND_DIR"))
	rdb := cg.rdb
	ctx := context.Background()
	const queue = "cost"

	client := publishNoop(b, rdb, queue)
	store := retrystate.New(rdb, queue)

	// The first run goes through unmeasured: it loads the scripts. The
	// others' creates are measured (below), as a step of the run.
	ids := make([]string, runs+1)
	start := func(ids []string) {
		for i := range ids {
			r, err := client.Start(ctx, workflowName, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			ids[i] = r.ID
		}
	}
	start(ids[:1])
	step := func(ids []string, idx int, measure func(string, func())) {
		tokens := make([]string, len(ids))
		next := make([]*retrystate.Dispatch, len(ids))
		measure(fmt.Sprintf("begin s%d", idx+1), func() {
			for i, id := range ids {
				tokens[i] = fmt.Sprintf("token%d", i)
				bg, err := store.Begin(ctx, retrystate.BeginParams{RunID: id, Index: idx, TaskID: tasks.ID(id, idx, 1, 0),
					Token: tokens[i], FenceTTL: 10 * time.Second, Retention: time.Hour, Now: time.Now()})
				if err != nil || bg.Outcome != retrystate.OutcomeOK {
					b.Fatalf("begin %s step %d: outcome %s, %v", id, idx, bg.Outcome, err)
				}
				next[i] = bg.Started.Next
			}
		})
		measure(fmt.Sprintf("complete s%d", idx+1), func() {
			for i, id := range ids {
				a := retrystate.CompleteParams{RunID: id, Index: idx, Token: tokens[i], Output: "null",
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
	// An inline run (Definition.Inline): each complete but the last
	// begins the next step itself (CompleteParams.InlineToken).
	inline := func(ids []string, measure func(string, func())) {
		token := func(i, idx int) string { return fmt.Sprintf("itoken%d.%d", i, idx) }
		measure("inline begin s1", func() {
			for i, id := range ids {
				bg, err := store.Begin(ctx, retrystate.BeginParams{RunID: id, Index: 0, TaskID: tasks.ID(id, 0, 1, 0),
					Token: token(i, 0), FenceTTL: 10 * time.Second, Retention: time.Hour, Now: time.Now()})
				if err != nil || bg.Outcome != retrystate.OutcomeOK {
					b.Fatalf("begin %s step 0: outcome %s, %v", id, bg.Outcome, err)
				}
			}
		})
		for idx := range stepsPerChain {
			label, want := fmt.Sprintf("inline complete s%d, begin s%d", idx+1, idx+2), retrystate.OutcomeInline
			if idx == stepsPerChain-1 {
				label, want = fmt.Sprintf("inline complete s%d", idx+1), retrystate.OutcomeRunSucceeded
			}
			measure(label, func() {
				for i, id := range ids {
					a := retrystate.CompleteParams{RunID: id, Index: idx, Token: token(i, idx), Output: "null",
						Retention: time.Hour, Now: time.Now(), FenceTTL: 10 * time.Second}
					if want == retrystate.OutcomeInline {
						a.InlineToken = token(i, idx+1)
					}
					if c, err := store.Complete(ctx, a); err != nil || c.Outcome != want {
						b.Fatalf("inline complete %s step %d: %+v, %v; want %s", id, idx, c, err, want)
					}
				}
			})
		}
	}
	for idx := range stepsPerChain {
		step(ids[:1], idx, func(_ string, fn func()) { fn() })
	}
	inlineIDs := make([]string, runs+1)
	start(inlineIDs)
	inline(inlineIDs[:1], func(_ string, fn func()) { fn() })

	var rows []row
	measure := func(label string, fn func()) {
		rows = append(rows, row{label, cg.count(label, fn) / int64(runs)})
	}
	measure("create", func() { start(ids[1:]) })
	for idx := range stepsPerChain {
		step(ids[1:], idx, measure)
	}
	strict := rows
	rows = nil
	inline(inlineIDs[1:], measure)

	var begin, complete, create, inlineRun int64
	fmt.Printf("\n%s: instructions redis-server executes per script call (callgrind), %d runs of %d steps\n",
		b.Name(), runs, stepsPerChain)
	for _, r := range strict {
		fmt.Printf("  %-12s %9d\n", r.label, r.instr)
		switch {
		case strings.HasPrefix(r.label, "begin"):
			begin += r.instr
		case r.label == "create":
			create = r.instr
		default:
			complete += r.instr
		}
	}
	fmt.Printf("  %-12s %9d\n", "per run", create+begin+complete)
	for _, r := range rows {
		fmt.Printf("  %-30s %9d\n", r.label, r.instr)
		inlineRun += r.instr
	}
	fmt.Printf("  %-30s %9d (with its create)\n", "per inline run", create+inlineRun)

	// The reconciler's check of a scheduled retry (Store.CheckTasks,
	// pipelined): of one whose task is missing (it repairs it), then of the
	// same, healthy.
	retries := seedScheduledRetries(b, rdb, queue, runs+1)
	// The first goes through unmeasured: it loads the script.
	if _, err := store.CheckTasks(ctx, retries[:1], retrystate.CheckParams{Grace: 10 * time.Second, MaxAuto: 3,
		Now: time.Now().Add(time.Minute)}); err != nil {
		b.Fatal(err)
	}
	retries = retries[1:]
	var checks []row
	for _, label := range []string{"check, repairs", "check, healthy"} {
		args := retrystate.CheckParams{Grace: 10 * time.Second, MaxAuto: 3, Now: time.Now().Add(time.Minute)}
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

	enqueue, dequeueDone := asynqTaskInstructions(b, rdb, runs, measure, &rows)
	task := enqueue + dequeueDone
	// A strict step is an asynq task: asynq's dequeue and done, with the
	// step's scripts; an inline run is one asynq task for its steps.
	strictStep := (create+begin+complete)/stepsPerChain + dequeueDone
	inlineStep := (create + inlineRun + dequeueDone) / stepsPerChain
	ownDequeueDone := ownDequeueInstructions(b, rdb, runs, measure, &rows)
	// On the worker's own dequeue, the checkpoint that ends a delivery also
	// acknowledges its task: measured as the worker runs them.
	ownStrictRun := ownRunInstructions(b, rdb, runs, false, measure, &rows)
	ownInlineRun := ownRunInstructions(b, rdb, runs, true, measure, &rows)
	ownStrict, ownInline := (create+ownStrictRun)/stepsPerChain, (create+ownInlineRun)/stepsPerChain
	fmt.Printf("  raw asynq (v0.26) per task: enqueue %d, dequeue and done %d, in all %d\n", enqueue, dequeueDone, task)
	fmt.Printf("  the worker's own dequeue (BLMOVE, take.lua) and done (done.lua) per task: %d\n", ownDequeueDone)
	fmt.Printf("  on the own dequeue, each task's done with its step's checkpoint: a run's tasks and scripts %d "+
		"strict, %d inline; a strict step %d, an inline step %d (with the create)\n", ownStrictRun, ownInlineRun,
		ownStrict, ownInline)
	b.ReportMetric(float64(ownDequeueDone), "instr/own-dequeue-done")
	b.ReportMetric(float64(ownStrict), "instr/strict-step-own-dequeue")
	b.ReportMetric(float64(ownInline), "instr/inline-step-own-dequeue")
	fmt.Printf("  Cairn per step, with asynq's dequeue and done of its task: strict %d (%.2f times a raw task), "+
		"inline %d (%.2f times)\n", strictStep, float64(strictStep)/float64(task), inlineStep,
		float64(inlineStep)/float64(task))
	b.ReportMetric(0, "ns/op")
	reportTarget(b, float64(create), "instr/create")
	b.ReportMetric(float64(create+inlineRun), "instr/inline-run")
	b.ReportMetric(float64(begin)/stepsPerChain, "instr/begin")
	b.ReportMetric(float64(complete)/stepsPerChain, "instr/complete")
	b.ReportMetric(float64(checks[0].instr), "instr/check-repair")
	b.ReportMetric(float64(checks[1].instr), "instr/check")
	b.ReportMetric(float64(task), "instr/asynq-task")
	reportTarget(b, float64(strictStep), "instr/strict-step")
	reportTarget(b, float64(inlineStep), "instr/inline-step")
}

// asynqTaskInstructions measures, with measure, raw asynq's own Redis work
// for a task: runs enqueues (Client.Enqueue), then the dequeue and done of
// as many tasks by a Server of concurrency 1. The second measure starts in
// the first task's handler and ends in the handler of task runs+1: with one
// worker, asynq marks a task done before it dequeues the next, so the span
// holds runs dones and runs dequeues (and the server's background work over
// that time: its heartbeat and forwarder, a few calls). It returns the mean
// of each per task (rows is measure's, emptied).
func asynqTaskInstructions(b *testing.B, rdb *redis.Client, runs int, measure func(string, func()),
	rows *[]row) (enqueue, dequeueDone int64) {
	b.Helper()
	const queue = "asynqcost"
	client := asynq.NewClientFromRedisClient(rdb)
	// The first goes through unmeasured: it loads the script.
	if _, err := client.Enqueue(asynq.NewTask(rawTaskType, nil), asynq.Queue(queue)); err != nil {
		b.Fatal(err)
	}
	*rows = (*rows)[:0]
	measure("asynq enqueue", func() {
		for range runs + 1 {
			if _, err := client.Enqueue(asynq.NewTask(rawTaskType, nil), asynq.Queue(queue)); err != nil {
				b.Fatal(err)
			}
		}
	})
	// measure divides by runs; runs+1 enqueues were made.
	enqueue = (*rows)[0].instr * int64(runs) / int64(runs+1)

	started, done := make(chan struct{}), make(chan struct{})
	var n int
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 1, Queues: map[string]int{queue: 1},
		Logger: nopLogger{}, LogLevel: asynq.ErrorLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc(rawTaskType, func(context.Context, *asynq.Task) error {
		n++
		switch n {
		case 2: // the first of the measured: its dequeue was not
			started <- struct{}{}
			<-started
		case runs + 2:
			close(done)
		}
		return nil
	})
	if err := srv.Start(mux); err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	*rows = (*rows)[:0]
	<-started
	measure("asynq dequeue and done", func() {
		started <- struct{}{}
		<-done
	})
	return enqueue, (*rows)[0].instr
}

// ownDequeueInstructions measures, with measure, the Redis work of the
// worker's own dequeue and done of a task (tasks.Dequeuer: Claim's BLMOVE,
// Take's take.lua, Done's done.lua), per task, over runs tasks asynq's
// client enqueued (rows is measure's, emptied).
func ownDequeueInstructions(b *testing.B, rdb *redis.Client, runs int, measure func(string, func()),
	rows *[]row) int64 {
	b.Helper()
	const queue = "owncost"
	ctx := context.Background()
	client := asynq.NewClientFromRedisClient(rdb)
	dq := tasks.NewDequeuer(rdb, queue, "cost")
	take := func() {
		id, err := dq.Claim(ctx, time.Second)
		if err != nil || id == "" {
			b.Fatalf("claim: %q, %v", id, err)
		}
		m, out, err := dq.Take(ctx, id, time.Now())
		if err != nil || out != tasks.Taken {
			b.Fatalf("take %s: %v, %v", id, out, err)
		}
		if err := dq.Done(ctx, m, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	for range runs + 1 {
		if _, err := client.Enqueue(asynq.NewTask(rawTaskType, nil), asynq.Queue(queue)); err != nil {
			b.Fatal(err)
		}
	}
	take() // the first goes through unmeasured: it loads the scripts
	*rows = (*rows)[:0]
	measure("own dequeue and done", func() {
		for range runs {
			take()
		}
	})
	return (*rows)[0].instr
}

// benchWorker is the worker identity ownRunInstructions journals with each
// attempt, as long as the engine's (host:pid:random).
const benchWorker = "worker-7f9c2d:12345:0a1b2c3d4e5f"

// ownRunInstructions measures, with measure, a run's Redis work (but its
// create) as a worker on Cairn's own dequeue does it (internal/engine's
// processor): each task claimed and taken (tasks.Dequeuer), its step begun,
// and completed with the task's acknowledgement (CompleteParams.Ack, done
// with the checkpoint), each attempt journaled with its worker's identity
// as the engine does; inline, each complete but the last begins the next
// step, and only the run's first task is taken. It returns the mean per
// run (rows is measure's, emptied).
func ownRunInstructions(b *testing.B, rdb *redis.Client, runs int, inline bool, measure func(string, func()),
	rows *[]row) int64 {
	b.Helper()
	queue, label := "ownstrict", "own dequeue, strict run"
	if inline {
		queue, label = "owninline", "own dequeue, inline run"
	}
	ctx := context.Background()
	client := publishNoop(b, rdb, queue)
	store := retrystate.New(rdb, queue)
	dq := tasks.NewDequeuer(rdb, queue, "cost")
	for range runs + 1 {
		if _, err := client.Start(ctx, workflowName, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	// task runs the delivery of one claimed task: its step, and, inline,
	// the steps after it.
	task := func() {
		id, err := dq.Claim(ctx, time.Second)
		if err != nil || id == "" {
			b.Fatalf("claim: %q, %v", id, err)
		}
		m, out, err := dq.Take(ctx, id, time.Now())
		if err != nil || out != tasks.Taken {
			b.Fatalf("take %s: %v, %v", id, out, err)
		}
		p, err := tasks.Decode(m.Payload)
		if err != nil {
			b.Fatal(err)
		}
		token := m.ID
		bg, err := store.Begin(ctx, retrystate.BeginParams{RunID: p.RunID, Index: p.Index, TaskID: m.ID, Token: token,
			FenceTTL: 10 * time.Second, Retention: time.Hour, Now: time.Now(), Worker: benchWorker})
		if err != nil || bg.Outcome != retrystate.OutcomeOK {
			b.Fatalf("begin %s: outcome %s, %v", m.ID, bg.Outcome, err)
		}
		next := bg.Started.Next
		for idx := p.Index; ; idx++ {
			now := time.Now()
			a := retrystate.CompleteParams{RunID: p.RunID, Index: idx, Token: token, Output: "null",
				Retention: time.Hour, Now: now, FenceTTL: 10 * time.Second}
			if next != nil {
				np := tasks.Step{RunID: p.RunID, Workflow: workflowName, Index: next.Index, Name: next.Name,
					Attempt: next.Attempt}
				a.NextTaskID, a.NextMessage = np.ID(), np.AsynqMessage(queue, next.Timeout)
				if inline {
					a.InlineToken, a.Worker = fmt.Sprintf("%s.%d", m.ID, idx+1), benchWorker
				}
			}
			if a.InlineToken == "" { // as the engine: not with an inline begin
				ack := dq.DoneArgs(m, now)
				a.Ack = &ack
			}
			c, err := store.Complete(ctx, a)
			if err != nil {
				b.Fatal(err)
			}
			if c.Outcome != retrystate.OutcomeInline {
				if !c.Acked {
					b.Fatalf("complete %s step %d: %+v; want its task acknowledged", p.RunID, idx, c)
				}
				return
			}
			token, next = a.InlineToken, c.Started.Next
		}
	}
	perRun := stepsPerChain
	if inline {
		perRun = 1
	}
	// The first run's tasks go through unmeasured: they load the scripts.
	for range perRun {
		task()
	}
	*rows = (*rows)[:0]
	measure(label, func() {
		for range runs * perRun {
			task()
		}
	})
	return (*rows)[0].instr
}

// row is one measured figure of BenchmarkScriptInstructions: instructions
// per call.
type row struct {
	label string
	instr int64
}

// callgrindServer is a private redis-server run under valgrind's callgrind,
// whose instructions count measures.
type callgrindServer struct {
	b        *testing.B
	rdb      *redis.Client
	control  string // callgrind_control
	pid, dir string
}

// startCallgrind starts a callgrindServer; its dumps go to keep when it is
// not "" (and are kept, for callgrind_annotate), else to a temporary
// directory. It fails the benchmark, with the install command, when
// valgrind is missing.
func startCallgrind(b *testing.B, keep string) *callgrindServer {
	b.Helper()
	valgrind, err1 := exec.LookPath("valgrind")
	control, err2 := exec.LookPath("callgrind_control")
	if err1 != nil || err2 != nil {
		b.Fatalf("valgrind is not installed; %s counts Redis's instructions with it: apt-get install -y valgrind", b.Name())
	}
	dir := b.TempDir()
	if keep != "" {
		if err := os.MkdirAll(keep, 0o750); err != nil {
			b.Fatal(err)
		}
		dir = keep
	}
	srv := redistest.Start(b, &redistest.Options{
		Wrapper:      []string{valgrind, "--tool=callgrind", "--callgrind-out-file=" + filepath.Join(dir, "callgrind.out.%p")},
		ReadyTimeout: 2 * time.Minute,
	})
	// Under callgrind Redis runs some 50 times slower, and slower still on
	// a busy machine: a pipeline of 200 checks can take more than
	// go-redis's 3 s read timeout. The counts do not depend on the time.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 2 * time.Minute, WriteTimeout: 2 * time.Minute})
	b.Cleanup(func() { _ = rdb.Close() })
	return &callgrindServer{b: b, rdb: rdb, control: control, pid: strconv.Itoa(srv.PID()), dir: dir}
}

// count runs fn between a reset of callgrind's counters and a dump named
// label, and returns the instructions redis-server executed meanwhile.
func (c *callgrindServer) count(label string, fn func()) int64 {
	c.b.Helper()
	ctl := func(args ...string) {
		if out, err := exec.Command(c.control, append(args, c.pid)...).CombinedOutput(); err != nil {
			c.b.Fatalf("callgrind_control %v: %v\n%s", args, err, out)
		}
	}
	ctl("-z")
	fn()
	ctl("-d", label)
	n, err := lastDumpTotal(c.dir)
	if err != nil {
		c.b.Fatal(err)
	}
	return n
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
