package e2e

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// The ordering suite's load: lines of runs (an ordering key's, or the
// limited workflow's), all started at once on one fleet, disjoint keys per
// variant.
const (
	ordKeys, ordRunsPerKey = 50, 20 // ordered: concurrency 1, block; no run fails for good
	c3Keys, c3RunsPerKey   = 10, 20 // ordered-c3: concurrency 3, block
	relKeys, relRunsPerKey = 10, 10 // ordered-release: runs relFail fail for good, the key goes on
	blkKeys, blkRunsPerKey = 4, 10  // ordered (block): run blkFail fails for good; recovered or cancelled
	limRuns                = 60     // limited: max_running 4, no key
	blkFail                = 3      // index of the run of a block key that fails for good

	ordWorkers, ordConcurrency = 4, 3
	ordFailRate                = 0.1 // injected transient failures per attempt
	ordSleepMS                 = 2   // each step body's run time
	// ordBudget is the attempts per step: with 10% transient failures, ten
	// in a row (which would fail a run for good) is a 1e-10 event.
	ordBudget = 10

	// ordStalledAfter is the reconciler's StalledAfter, which the worker
	// binary does not configure (ReconcilerConfig's default).
	ordStalledAfter = 8 * time.Second
	// ordFenceTTL, ordSweep and ordPass are the fleet's CAIRN_FENCE_TTL,
	// CAIRN_SWEEP_INTERVAL and CAIRN_RECONCILE_INTERVAL.
	ordFenceTTL = 2 * time.Second
	ordSweep    = 250 * time.Millisecond
	ordPass     = time.Second
	// Progress bounds. A line makes progress throughout: it never goes
	// longer than a bound without a journal event until its last run ends,
	// and no run waits longer than it for its first attempt once a slot is
	// free for it (see checkOrdering).
	//
	// ordQuietBound holds away from the kills. A run with a free slot is
	// admitted by the script that freed it, which writes its task: it waits
	// only for the queue, well under a second. The longest quiet gap in a
	// line is a retry: its task is scheduled in whole seconds (asynq), so
	// it is due up to 1s + 200ms (CAIRN_RETRY_MAX_INTERVAL) later and
	// forwarded within 200ms (CAIRN_DELAYED_TASK_CHECK_INTERVAL): 1.4s.
	//
	// What the bound must catch is a lost admission: its task is then
	// re-created by the reconciler only once the run has been idle for its
	// Grace (ordGrace, 10s), so such a line is quiet at least that long.
	// The bound is the Grace less one pass, the widest that still fails a
	// lost admission, leaving a loaded machine 9s for a 1.4s wait (at a
	// load of 30, 4.3s to 5.1s gaps were seen with no bug).
	ordQuietBound = ordGrace - ordPass
	// ordGrace is the reconciler's Grace, which the worker binary does not
	// configure (ReconcilerConfig's default).
	ordGrace = 10 * time.Second
	// ordKillBound holds when a SIGKILL came in the interval. The killed
	// worker may have held the run that would end, or the admitted run:
	// begun (its fence expires within FenceTTL, 2s, and the next sweep
	// redispatches it) or dequeued and not begun (the stalled-delivery
	// sweep redispatches it StalledAfter, 8s, after asynq's dequeue at the
	// latest). If the killed worker held the sweep lock (30s TTL), the next
	// pass sweeps instead (CAIRN_RECONCILE_INTERVAL, 1s): 8s + 1s.
	//
	// What it must catch is a repair that does not come: asynq's own
	// recovery of the killed worker's task then brings the run back once
	// its lease (tasks.AsynqLeaseDuration, 30s) has run out, so the line is
	// quiet 30s or more. Twice the 9s (with 16 busy loops, a line went
	// 12.6s with no bug) stays well below that.
	ordKillBound = 2 * (ordStalledAfter + ordPass)
)

// ordRun is one run of the ordering suite and what it should do.
type ordRun struct {
	variant, wf, line string // line: the ordering key, or "wf:limited"
	seq               int    // place in its line's start order
	in                demo.OrderedInput
	action            string // "recover" or "cancel": a block run that fails, then this
	wantStatus        workflow.RunStatus
	id                string

	// Found while the suite runs (block runs) and read at the end.
	actedAt time.Time
	run     *workflow.Run
	evs     []workflow.Event
}

// ordLine is a line of runs that start in start order, at most conc at once.
type ordLine struct {
	name, variant string
	conc          int
	runs          []*ordRun
}

// TestOrdering is the process-level test of ordering keys and max_running
// (issue 12): one fleet of 4 worker processes of concurrency 3 runs, all at
// once, 50 keys × 20 runs of a 3-step workflow with concurrency 1; 10 keys
// × 20 of concurrency 3; 10 keys × 10 with on_failure release, two runs of
// each failing for good; 4 keys × 10 with on_failure block, one run of each
// failing for good, then recovered (2 keys) or cancelled (2 keys); and 60
// runs of a workflow with max_running 4. About 10% of attempts fail
// transiently. Two of the workers are killed with SIGKILL once each, after
// a third and after two thirds of the expected step executions; the first
// is restarted, the second is not.
//
// From the journals (and the step bodies' audit, with nanosecond times):
// in every line runs started in start order and never more than its
// concurrency were active at once (from first attempt to end); every line
// made progress throughout: no gap between its journal events, nor a run's
// wait for its first attempt once a slot was free for it, longer than
// ordQuietBound (ordKillBound when a kill came in between); a blocked key held its next run
// until its failed run was recovered to success or cancelled, then went
// on; every run ended as designed.
func TestOrdering(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true})
	bin := proctest.Build(t, workerPkg)
	const queue = "ordering"
	env := workerEnv(srv, queue,
		"CAIRN_DEMO_CHAOS=true", "CAIRN_LOG_LEVEL=info", fmt.Sprint("CAIRN_CONCURRENCY=", ordConcurrency),
		fmt.Sprint("CAIRN_RETRY_MAX_ATTEMPTS=", ordBudget), "CAIRN_RETRY_INITIAL_INTERVAL=20ms",
		"CAIRN_RETRY_MAX_INTERVAL=200ms", "CAIRN_RETRY_JITTER=full",
		"CAIRN_FENCE_TTL="+ordFenceTTL.String(), "CAIRN_SWEEP_INTERVAL="+ordSweep.String(),
		"CAIRN_RECONCILE_INTERVAL="+ordPass.String(), "CAIRN_MAX_CRASHES=10", "CAIRN_MAX_AUTO_RECOVERIES=10",
		"CAIRN_SHUTDOWN_TIMEOUT=2s")
	procs := make([]*proctest.Proc, ordWorkers)
	for i := range procs {
		procs[i] = proctest.Start(t, bin, env)
	}
	for _, p := range procs {
		p.WaitForOutput(t, "worker started", 60*time.Second)
	}
	rdb := srv.Client(t)
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: slog.New(slog.DiscardHandler)})

	lines := ordLines()
	var all []*ordRun
	for _, l := range lines {
		all = append(all, l.runs...)
	}

	// Start every line's runs in order, lines in parallel.
	start := time.Now()
	if err := startLines(client, lines); err != nil {
		t.Fatal(err)
	}
	started := time.Since(start)

	// Faults and operator actions, from this goroutine only, until every
	// run has ended. The kills come when the audit holds a third and
	// two thirds of the step executions expected (two records each, with
	// about ordFailRate more for retries).
	expected := int64(float64(len(all)*len(demo.OrderedSteps)*2) * (1 + ordFailRate))
	killAt := []int64{expected / 3, expected * 2 / 3}
	killedAt := map[int]time.Time{} // pid -> just before its SIGKILL
	kills := 0
	var blocking []*ordRun
	for _, r := range all {
		if r.action != "" {
			blocking = append(blocking, r)
		}
	}
	byID := make(map[string]*ordRun, len(all))
	for _, r := range all {
		byID[r.id] = r
	}
	timeout := 3 * time.Minute
	testkit.Eventually(t, timeout, "every run to end", func() bool {
		if kills < len(killAt) {
			n, err := rdb.LLen(ctxb, demo.AuditKey(queue)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n >= killAt[kills] {
				p := procs[kills]
				killedAt[p.PID()] = time.Now()
				p.Kill(t)
				t.Logf("killed worker %d (pid %d) with SIGKILL at %d audit records, %s in", kills, p.PID(), n,
					time.Since(start).Round(time.Millisecond))
				if kills == 0 {
					procs[kills] = startWorker(t, bin, env)
				}
				kills++
			}
		}
		for _, r := range blocking {
			if r.actedAt.IsZero() {
				actOnBlocked(t, client, lines, r)
			}
		}
		counts, err := client.Counts(ctxb)
		if err != nil {
			t.Fatal(err)
		}
		ended := counts[string(workflow.StatusSucceeded)] + counts[string(workflow.StatusFailed)] +
			counts[string(workflow.StatusCancelled)]
		for _, r := range blocking {
			if r.actedAt.IsZero() {
				return false
			}
		}
		return ended == int64(len(all)) && kills == len(killAt)
	})
	elapsed := time.Since(start)

	// Everything the checks need, read from Redis.
	for _, r := range all {
		var err error
		if r.run, err = client.Get(ctxb, r.id); err != nil {
			t.Fatalf("run %s: %v", r.id, err)
		}
		if r.evs, err = client.Events(ctxb, r.id); err != nil {
			t.Fatalf("run %s: %v", r.id, err)
		}
	}
	raw, err := rdb.LRange(ctxb, demo.AuditKey(queue), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	audit := make([]demo.AuditEntry, 0, len(raw))
	seen := map[string]bool{}
	for _, s := range raw {
		// A record whose push's reply was lost is written again, the same
		// record (TestChaos): identical entries are one.
		if seen[s] {
			continue
		}
		seen[s] = true
		a, err := demo.ParseAudit(s)
		if err != nil {
			t.Fatal(err)
		}
		if byID[a.RunID] == nil {
			t.Fatalf("audit record of an unknown run: %q", s)
		}
		audit = append(audit, a)
	}

	c := checkOrdering(lines, audit, killedAt)
	c.kills, c.elapsed, c.startedIn, c.runs = kills, elapsed, started, len(all)
	table := c.table()
	t.Log("\n" + table)
	for _, v := range c.violations {
		t.Error(v)
	}
	if kills != 2 {
		t.Errorf("%d workers killed; want 2", kills)
	}
}

// ordLines builds the suite's lines, each with its runs in start order.
func ordLines() []*ordLine {
	var lines []*ordLine
	keyed := func(variant, wf string, keys, runs, conc int, shape func(k, i int, r *ordRun)) {
		for k := range keys {
			l := &ordLine{name: fmt.Sprintf("%s-%02d", variant, k), variant: variant, conc: conc}
			for i := range runs {
				r := &ordRun{variant: variant, wf: wf, line: l.name, seq: i, wantStatus: workflow.StatusSucceeded,
					in: demo.OrderedInput{FailRate: ordFailRate, SleepMS: ordSleepMS}}
				if shape != nil {
					shape(k, i, r)
				}
				l.runs = append(l.runs, r)
			}
			lines = append(lines, l)
		}
	}
	keyed("c1", demo.OrderedName, ordKeys, ordRunsPerKey, 1, nil)
	keyed("c3", demo.Ordered3Name, c3Keys, c3RunsPerKey, demo.OrderedConcurrency, nil)
	keyed("release", demo.OrderedReleaseName, relKeys, relRunsPerKey, 1, func(k, i int, r *ordRun) {
		// Two runs of each key fail for good at a step that depends on the
		// key: the key goes on after each.
		if i == 2 || i == 6 {
			r.in.FailStep = demo.OrderedSteps[(k+i)%len(demo.OrderedSteps)]
			r.wantStatus = workflow.StatusFailed
		}
	})
	keyed("block", demo.OrderedName, blkKeys, blkRunsPerKey, 1, func(k, i int, r *ordRun) {
		if i == blkFail {
			r.in.FailStep = demo.OrderedSteps[k%len(demo.OrderedSteps)]
			r.action, r.wantStatus = "recover", workflow.StatusSucceeded
			if k >= blkKeys/2 {
				r.action, r.wantStatus = "cancel", workflow.StatusCancelled
			}
		}
	})
	l := &ordLine{name: "wf:" + demo.LimitedName, variant: "limited", conc: demo.LimitedMaxRunning}
	for i := range limRuns {
		l.runs = append(l.runs, &ordRun{variant: "limited", wf: demo.LimitedName, line: l.name, seq: i,
			wantStatus: workflow.StatusSucceeded, in: demo.OrderedInput{FailRate: ordFailRate, SleepMS: ordSleepMS}})
	}
	return append(lines, l)
}

// startLines starts the runs of every line in their order, several lines
// at once (each line from one goroutine, so its start order is ours).
func startLines(client *workflow.Client, lines []*ordLine) error {
	work := make(chan *ordLine)
	errs := make(chan error, len(lines))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for l := range work {
				for _, r := range l.runs {
					opts := &workflow.StartOptions{Owner: "ordering-suite"}
					if !strings.HasPrefix(l.name, "wf:") {
						opts.OrderingKey = l.name
					}
					run, err := client.Start(ctxb, r.wf, r.in, opts)
					if err != nil {
						errs <- fmt.Errorf("start %s #%d: %w", l.name, r.seq, err)
						break
					}
					r.id = run.ID
				}
			}
		})
	}
	for _, l := range lines {
		work <- l
	}
	close(work)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// actOnBlocked recovers or cancels r, a block key's run that fails for
// good, once it has failed, after checking that it blocks its key: it still
// holds it, and the next run waits first in line and has not started.
func actOnBlocked(t *testing.T, client *workflow.Client, lines []*ordLine, r *ordRun) {
	t.Helper()
	cur, err := client.Get(ctxb, r.id)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Status != workflow.StatusFailed {
		return
	}
	var next *ordRun
	for _, l := range lines {
		if l.name == r.line {
			next = l.runs[r.seq+1]
		}
	}
	kr, err := client.OrderingKey(ctxb, workflow.KeyLine{Key: r.line, Owner: "ordering-suite"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(kr.Active) != 1 || kr.Active[0].ID != r.id || len(kr.Waiting) == 0 || kr.Waiting[0].ID != next.id ||
		kr.Waiting[0].WaitingFor == nil || kr.Waiting[0].WaitingFor.Position != 1 {
		t.Errorf("key %s with its run %s failed (on_failure block): active %v, waiting %v; want the failed run active "+
			"and %s waiting first", r.line, r.id, runIDs(kr.Active), runIDs(kr.Waiting), next.id)
	}
	nr, err := client.Get(ctxb, next.id)
	if err != nil {
		t.Fatal(err)
	}
	if nr.Status != workflow.StatusPending || nr.WaitingFor == nil || nr.WaitingFor.OrderingKey != r.line {
		t.Errorf("key %s blocked: the next run %s is %s waiting for %+v", r.line, next.id, nr.Status, nr.WaitingFor)
	}
	r.actedAt = time.Now()
	switch r.action {
	case "recover":
		if _, err := client.Recover(ctxb, r.id, &workflow.ActionOptions{Actor: "ordering-suite"}); err != nil {
			t.Fatalf("recover %s: %v", r.id, err)
		}
	case "cancel":
		got, err := client.Cancel(ctxb, r.id, &workflow.ActionOptions{Actor: "ordering-suite"})
		if err != nil || got.Status != workflow.StatusCancelled {
			t.Fatalf("cancel of the failed, blocking run %s: %v, %+v", r.id, err, got)
		}
	}
}

func runIDs(runs []*workflow.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

type ordResult struct {
	runs, kills, waited, crashes, repairs, retries, executions int
	maxActive                                                  map[string]int // variant -> most runs of one line active at once
	// The longest waits with a free slot and gaps between a line's events,
	// away from the kills ([0]) and with a kill in between ([1]), and where.
	maxWait, maxGap     [2]time.Duration
	maxWaitAt, maxGapAt [2]string
	elapsed, startedIn  time.Duration
	violationList
}

func (c *ordResult) table() string {
	var b strings.Builder
	row := func(k string, v any) { fmt.Fprintf(&b, "| %-38s | %24v |\n", k, v) }
	fmt.Fprintf(&b, "| %-38s | %24s |\n|%s|%s|\n", "ordering suite", "", strings.Repeat("-", 40), strings.Repeat("-", 26))
	row("runs", c.runs)
	row("  that waited for a slot", c.waited)
	row("step-body executions", c.executions)
	row("retries scheduled", c.retries)
	row("crashes recorded", c.crashes)
	row("reconciler repairs", c.repairs)
	row("worker kills (SIGKILL)", c.kills)
	variants := make([]string, 0, len(c.maxActive))
	for v := range c.maxActive {
		variants = append(variants, v)
	}
	sort.Strings(variants)
	for _, v := range variants {
		row("most active at once: "+v, c.maxActive[v])
	}
	for i, what := range []string{fmt.Sprintf("no kill (bound %s)", ordQuietBound), fmt.Sprintf("kill (bound %s)", ordKillBound)} {
		row("longest wait, "+what, c.maxWait[i].Round(time.Millisecond))
		row("  where", c.maxWaitAt[i])
		row("longest line gap, "+what, c.maxGap[i].Round(time.Millisecond))
		row("  where", c.maxGapAt[i])
	}
	row("time to start every run", c.startedIn.Round(10*time.Millisecond))
	row("time to finish", c.elapsed.Round(100*time.Millisecond))
	row("invariant violations", len(c.violations))
	return b.String()
}

// ordSpan is when a run was active: from its first attempt to its end (and
// when it was admitted).
// execTime is when Redis ran the script that journaled ev: the time of its
// stream entry ID, from the server's clock, which orders scripts as they
// ran. ev.At is the clock of the caller, read before it sent the script: a
// client that read its clock first may run its script after a worker that
// read the clock later, so At cannot order two scripts of different
// processes. Events without an ID (the checker's own tests) use At.
func execTime(ev workflow.Event) time.Time {
	msPart, _, ok := strings.Cut(ev.ID, "-")
	if !ok {
		return ev.At
	}
	n, err := strconv.ParseInt(msPart, 10, 64)
	if err != nil {
		return ev.At
	}
	return time.UnixMilli(n)
}

type ordSpan struct {
	run                  *ordRun
	admitted, start, end time.Time
}

// maxOverlap returns the most spans active at once (an end and a start at
// the same instant do not overlap) and a moment it was reached.
func maxOverlap(spans []ordSpan) (int, time.Time) {
	type point struct {
		at    time.Time
		delta int
	}
	points := make([]point, 0, 2*len(spans))
	for _, s := range spans {
		points = append(points, point{s.start, 1}, point{s.end, -1})
	}
	sort.Slice(points, func(i, j int) bool {
		if !points[i].at.Equal(points[j].at) {
			return points[i].at.Before(points[j].at)
		}
		return points[i].delta < points[j].delta
	})
	n, most, at := 0, 0, time.Time{}
	for _, p := range points {
		n += p.delta
		if n > most {
			most, at = n, p.at
		}
	}
	return most, at
}

// checkOrdering checks the suite's invariants, per line, from the journals
// (millisecond times) and the step bodies' audit (nanosecond times).
func checkOrdering(lines []*ordLine, audit []demo.AuditEntry, killedAt map[int]time.Time) *ordResult {
	c := &ordResult{maxActive: map[string]int{}}
	kills := slices.Collect(maps.Values(killedAt))

	// The body executions of each run, from the audit: [start, end], where
	// an execution without an end was cut short by its worker's SIGKILL.
	type pk struct {
		run, step string
		attempt   int
		pid       int
	}
	open := map[pk][]time.Time{}
	bodies := map[string][]ordSpan{} // run -> executions
	for _, a := range audit {
		p := pk{a.RunID, a.Step, a.Attempt, a.PID}
		switch a.Phase {
		case "start":
			c.executions++
			open[p] = append(open[p], a.At)
		case "end":
			if st := open[p]; len(st) > 0 {
				bodies[a.RunID] = append(bodies[a.RunID], ordSpan{start: st[0], end: a.At})
				open[p] = st[1:]
			} else {
				c.violatef("run %s step %s attempt %d: a body ended that had not started (pid %d)", a.RunID, a.Step,
					a.Attempt, a.PID)
			}
		}
	}
	for p, starts := range open {
		for _, s := range starts {
			end, killed := killedAt[p.pid]
			if !killed {
				c.violatef("run %s step %s attempt %d: a body started at %s on pid %d, which was not killed, and never ended",
					p.run, p.step, p.attempt, s.Format("15:04:05.000000"), p.pid)
				end = s
			}
			bodies[p.run] = append(bodies[p.run], ordSpan{start: s, end: end})
		}
	}

	for _, l := range lines {
		var spans, bodySpans []ordSpan
		for _, r := range l.runs {
			checkOrdRun(c, r)
			var admitted, first, end time.Time
			waited := false
			for _, ev := range r.evs {
				switch ev.Type {
				case workflow.EventRunStarted:
					admitted = execTime(ev)
				case "run_admitted":
					if !waited {
						admitted, waited = execTime(ev), true // its first admission, after it waited
					}
				case workflow.EventAttemptStarted:
					if first.IsZero() {
						first = ev.At
					}
				case workflow.EventRunSucceeded, workflow.EventRunFailed, workflow.EventRunCancelled:
					end = ev.At // the last one: a block run failed, then recovered, ends later
				}
			}
			if admitted.IsZero() || first.IsZero() || end.IsZero() || !r.run.Terminal() {
				c.violatef("line %s run #%d %s: admitted %v, first attempt %v, end %v, status %s: want all and an ended run",
					l.name, r.seq, r.id, admitted, first, end, r.run.Status)
				continue
			}
			spans = append(spans, ordSpan{run: r, admitted: admitted, start: first, end: end})
			bs := bodies[r.id]
			if len(bs) == 0 {
				c.violatef("line %s run #%d %s: no body execution in the audit", l.name, r.seq, r.id)
				continue
			}
			b := ordSpan{run: r, start: bs[0].start, end: bs[0].end}
			for _, x := range bs[1:] {
				if x.start.Before(b.start) {
					b.start = x.start
				}
				if x.end.After(b.end) {
					b.end = x.end
				}
			}
			bodySpans = append(bodySpans, b)
		}
		if len(spans) != len(l.runs) {
			continue // reported above; the line checks need every run
		}

		// Start order: every line admits its runs in start order (a run
		// that did not wait was admitted when it was created); in a line
		// of concurrency 1, each run's first attempt comes no earlier than
		// the one before it (equal milliseconds allowed: the bodies'
		// nanosecond times order those). With a higher concurrency, runs
		// admitted together race for workers, so only admission is ordered.
		for i := 1; i < len(spans); i++ {
			if a, b := spans[i-1].admitted, spans[i].admitted; b.Before(a) {
				c.violatef("line %s: run #%d %s admitted at %s, before run #%d %s (admitted %s)", l.name, i,
					spans[i].run.id, ms(b), i-1, spans[i-1].run.id, ms(a))
			}
			if l.conc > 1 {
				continue
			}
			if spans[i].start.Before(spans[i-1].start) {
				c.violatef("line %s: run #%d %s started at %s, before run #%d %s (started %s)", l.name, i, spans[i].run.id,
					ms(spans[i].start), i-1, spans[i-1].run.id, ms(spans[i-1].start))
			}
			if b, a := bodySpans[i], bodySpans[i-1]; len(bodySpans) == len(spans) && b.start.Before(a.start) {
				c.violatef("line %s: run #%d's first body ran at %s, before run #%d's at %s", l.name, i,
					b.start.Format("15:04:05.000000"), i-1, a.start.Format("15:04:05.000000"))
			}
		}
		// Concurrency, in journal time and in the bodies' nanosecond time.
		most, at := maxOverlap(spans)
		c.maxActive[l.variant] = max(c.maxActive[l.variant], most)
		if most > l.conc {
			c.violatef("line %s: %d runs active at once at %s (from first attempt to end); concurrency %d", l.name,
				most, ms(at), l.conc)
		}
		if len(bodySpans) == len(spans) {
			if most, at := maxOverlap(bodySpans); most > l.conc {
				c.violatef("line %s: bodies of %d runs between first start and last end at once at %s; concurrency %d",
					l.name, most, at.Format("15:04:05.000000"), l.conc)
			}
		}
		if l.conc == 1 {
			for i := 1; i < len(spans); i++ {
				if spans[i].start.Before(spans[i-1].end) {
					c.violatef("line %s: run #%d %s started at %s, before run #%d %s ended at %s", l.name, i,
						spans[i].run.id, ms(spans[i].start), i-1, spans[i-1].run.id, ms(spans[i-1].end))
				}
			}
		}

		// Progress: run j may start once fewer than conc of the runs before
		// it are active, i.e. at the (j-conc+1)-th end among them; it must
		// have its first attempt within the bound of that (or of its
		// creation, whichever is later).
		ends := make([]time.Time, 0, len(spans))
		for j, s := range spans {
			free := s.run.run.CreatedAt
			if j >= l.conc {
				sorted := slices.SortedFunc(slices.Values(ends), func(a, b time.Time) int { return a.Compare(b) })
				if f := sorted[j-l.conc]; f.After(free) {
					free = f
				}
			}
			wait := s.start.Sub(free)
			k, bound := progressBound(kills, free, s.start)
			if wait > c.maxWait[k] {
				c.maxWait[k], c.maxWaitAt[k] = wait, fmt.Sprintf("%s #%d", l.name, j)
			}
			if wait > bound {
				c.violatef("line %s: run #%d %s had its first attempt %s after a slot was free for it (%s); bound %s",
					l.name, j, s.run.id, wait.Round(time.Millisecond), ms(free), bound)
			}
			ends = append(ends, s.end)
		}
		// ... and the line is never idle for longer than the bound, from
		// its first attempt to its last run's end, except while a block key
		// waits for the operator (from the failure to the action).
		var times []time.Time
		last := spans[0].run.run.CreatedAt
		var operator [][2]time.Time
		for _, s := range spans {
			last = maxTime(last, s.end)
			times = append(times, s.run.run.CreatedAt)
			var failed time.Time
			for _, ev := range s.run.evs {
				times = append(times, ev.At)
				switch {
				case s.run.action == "":
				case ev.Type == workflow.EventRunFailed && failed.IsZero():
					failed = ev.At
				case !failed.IsZero() && (ev.Type == workflow.EventRunRecovered || ev.Type == workflow.EventRunCancelled):
					operator = append(operator, [2]time.Time{failed, ev.At})
				}
			}
		}
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		// From the line's first attempt on: before it, a line waits for the
		// workers to start and for the runs created before its own, which
		// says nothing of how the line moves.
		firstStart := spans[0].start
		for _, sp := range spans {
			if sp.start.Before(firstStart) {
				firstStart = sp.start
			}
		}
		for len(times) > 0 && times[0].Before(firstStart) {
			times = times[1:]
		}
	gaps:
		for i := 1; i < len(times) && !times[i].After(last); i++ {
			for _, w := range operator {
				if !times[i-1].Before(w[0]) && times[i-1].Before(w[1]) {
					continue gaps
				}
			}
			gap := times[i].Sub(times[i-1])
			k, bound := progressBound(kills, times[i-1], times[i])
			if gap > c.maxGap[k] {
				c.maxGap[k], c.maxGapAt[k] = gap, fmt.Sprintf("%s at %s", l.name, ms(times[i-1]))
			}
			if gap > bound {
				c.violatef("line %s: no journal event from %s to %s (%s); bound %s", l.name, ms(times[i-1]), ms(times[i]),
					gap.Round(time.Millisecond), bound)
			}
		}

		// A block key's failed run held its next run until the operator's
		// action; the key then went on (the runs after it succeeded, checked
		// per run).
		for i, s := range spans {
			if s.run.action == "" || i+1 >= len(spans) {
				continue
			}
			var failed, acted time.Time
			for _, ev := range s.run.evs {
				switch {
				case ev.Type == workflow.EventRunFailed && failed.IsZero():
					failed = ev.At
				case ev.Type == workflow.EventRunRecovered && s.run.action == "recover",
					ev.Type == workflow.EventRunCancelled && s.run.action == "cancel":
					acted = ev.At
				}
			}
			next := spans[i+1]
			if failed.IsZero() || acted.IsZero() || next.start.Before(acted) || next.start.Before(s.end) {
				c.violatef("block key %s: run %s failed at %s, %s at %s, ended at %s; the next run %s started at %s",
					l.name, s.run.id, ms(failed), s.run.action, ms(acted), ms(s.end), next.run.id, ms(next.start))
			}
		}
	}
	return c
}

// checkOrdRun checks one run: it ended as designed, each step succeeded at
// most once, and counts what the table shows.
func checkOrdRun(c *ordResult, r *ordRun) {
	if r.run.Status != r.wantStatus {
		c.violatef("line %s run #%d %s: %s (%s: %s); want %s", r.line, r.seq, r.id, r.run.Status, r.run.FailureCode,
			r.run.FailureReason, r.wantStatus)
	}
	if r.wantStatus == workflow.StatusFailed && (r.run.FailureCode != workflow.CodePermanentError ||
		r.run.Step(r.in.FailStep).Status != workflow.StepFailed) {
		c.violatef("line %s run #%d %s failed with %s at %q; want %s at %s", r.line, r.seq, r.id, r.run.FailureCode,
			r.run.CurrentStep, workflow.CodePermanentError, r.in.FailStep)
	}
	succeeded := map[string]int{}
	waited := false
	for _, ev := range r.evs {
		switch ev.Type {
		case workflow.EventAttemptSucceeded:
			succeeded[ev.Step]++
		case workflow.EventAttemptCrashed:
			c.crashes++
		case workflow.EventRepair:
			c.repairs++
		case workflow.EventRetryScheduled:
			c.retries++
		case "run_waiting":
			waited = true
		}
	}
	if waited {
		c.waited++
	}
	for step, n := range succeeded {
		if n > 1 {
			c.violatef("run %s step %s succeeded %d times", r.id, step, n)
		}
	}
	if r.run.Status == workflow.StatusSucceeded && len(succeeded) != len(demo.OrderedSteps) {
		c.violatef("run %s succeeded with steps %v succeeded", r.id, succeeded)
	}
}

func ms(t time.Time) string { return t.Format("15:04:05.000") }

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// progressBound returns the bound on a wait from..to: ordKillBound (k 1)
// when a worker was killed in between or less than ordKillBound before,
// else ordQuietBound (k 0).
func progressBound(kills []time.Time, from, to time.Time) (k int, bound time.Duration) {
	// A kill's effects last up to ordKillBound after it: a run held by a
	// worker killed just before from (its fence not expired yet) moves
	// again only after from.
	for _, at := range kills {
		if !at.Before(from.Add(-ordKillBound)) && !at.After(to) {
			return 1, ordKillBound
		}
	}
	return 0, ordQuietBound
}

// TestOrderingBounds: the suite's progress bounds stay below what a broken
// repair would leave a line waiting for: the reconciler's Grace (a lost
// admission's task is re-created only then) and asynq's own recovery of a
// killed worker's task (its lease).
func TestOrderingBounds(t *testing.T) {
	t.Parallel()
	if ordQuietBound >= ordGrace {
		t.Errorf("quiet bound %s: want below the reconciler's Grace, %s", ordQuietBound, ordGrace)
	}
	if ordKillBound >= tasks.AsynqLeaseDuration {
		t.Errorf("kill bound %s: want below asynq's lease, %s", ordKillBound, tasks.AsynqLeaseDuration)
	}
}
