package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/tasks/demo"
	"github.com/cairnhq/cairn/workflow"
)

// TestKillWorkerMidStep: a worker process is killed with SIGKILL while a step
// runs. Another worker resumes and finishes the step within 30 s, with
// default settings; the crash is counted and journaled, and the step's retry
// budget is untouched.
func TestKillWorkerMidStep(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	bin := proctest.Build(t, workerPkg)
	const queue = "killmid"
	env := workerEnv(srv, queue)
	client := workflow.NewClient(srv.Client(t), workflow.ClientConfig{Queue: queue})

	a := startWorker(t, bin, env)
	run, err := client.Start(ctxb, demo.Name, demo.Input{StepSleepMS: 3000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "fetch to be running", func() bool {
		r, err := client.Get(ctxb, run.ID)
		return err == nil && r.Step("fetch").Status == workflow.StepRunning
	})
	b := startWorker(t, bin, env)
	a.Kill(t)
	killed := time.Now()

	var resumedIn time.Duration
	testkit.Eventually(t, 45*time.Second, "fetch to succeed on the other worker", func() bool {
		r, err := client.Get(ctxb, run.ID)
		if err == nil && r.Step("fetch").Status == workflow.StepSucceeded {
			resumedIn = time.Since(killed)
			return true
		}
		return false
	})
	if resumedIn > 30*time.Second {
		t.Errorf("the killed step finished %s after the kill; want within 30s", resumedIn)
	}
	final := testkit.WaitRun(t, client, run.ID, 60*time.Second)
	if final.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s: %s\n%s", final.Status, final.FailureReason, b.Output())
	}
	f := final.Step("fetch")
	if f.Crashes != 1 || f.Attempts != 1 || f.RetryAttempts != 0 || f.LastError != "" {
		t.Errorf("fetch: crashes %d attempts %d retries %d last error %q; want 1, 1, 0, none",
			f.Crashes, f.Attempts, f.RetryAttempts, f.LastError)
	}
	evs, _ := client.Events(ctxb, run.ID)
	if n := testkit.CountEvents(evs, workflow.EventAttemptCrashed, "fetch"); n != 1 {
		t.Errorf("%d crash records for fetch, want 1", n)
	}
	if n := testkit.CountEvents(evs, workflow.EventAttemptSucceeded, "fetch"); n != 1 {
		t.Errorf("fetch succeeded %d times", n)
	}
	t.Logf("fetch finished %s after its worker was killed", resumedIn.Round(100*time.Millisecond))
}

// TestRedisRestart: redis-server (appendonly yes, appendfsync always) is
// killed while runs are in flight and started again on the same port and
// data: every run in flight makes progress within 15s of the restart, and
// every run completes, each step succeeding exactly once, with no crash
// counted (no worker died).
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
	testkit.Eventually(t, 30*time.Second, "some runs to make progress", func() bool {
		done, _, err := client.List(ctxb, workflow.ListOptions{Status: workflow.StatusSucceeded})
		running, _, err2 := client.List(ctxb, workflow.ListOptions{Status: workflow.StatusRunning})
		return err == nil && err2 == nil && len(done) >= 1 && len(running) >= 1
	})
	srv.Kill(t)
	killed := time.Now()
	srv.Restart(t)
	assertProgress(t, client, ids, killed, time.Now())

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
	audit := func() []demo.AuditEntry {
		raw, err := rdb.LRange(ctxb, demo.AuditKey(queue), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		var out []demo.AuditEntry
		for _, s := range raw {
			a, err := demo.ParseAudit(s)
			if err != nil {
				t.Fatal(err)
			}
			if a.RunID == run.ID {
				out = append(out, a)
			}
		}
		return out
	}
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

	testkit.Eventually(t, 30*time.Second, "reserve's compensation to run", func() bool { return len(starts(comp)) == 1 })
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
