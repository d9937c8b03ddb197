package e2e

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// chaosBudget is the chaos workers' max attempts per step.
const chaosBudget = 4

// TestChaos runs the chaos suite: three worker processes execute many runs
// of the five-step chaos workflow with about 20% injected transient
// failures (a quarter of the runs on its inline twin, demo.ChaosInline,
// whose steps run one after another in one task), and, for a quarter of the
// runs, of the saga workflow (demo.Saga:
// compensations, a circuit breaker, permanent failures, exhausted retries
// and compensations made to fail), while a random worker is killed with
// SIGKILL every few seconds and restarted, and redis-server is killed and
// restarted once. At the end it checks, from Redis, the journals, the
// notification stream and the step bodies' own audit trail, that nothing
// was lost and no invariant broke (checkChaos, checkSagas), and prints a
// table.
//
// make test runs a short version; make chaos runs CAIRN_CHAOS_RUNS=2000.
func TestChaos(t *testing.T) {
	testkit.SkipShort(t, needsChaos)
	t.Parallel()
	runs := 150
	if v := os.Getenv("CAIRN_CHAOS_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			t.Fatalf("CAIRN_CHAOS_RUNS=%q: want 1 to 100000", v)
		}
		runs = n
	}
	const workers, failRate = 3, 0.2
	timeout := 3*time.Minute + time.Duration(runs)*150*time.Millisecond
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))

	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	bin := proctest.Build(t, workerPkg)
	const queue = "chaos"
	env := workerEnv(srv, queue,
		"CAIRN_DEMO_CHAOS=true", "CAIRN_LOG_LEVEL=info",
		"CAIRN_RETRY_MAX_ATTEMPTS="+strconv.Itoa(chaosBudget), "CAIRN_RETRY_INITIAL_INTERVAL=100ms",
		"CAIRN_RETRY_MAX_INTERVAL=1s", "CAIRN_RETRY_JITTER=full",
		"CAIRN_FENCE_TTL=5s", "CAIRN_SWEEP_INTERVAL=500ms", "CAIRN_RECONCILE_INTERVAL=3s",
		"CAIRN_MAX_CRASHES=20", "CAIRN_MAX_AUTO_RECOVERIES=50", "CAIRN_SHUTDOWN_TIMEOUT=2s")
	procs := make([]*proctest.Proc, workers)
	for i := range procs {
		procs[i] = startWorker(t, bin, env)
	}
	rdb := srv.Client(t)
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: slog.New(slog.DiscardHandler)})

	// Runs are started at a steady pace (20 a second, over at least 20s) so
	// the faults land all along; each with an idempotency key, so a start
	// that failed during the Redis restart can be tried again safely.
	start := time.Now()
	spread := max(20*time.Second, time.Duration(runs)*50*time.Millisecond)
	ids := make(map[string]bool, runs)
	submitted := 0
	submit := func() {
		for submitted < runs && time.Since(start) >= spread*time.Duration(submitted)/time.Duration(runs) {
			var in any = demo.ChaosInput{FailRate: failRate, SleepMS: 20 + rng.IntN(180)}
			name := demo.ChaosName
			switch submitted % 4 {
			case 1:
				name = demo.ChaosInlineName // the same steps, run inline
			case 3:
				name, in = demo.SagaName, sagaInput(submitted/4, rng)
			}
			r, err := client.Start(ctxb, name, in, &workflow.StartOptions{IdempotencyKey: fmt.Sprint("chaos-", submitted)})
			if err != nil {
				return // Redis is restarting: try again on the next tick
			}
			ids[r.ID] = true
			submitted++
		}
	}

	// Chaos, from this goroutine only: kill a random worker every 1 to 3 s
	// and restart it; kill and restart Redis once, when 40% are done.
	killedAt := map[int]time.Time{} // pid -> when it was killed
	kills, redisRestarts := 0, 0
	nextKill := time.Now().Add(time.Second + time.Duration(rng.Int64N(int64(2*time.Second))))
	deadline := start.Add(timeout)
	for {
		submit()
		counts, err := client.Counts(ctxb)
		ended := int64(0)
		for _, st := range workflow.RunStatuses {
			if st.Terminal() {
				ended += counts[string(st)]
			}
		}
		if err == nil && submitted == runs && ended == int64(runs) {
			break
		}
		if redisRestarts == 0 && submitted >= runs*4/10 {
			srv.Kill(t)
			srv.Restart(t)
			redisRestarts++
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs not finished after %s: %v", timeout, counts)
		}
		if time.Now().After(nextKill) {
			i := rng.IntN(workers)
			pid := procs[i].PID()
			procs[i].Kill(t)
			killedAt[pid] = time.Now()
			kills++
			procs[i] = startWorker(t, bin, env)
			nextKill = time.Now().Add(time.Second + time.Duration(rng.Int64N(int64(2*time.Second))))
		}
		time.Sleep(100 * time.Millisecond) // pacing of the chaos loop, not synchronisation
	}
	elapsed := time.Since(start)
	for _, p := range procs {
		p.Kill(t)
		killedAt[p.PID()] = time.Now()
	}

	// Everything the checks need, read from Redis.
	all := map[string]*workflow.Run{}
	journals := map[string][]workflow.Event{}
	for id := range ids {
		r, err := client.Get(ctxb, id)
		if err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
		all[id] = r
		if journals[id], err = client.Events(ctxb, id); err != nil {
			t.Fatal(err)
		}
	}
	audit := readAudit(t, rdb, queue, "")

	c := checkChaos(all, journals, audit, killedAt, failRate)
	c.kills, c.redisRestarts, c.elapsed = kills, redisRestarts, elapsed
	c.checkSagas(readSagas(t, rdb, queue, all, journals, audit, killedAt))
	table := c.table()
	t.Log("\n" + table)
	fmt.Println(table)
	for _, n := range c.notes {
		t.Log(n)
	}
	for _, v := range c.violations {
		t.Error(v)
	}
	if c.lost != 0 {
		t.Errorf("%d runs lost", c.lost)
	}
	if kills == 0 || redisRestarts != 1 {
		t.Errorf("the suite did not inject its faults: %d kills, %d Redis restarts", kills, redisRestarts)
	}
	if c.inlineRuns == 0 || c.inlineBegun == 0 {
		t.Errorf("the inline runs ran nothing inline: %d runs, %d attempts begun inline", c.inlineRuns, c.inlineBegun)
	}
	if c.sagaCompensated == 0 || c.sagaCompFailed == 0 || c.compensations == 0 || c.breakerOpened == 0 {
		t.Errorf("the saga runs did not exercise their compensations and breaker: %d compensated, %d compensation_failed, %d compensations, %d breaker openings",
			c.sagaCompensated, c.sagaCompFailed, c.compensations, c.breakerOpened)
	}
}

// sagaInput is the input of the n-th saga run of the chaos suite:
// transient failures as the chaos runs' (more at charge, behind the
// breaker, so that it opens now and then), and, in turn, runs left to
// those alone, a step that fails permanently, one that exhausts its
// retries, and a compensation made to exhaust its own, so that every
// ending comes up even in the short suite. The breaker opens a few times
// (some 5 to 15 in the short suite, mostly after charge's compensation is
// made to fail: it must fail three times in a row with no other run's
// charge succeeding in between, so every eighth saga run makes it fail,
// which in the short suite is 4 or 5 chances; with 2, one run in a dozen
// or so saw no opening), and charge and its compensation are quick: a worker
// killed during the breaker's probe holds the breaker half-open until the
// probe's fence expires and the crash is found (which frees the probe),
// deferring every saga run at charge meanwhile, so the fewer probes, the
// rarer that is.
func sagaInput(n int, rng *rand.Rand) demo.SagaInput {
	in := demo.SagaInput{FailRate: 0.2, ChargeFailRate: 0.25, CompFailRate: 0.2, SleepMS: 20 + rng.IntN(180),
		ChargeSleepMS: rng.IntN(5)}
	pick := func(steps ...string) string { return steps[rng.IntN(len(steps))] }
	switch n % 8 {
	case 1, 5: // compensated (or, failing at reserve, nothing to undo)
		in.PermanentStep = pick(demo.SagaSteps...)
	case 2: // compensated after exhausted retries
		in.ExhaustStep = pick(demo.SagaQuote, demo.SagaCharge, demo.SagaShip)
	case 4: // compensation_failed at reserve's compensation
		in.PermanentStep, in.CompExhaustStep = pick(demo.SagaQuote, demo.SagaCharge, demo.SagaShip), demo.SagaReserve
	case 6: // compensation_failed at charge's, behind the breaker
		in.ExhaustStep, in.CompExhaustStep = demo.SagaShip, demo.SagaCharge
	case 7: // anything
		if rng.IntN(2) == 0 {
			in.PermanentStep = pick(demo.SagaSteps...)
		} else {
			in.ExhaustStep = pick(demo.SagaSteps...)
		}
		in.CompExhaustStep = pick("", demo.SagaReserve, demo.SagaCharge)
	}
	return in
}

// readSagas reads from Redis what checkSagas needs beyond the runs,
// journals and audit: the saga breaker's history (its breaker_opened and
// breaker_closed notifications) and totals.
func readSagas(t *testing.T, rdb *redis.Client, queue string, all map[string]*workflow.Run,
	journals map[string][]workflow.Event, audit []demo.AuditEntry, killedAt map[int]time.Time) sagaRuns {
	t.Helper()
	s := sagaRuns{runs: map[string]*workflow.Run{}, journals: map[string][]workflow.Event{}, audit: audit, killedAt: killedAt}
	for id, r := range all {
		if r.Workflow == demo.SagaName {
			s.runs[id], s.journals[id] = r, journals[id]
		}
	}
	prefix := "cairn:{" + queue + "}:"
	xs, err := rdb.XRange(ctxb, prefix+"notifications", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	// The stream keeps its last 100000 entries (NOTIFY_MAXLEN): it is
	// whole when shorter.
	s.complete = len(xs) < 90000
	for _, x := range xs {
		typ, _ := x.Values["type"].(string)
		if (typ != "breaker_opened" && typ != "breaker_closed") || x.Values["breaker"] != demo.SagaBreaker {
			continue
		}
		id, ok := parseStreamID(x.ID)
		at, err1 := strconv.ParseInt(fmt.Sprint(x.Values["at"]), 10, 64)
		if !ok || err1 != nil {
			t.Fatalf("notification %+v", x)
		}
		b := breakerEvent{id: id, opened: typ == "breaker_opened", at: time.UnixMilli(at)}
		if b.opened {
			until, err := strconv.ParseInt(fmt.Sprint(x.Values["open_until"]), 10, 64)
			if err != nil {
				t.Fatalf("notification %+v", x)
			}
			b.openUntil = time.UnixMilli(until)
		}
		s.breaker = append(s.breaker, b)
	}
	h, err := rdb.HMGet(ctxb, prefix+"breaker:"+demo.SagaBreaker, "opened", "deferred").Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []*int64{&s.opened, &s.deferred} {
		if v, ok := h[i].(string); ok {
			if *p, err = strconv.ParseInt(v, 10, 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s
}

type chaosResult struct {
	runs, succeeded, failed, steps, attempts, resumes, handBacks, crashes, repairs int
	kills, redisRestarts, duplicates, lost, executions                             int
	// The chaos workflow's inline twin: its runs, and attempts begun
	// inline (by the complete of the step before, in the same task).
	inlineRuns, inlineBegun int
	elapsed                 time.Duration
	// The saga runs (checkSagas): how they ended, their compensations and
	// the circuit breaker.
	sagaRuns, sagaSucceeded, sagaCompensated, sagaCompFailed int
	compensations, compAttempts, duplicateComps              int
	breakerOpened, probes, crashedProbes, deferrals          int
	longest, longestSaga                                     time.Duration
	notes                                                    []string // logged, not violations
	violationList
}

func (c *chaosResult) table() string {
	var b strings.Builder
	row := func(k string, v any) { fmt.Fprintf(&b, "| %-28s | %12v |\n", k, v) }
	fmt.Fprintf(&b, "| %-28s | %12s |\n|%s|%s|\n", "chaos suite", "", strings.Repeat("-", 30), strings.Repeat("-", 14))
	row("runs", c.runs)
	row("  succeeded", c.succeeded)
	row("  failed (injected > budget)", c.failed)
	row("  inline runs", c.inlineRuns)
	row("    attempts begun inline", c.inlineBegun)
	row("  saga runs", c.sagaRuns)
	row("    succeeded", c.sagaSucceeded)
	row("    compensated", c.sagaCompensated)
	row("    compensation_failed", c.sagaCompFailed)
	row("compensations succeeded", c.compensations)
	row("compensation attempts", c.compAttempts)
	row("breaker openings", c.breakerOpened)
	row("breaker probes", c.probes)
	row("  probes whose worker died", c.crashedProbes)
	row("attempts deferred (breaker)", c.deferrals)
	row("steps succeeded", c.steps)
	row("attempts", c.attempts)
	row("resumes after a crash", c.resumes)
	row("resumes after a hand-back", c.handBacks)
	row("crashes recorded", c.crashes)
	row("step-body executions", c.executions)
	row("worker kills (SIGKILL)", c.kills)
	row("Redis restarts", c.redisRestarts)
	row("reconciler repairs", c.repairs)
	row("duplicate executions", c.duplicates)
	row("duplicate compensations", c.duplicateComps)
	row("lost runs", c.lost)
	row("invariant violations", len(c.violations))
	row("longest run (chaos)", c.longest.Round(100*time.Millisecond))
	row("longest run (saga)", c.longestSaga.Round(100*time.Millisecond))
	row("time to finish", c.elapsed.Round(100*time.Millisecond))
	return b.String()
}

// checkChaos checks the suite's invariants.
func checkChaos(runs map[string]*workflow.Run, journals map[string][]workflow.Event, audit []demo.AuditEntry,
	killedAt map[int]time.Time, failRate float64) *chaosResult {
	c := &chaosResult{runs: len(runs)}
	type key struct{ run, step string }
	succeededAt := map[key]time.Time{}

	for id, r := range runs {
		// Every run is terminal, and ended as its injected failures say.
		if !r.Terminal() {
			c.lost++
			c.violatef("run %s is %s, not terminal", id, r.Status)
			continue
		}
		budget := func(string) int { return chaosBudget }
		if r.Workflow != demo.SagaName && r.FinishedAt != nil {
			c.longest = max(c.longest, r.FinishedAt.Sub(r.CreatedAt))
		}
		if r.Workflow == demo.ChaosInlineName {
			c.inlineRuns++
		}
		if r.Workflow == demo.SagaName {
			budget = sagaBudget // checkSagas checks how it ended
		} else {
			switch wantFail := chaosExpect(id, failRate); {
			case r.Status == workflow.StatusSucceeded && wantFail == "":
				c.succeeded++
			case r.Status == workflow.StatusFailed && wantFail != "" && r.FailureCode == workflow.CodeRetriesExhausted &&
				r.Step(wantFail).Status == workflow.StepFailed:
				c.failed++
			default:
				c.violatef("run %s ended %s (%s: %s); its injected failures say it should fail at %q", id, r.Status,
					r.FailureCode, r.FailureReason, wantFail)
			}
		}

		evs := journals[id]
		due := map[string]map[int]time.Time{} // step -> attempt -> due time
		open := map[string]int{}              // step -> attempt started and not yet ended
		succeeded := map[string]int{}         // step -> attempt_succeeded count
		maxAttempt := map[string]int{}        // step -> highest attempt number
		for _, ev := range evs {
			switch ev.Type {
			case workflow.EventRetryScheduled:
				if due[ev.Step] == nil {
					due[ev.Step] = map[int]time.Time{}
				}
				at, ok := ev.DueAt()
				if !ok {
					c.violatef("run %s: retry_scheduled without due_at: %+v", id, ev)
				}
				due[ev.Step][ev.Attempt] = at
			case workflow.EventAttemptStarted:
				if a, ok := open[ev.Step]; ok {
					c.violatef("run %s step %s: attempt %d started while attempt %d had no outcome", id, ev.Step, ev.Attempt, a)
				}
				open[ev.Step] = ev.Attempt
				if ev.Details["inline"] == "1" {
					c.inlineBegun++
				}
				switch ev.Details["resumed"] {
				case "1":
					c.resumes++
				case "interrupted":
					c.handBacks++
				default:
					c.attempts++
				}
				maxAttempt[ev.Step] = max(maxAttempt[ev.Step], ev.Attempt)
				if d, ok := due[ev.Step][ev.Attempt]; ok && ev.At.Before(d) {
					c.violatef("run %s step %s attempt %d started at %s, before its due time %s", id, ev.Step, ev.Attempt, ev.At, d)
				}
				if ev.Attempt > 1 && due[ev.Step][ev.Attempt].IsZero() {
					c.violatef("run %s step %s attempt %d started with no retry scheduled", id, ev.Step, ev.Attempt)
				}
			case workflow.EventAttemptSucceeded, workflow.EventAttemptFailed, workflow.EventAttemptCrashed:
				if a, ok := open[ev.Step]; !ok || a != ev.Attempt {
					if ev.Type != workflow.EventAttemptCrashed {
						c.violatef("run %s step %s: %s of attempt %d that was not running", id, ev.Step, ev.Type, ev.Attempt)
					}
				}
				delete(open, ev.Step)
				if ev.Type == workflow.EventAttemptSucceeded {
					succeeded[ev.Step]++
					succeededAt[key{id, ev.Step}] = ev.At
					c.steps++
				}
				if ev.Type == workflow.EventAttemptCrashed {
					c.crashes++
				}
			case workflow.EventAttemptInterrupted:
				// Its worker could not renew the fence (Redis unreachable)
				// and handed the attempt back (release.lua) once the body
				// returned: the same attempt begins again, "interrupted".
				if a, ok := open[ev.Step]; !ok || a != ev.Attempt {
					c.violatef("run %s step %s: %s of attempt %d that was not running", id, ev.Step, ev.Type, ev.Attempt)
				}
				delete(open, ev.Step)
			case workflow.EventRepair:
				c.repairs++
			}
		}
		for step, a := range open {
			c.violatef("run %s step %s: attempt %d has a start and no outcome or crash record", id, step, a)
		}
		for step, n := range succeeded {
			if n > 1 {
				c.violatef("run %s step %s succeeded %d times", id, step, n)
			}
		}
		for step, a := range maxAttempt {
			if a > budget(step) {
				c.violatef("run %s step %s reached attempt %d, over its budget of %d", id, step, a, budget(step))
			}
		}
	}

	// The step bodies' own records: no body ran after its run ended, none
	// after its step succeeded, none overlapped another of the same step.
	type exec struct {
		start, end time.Time
		attempt    int
		pid        int
		killed     bool // no end record: it ends when its process was killed
	}
	type pk struct {
		k       key
		attempt int
		pid     int
	}
	started := map[pk][]time.Time{}
	var execs = map[key][]exec{}
	for _, a := range audit {
		k := key{a.RunID, a.Step}
		p := pk{k, a.Attempt, a.PID}
		switch a.Phase {
		case "start":
			c.executions++
			started[p] = append(started[p], a.At)
			// Journal times (a step's success, a run's end) are whole
			// milliseconds, cut down: the moment itself may be up to 1ms
			// later, so a body that started within that millisecond (a
			// quick body, by its worker's nanosecond clock) started before.
			if r := runs[a.RunID]; r != nil && r.FinishedAt != nil && !a.At.Before(r.FinishedAt.Add(time.Millisecond)) {
				c.violatef("run %s step %s: a body started at %s, after the run ended at %s", a.RunID, a.Step, a.At, *r.FinishedAt)
				c.duplicates++
			}
			if s, ok := succeededAt[k]; ok && !a.At.Before(s.Add(time.Millisecond)) {
				c.violatef("run %s step %s: a body started at %s, after the step succeeded at %s", a.RunID, a.Step, a.At, s)
				c.duplicates++
			}
		case "end":
			if st := started[p]; len(st) > 0 {
				execs[k] = append(execs[k], exec{start: st[0], end: a.At, attempt: a.Attempt, pid: a.PID})
				started[p] = st[1:]
			}
		}
	}
	for p, starts := range started { // never ended: their worker was killed
		for _, s := range starts {
			end, ok := killedAt[p.pid]
			if !ok {
				end = s // unknown: count it as instantaneous
			}
			execs[p.k] = append(execs[p.k], exec{start: s, end: end, attempt: p.attempt, pid: p.pid, killed: true})
		}
	}
	for k, es := range execs {
		sort.Slice(es, func(i, j int) bool { return es[i].start.Before(es[j].start) })
		for i := 1; i < len(es); i++ {
			if es[i].start.Before(es[i-1].end) {
				c.duplicates++
				a, b := es[i-1], es[i]
				c.violatef("run %s step %s: executions of attempts %d and %d overlapped: pid %d %s..%s (killed %v), pid %d %s..%s (killed %v); journal: %s",
					k.run, k.step, a.attempt, b.attempt, a.pid, a.start.Format("15:04:05.000"), a.end.Format("15:04:05.000"), a.killed,
					b.pid, b.start.Format("15:04:05.000"), b.end.Format("15:04:05.000"), b.killed, journalOf(journals[k.run], k.step))
			}
		}
	}
	return c
}

// chaosExpect is the step at which a chaos run must fail, as its injected
// failures say ("" when it succeeds): the first whose every attempt fails.
func chaosExpect(id string, failRate float64) string {
	for _, step := range demo.ChaosSteps {
		all := true
		for a := 1; a <= chaosBudget; a++ {
			all = all && demo.Injected(id, step, a, failRate)
		}
		if all {
			return step
		}
	}
	return ""
}

// journalOf summarises a step's journal entries, for a violation message.
func journalOf(evs []workflow.Event, step string) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Step == step || ev.Step == "" {
			fmt.Fprintf(&b, "[%s %s a%d %v] ", ev.At.Format("15:04:05.000"), ev.Type, ev.Attempt, ev.Details)
		}
	}
	return b.String()
}
