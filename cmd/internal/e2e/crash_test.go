package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestKillWorkerMidStep: a worker process is killed with SIGKILL while a
// step's body runs, with the default fence and sweep settings. The other
// worker's reconciler finds the attempt's fence expired and re-dispatches
// it (a repair, kind crashed_attempt: not asynq's lease recovery, which
// would come a minute later at the earliest), and the other worker resumes
// and finishes the step; the crash is counted and journaled, and the
// step's retry budget is untouched.
//
// The body blocks until the test releases it (demo.ChaosInput.BlockStep),
// so it is running when its worker is killed however slow the machine;
// the test releases it once the worker is dead.
func TestKillWorkerMidStep(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	bin := proctest.Build(t, workerPkg)
	const queue = "killmid"
	env := workerEnv(srv, queue, "CAIRN_DEMO_CHAOS=true")
	cfg := workerConfig(t, env)
	rdb := srv.Client(t)
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue})
	const step = "s1"

	a := startWorker(t, bin, env)
	run, err := client.Start(ctxb, demo.ChaosName, demo.ChaosInput{BlockStep: step}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The premise: the attempt has begun (journaled) and its body runs on
	// a, where it waits for the release.
	testkit.Premise(t, 60*time.Second, step+"'s attempt to be running on worker a", func() bool {
		evs, err := client.Events(ctxb, run.ID)
		audit := readAudit(t, rdb, queue, run.ID)
		return err == nil && testkit.CountEvents(evs, workflow.EventAttemptStarted, step) == 1 &&
			len(audit) == 1 && audit[0].Step == step && audit[0].Phase == "start" && audit[0].PID == a.PID()
	})
	b := startWorker(t, bin, env)
	a.Kill(t)
	killed := time.Now()
	if err := rdb.Set(ctxb, demo.ReleaseKey(queue, run.ID), "1", 0).Err(); err != nil {
		t.Fatal(err)
	}

	// The crash is found once the fence, renewed until the kill, expires
	// (FenceTTL), at the next sweep (SweepInterval), which waits out the
	// reconciler's outage grace when one of its calls to Redis was slow, as
	// on a loaded machine. Four times that (34s with the defaults) is a
	// ceiling only a broken sweep misses; asynq's own recovery, which would
	// also resume the attempt, is told apart by the journal (below).
	resumeCeiling := 4 * (cfg.FenceTTL + cfg.SweepInterval + outageGrace)
	// The wait outlasts asynq's recovery too, so that a broken sweep fails
	// below on the journal, which says who resumed the attempt.
	var resumed time.Time
	testkit.Eventually(t, max(resumeCeiling, asynqFallback)+30*time.Second, step+"'s attempt to resume on the other worker", func() bool {
		evs, err := client.Events(ctxb, run.ID)
		if err != nil {
			return false
		}
		for _, ev := range evs {
			if ev.Type == workflow.EventAttemptStarted && ev.Step == step && ev.Details["resumed"] == "1" {
				resumed = ev.At
				return true
			}
		}
		return false
	})
	if in := resumed.Sub(killed); in > resumeCeiling {
		t.Errorf("%s resumed %s after its worker was killed; want within %s, 4 x (fence TTL %s + sweep %s + outage grace %s)",
			step, in.Round(100*time.Millisecond), resumeCeiling, cfg.FenceTTL, cfg.SweepInterval, outageGrace)
	}
	final := testkit.WaitRun(t, client, run.ID, 60*time.Second)
	evs, err := client.Events(ctxb, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s: %s\n%s\n%s", final.Status, final.FailureReason, journalText(evs), b.Output())
	}
	f := final.Step(step)
	if f.Crashes != 1 || f.Attempts != 1 || f.RetryAttempts != 0 || f.LastError != "" {
		t.Errorf("%s: crashes %d attempts %d retries %d last error %q; want 1, 1, 0, none",
			step, f.Crashes, f.Attempts, f.RetryAttempts, f.LastError)
	}
	if n := testkit.CountEvents(evs, workflow.EventAttemptCrashed, step); n != 1 {
		t.Errorf("%d crash records for %s, want 1\n%s", n, step, journalText(evs))
	}
	if n := testkit.CountEvents(evs, workflow.EventAttemptSucceeded, step); n != 1 {
		t.Errorf("%s succeeded %d times", step, n)
	}
	// The reconciler's sweep found the crash (redispatch.lua journals the
	// repair); a crash found by a delivery's begin, with no repair, is
	// asynq's lease recovery having redelivered the task.
	repaired := false
	for _, ev := range evs {
		repaired = repaired || (ev.Type == workflow.EventRepair && ev.Details["kind"] == "crashed_attempt" && ev.Step == step)
	}
	if !repaired {
		t.Errorf("no repair of kind crashed_attempt: the reconciler did not find the crash\n%s", journalText(evs))
	}
	// The bodies: the killed one (started on a, no end), then b's, once.
	var bodies []string
	for _, e := range readAudit(t, rdb, queue, run.ID) {
		if e.Step == step {
			who := "b"
			if e.PID == a.PID() {
				who = "a"
			}
			bodies = append(bodies, e.Phase+" on "+who)
		}
	}
	if want := []string{"start on a", "start on b", "end on b"}; !slices.Equal(bodies, want) {
		t.Errorf("%s's bodies: %q; want %q", step, bodies, want)
	}
	t.Logf("%s resumed %s after its worker was killed", step, resumed.Sub(killed).Round(100*time.Millisecond))
}

// TestRedisRestart: redis-server (appendonly yes, appendfsync always) is
// killed while runs are in flight and started again on the same port and
// data: every run in flight makes progress soon after the restart
// (progressCeiling), and every run completes, each step succeeding exactly
// once, with no crash counted (no worker died).
func TestRedisRestart(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	bin := proctest.Build(t, workerPkg)
	const queue = "redisrestart"
	env := workerEnv(srv, queue, "CAIRN_RETRY_INITIAL_INTERVAL=200ms", "CAIRN_RETRY_MAX_INTERVAL=1s", "CAIRN_LOG_LEVEL=info")
	client := workflow.NewClient(srv.Client(t), workflow.ClientConfig{Queue: queue})
	startWorker(t, bin, env)
	startWorker(t, bin, env)

	const n = 20
	ids := make([]string, n)
	for i := range ids {
		in := demo.Input{StepSleepMS: 150}
		if i%3 == 0 {
			in.FailStep, in.FailTimes = "transform", 1
		}
		r, err := client.Start(ctxb, demo.Name, in, &workflow.StartOptions{IdempotencyKey: fmt.Sprint("r", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
	}
	testkit.Premise(t, 30*time.Second, "some runs to make progress", func() bool {
		done, _, err := client.List(ctxb, workflow.ListOptions{Status: workflow.StatusSucceeded})
		running, _, err2 := client.List(ctxb, workflow.ListOptions{Status: workflow.StatusRunning})
		return err == nil && err2 == nil && len(done) >= 1 && len(running) >= 1
	})
	srv.Kill(t)
	killed := time.Now()
	srv.Restart(t)
	assertProgress(t, client, ids, killed, time.Now(), progressCeiling(workerConfig(t, env)))

	for _, id := range ids {
		r := testkit.WaitRun(t, client, id, 120*time.Second)
		if r.Status != workflow.StatusSucceeded {
			t.Errorf("run %s: %s %s", id, r.Status, r.FailureReason)
			continue
		}
		evs, err := client.Events(ctxb, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, step := range []string{"fetch", "transform", "deliver"} {
			if c := testkit.CountEvents(evs, workflow.EventAttemptSucceeded, step); c != 1 {
				t.Errorf("run %s: %s succeeded %d times", id, step, c)
			}
		}
		if c := testkit.CountEvents(evs, workflow.EventAttemptCrashed, ""); c != 0 {
			t.Errorf("run %s: %d crashes counted\n%s", id, c, journalText(evs))
		}
	}
}

// TestCompensationSurvivesWorkerKill: a saga run (demo.Saga) fails for good
// at its last step, and its compensations run: charge's, then reserve's,
// whose body blocks until the test releases it. The worker running that
// body is killed with SIGKILL mid-body; the other worker finds the crash
// once the fence expires and resumes the compensation, which the test then
// releases. The compensation succeeds once (its body's success audited
// once, by the other worker), with one crash and one attempt in its record;
// the run ends compensated, and no step or other compensation ran again.
func TestCompensationSurvivesWorkerKill(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	bin := proctest.Build(t, workerPkg)
	const queue = "compkill"
	const fenceTTL = 2 * time.Second
	env := workerEnv(srv, queue, "CAIRN_DEMO_CHAOS=true", "CAIRN_LOG_LEVEL=info",
		"CAIRN_FENCE_TTL="+fenceTTL.String(), "CAIRN_SWEEP_INTERVAL=300ms", "CAIRN_RECONCILE_INTERVAL=2s")
	rdb := srv.Client(t)
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue})
	procs := []*proctest.Proc{startWorker(t, bin, env), startWorker(t, bin, env)}

	const comp = workflow.CompensationPrefix + demo.SagaReserve
	run, err := client.Start(ctxb, demo.SagaName, demo.SagaInput{PermanentStep: demo.SagaShip, BlockComp: demo.SagaReserve}, nil)
	if err != nil {
		t.Fatal(err)
	}
	audit := func() []demo.AuditEntry { return readAudit(t, rdb, queue, run.ID) }
	// starts returns the pids of the bodies of step that started.
	starts := func(step string) []int {
		var pids []int
		for _, a := range audit() {
			if a.Step == step && a.Phase == "start" {
				pids = append(pids, a.PID)
			}
		}
		return pids
	}

	testkit.Premise(t, 30*time.Second, "reserve's compensation to run", func() bool { return len(starts(comp)) == 1 })
	victim, survivor := procs[0], procs[1]
	if pid := starts(comp)[0]; pid == survivor.PID() {
		victim, survivor = survivor, victim
	} else if pid != victim.PID() {
		t.Fatalf("the compensation runs on pid %d, neither worker (%d, %d)", pid, victim.PID(), survivor.PID())
	}
	if r, err := client.Get(ctxb, run.ID); err != nil || r.Status != workflow.StatusCompensating ||
		r.Step(demo.SagaReserve).Compensation.Status != workflow.StepRunning {
		t.Fatalf("before the kill: %+v, %v; want the run compensating, reserve's compensation running", r, err)
	}
	victim.Kill(t)
	killed := time.Now()

	testkit.Eventually(t, 45*time.Second, "the other worker to resume the compensation", func() bool {
		return len(starts(comp)) >= 2
	})
	resumedIn := time.Since(killed)
	if pids := starts(comp); pids[1] != survivor.PID() {
		t.Fatalf("the compensation's bodies ran on %v; want the killed worker's, then the survivor's (%d)", pids, survivor.PID())
	}
	if err := rdb.Set(ctxb, demo.ReleaseKey(queue, run.ID), "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	final := testkit.WaitRun(t, client, run.ID, 60*time.Second)
	evs, err := client.Events(ctxb, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != workflow.StatusCompensated || final.FailureCode != workflow.CodePermanentError {
		t.Fatalf("run %s (%s: %s); want compensated after ship's permanent error\n%s\n%s", final.Status, final.FailureCode,
			final.FailureReason, journalText(evs), survivor.Output())
	}

	// The compensation's record: one crash, one attempt, no retry.
	c := final.Step(demo.SagaReserve).Compensation
	if c == nil || c.Status != workflow.StepSucceeded || c.Crashes != 1 || c.Attempts != 1 || c.RetryAttempts != 0 || c.LastError != "" {
		t.Errorf("reserve's compensation: %+v; want succeeded, crashes 1, attempts 1, no retry or error", c)
	}
	for step, want := range map[string]workflow.StepStatus{demo.SagaReserve: workflow.StepCompensated,
		demo.SagaQuote: workflow.StepSucceeded, demo.SagaCharge: workflow.StepCompensated, demo.SagaShip: workflow.StepFailed} {
		if st := final.Step(step); st.Status != want || st.Attempts != 1 || st.Crashes != 0 {
			t.Errorf("step %s: %s, %d attempts, %d crashes; want %s, 1 attempt, no crash", step, st.Status, st.Attempts, st.Crashes, want)
		}
	}
	// The journal: the crash of the compensation's attempt 1, found and
	// resumed; every other attempt once.
	if n := testkit.CountEvents(evs, workflow.EventAttemptCrashed, ""); n != 1 ||
		testkit.CountEvents(evs, workflow.EventAttemptCrashed, comp) != 1 {
		t.Errorf("%d crash records; want 1, of %s\n%s", n, comp, journalText(evs))
	}
	for _, step := range []string{demo.SagaReserve, demo.SagaCharge} {
		if n := testkit.CountEvents(evs, workflow.EventCompensationSucceeded, step); n != 1 {
			t.Errorf("the compensation of %s succeeded %d times", step, n)
		}
	}
	var (
		compStarts         []string
		started, crashedAt time.Time
	)
	for _, ev := range evs {
		switch {
		case ev.Type == workflow.EventAttemptStarted && ev.Step == comp:
			compStarts = append(compStarts, fmt.Sprintf("a%d resumed=%s", ev.Attempt, ev.Details["resumed"]))
			if started.IsZero() {
				started = ev.At
			}
		case ev.Type == workflow.EventAttemptCrashed && ev.Step == comp:
			crashedAt = ev.At
		}
	}
	if want := []string{"a1 resumed=0", "a1 resumed=1"}; !slices.Equal(compStarts, want) {
		t.Errorf("%s started %q; want %q", comp, compStarts, want)
	}
	// The fence, renewed while the body ran, expired no sooner than a TTL
	// after the attempt began: the crash cannot be found before.
	if crashedAt.Before(started.Add(fenceTTL)) {
		t.Errorf("%s's crash was recorded at %s, before its fence could expire (started %s, TTL %s)", comp,
			crashedAt.Format(tsFormat), started.Format(tsFormat), fenceTTL)
	}
	// The bodies' own audit: every body once, but the compensation's, whose
	// killed body has no end; its one success is the survivor's.
	type phases struct{ start, ok, fail, end int }
	got := map[string]*phases{}
	for _, a := range audit() {
		p := got[a.Step]
		if p == nil {
			p = &phases{}
			got[a.Step] = p
		}
		switch a.Phase {
		case "start":
			p.start++
		case "ok":
			p.ok++
			if a.Step == comp && a.PID != survivor.PID() {
				t.Errorf("%s succeeded on pid %d, not on the survivor %d", comp, a.PID, survivor.PID())
			}
		case "fail":
			p.fail++
		case "end":
			p.end++
		}
	}
	want := map[string]phases{
		demo.SagaReserve: {1, 1, 0, 1}, demo.SagaQuote: {1, 1, 0, 1}, demo.SagaCharge: {1, 1, 0, 1}, demo.SagaShip: {1, 0, 1, 1},
		workflow.CompensationPrefix + demo.SagaCharge: {1, 1, 0, 1}, comp: {2, 1, 0, 1},
	}
	if len(got) != len(want) {
		t.Errorf("bodies of %d steps ran; want %d", len(got), len(want))
	}
	for step, w := range want {
		if p := got[step]; p == nil || *p != w {
			t.Errorf("%s's bodies: %+v; want %+v (start, ok, fail, end)", step, p, w)
		}
	}
	t.Logf("the compensation was resumed on the other worker %s after the kill", resumedIn.Round(100*time.Millisecond))
}
