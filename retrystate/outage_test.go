package retrystate_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// The scripts a lost reply makes a caller repeat: each must answer the
// second call as it answered the first, without counting anything twice,
// and each repair must say so on the notification stream.

func notificationsOf(t *testing.T, s *retrystate.Store, runID, typ string) []retrystate.Notification {
	t.Helper()
	ns, err := s.Notifications(ctxb, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []retrystate.Notification
	for _, n := range ns {
		if n.RunID == runID && n.Type == typ {
			out = append(out, n)
		}
	}
	return out
}

func countEntries(es []retrystate.Entry, typ string) int {
	n := 0
	for _, e := range es {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// TestBeginAgainWithTheSameToken: a begin whose reply was lost, asked again
// with the same token, is answered "ok" as the first time, with the fence's
// expiry renewed and nothing counted twice; another token is still busy.
func TestBeginAgainWithTheSameToken(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	id := runID(1)
	create(t, s, id, t0, "a", "b")
	task := tasks.ID(id, 0, 1, 0)
	first := begin(t, s, id, 0, task, "tok", t0)
	if first.Outcome != retrystate.OutcomeOK {
		t.Fatalf("begin: %+v", first)
	}
	again := begin(t, s, id, 0, task, "tok", t0.Add(4*time.Second))
	if a, f := again.Started, first.Started; again.Outcome != retrystate.OutcomeOK || a.Attempt != f.Attempt ||
		a.Used != f.Used || a.Crashed || a.Input != f.Input || a.Next == nil || a.Next.Name != "b" {
		t.Fatalf("begin again: %+v\nfirst: %+v", again, first)
	}
	run, _ := s.Run(ctxb, id)
	if run.Iterations != 1 || run.Steps[0].AttemptsStarted != 1 || run.Steps[0].Crashes != 0 {
		t.Errorf("after the repeat: iterations %d, attempts started %d, crashes %d; want 1, 1, 0",
			run.Iterations, run.Steps[0].AttemptsStarted, run.Steps[0].Crashes)
	}
	if want := t0.Add(14 * time.Second); !run.Steps[0].FenceExpiresAt.Equal(want) {
		t.Errorf("fence expires at %s, want %s (renewed by the repeat)", run.Steps[0].FenceExpiresAt, want)
	}
	if n := countEntries(mustJournal(t, s, id), retrystate.EventAttemptStarted); n != 1 {
		t.Errorf("%d attempt_started entries, want 1", n)
	}
	if b := begin(t, s, id, 0, task, "other", t0.Add(5*time.Second)); b.Outcome != retrystate.OutcomeBusy {
		t.Errorf("another delivery: %+v, want busy", b)
	}
}

// TestFailAgainWithTheSameToken: a failure recorded twice (the first reply
// lost) schedules one retry, whose task the script wrote, and the second
// call says so.
func TestFailAgainWithTheSameToken(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	id := runID(2)
	create(t, s, id, t0, "a")
	begin(t, s, id, 0, tasks.ID(id, 0, 1, 0), "tok", t0)
	retry := tasks.Step{RunID: id, Workflow: "wf", Index: 0, Name: "a", Attempt: 2}
	args := retrystate.FailParams{RunID: id, Index: 0, Token: "tok", Error: "503", Class: retrystate.ClassTransient,
		Delay: 3 * time.Second, Retention: time.Hour, Now: t0,
		RetryTaskID: retry.ID(), RetryMessage: retry.AsynqMessage(s.Queue(), time.Minute)}
	f, err := s.Fail(ctxb, args)
	if err != nil || f.Outcome != retrystate.OutcomeRetry || !f.Enqueued {
		t.Fatalf("fail: %+v %v", f, err)
	}
	// The retry's task is in asynq's schedule, for its due time rounded up
	// to the second.
	score, err := rdb.ZScore(ctxb, tasks.QueueKeys(s.Queue()).Scheduled(), retry.ID()).Result()
	if err != nil || int64(score) != t0.Add(3*time.Second).Unix() {
		t.Fatalf("scheduled task: score %v %v, want %d", score, err, t0.Add(3*time.Second).Unix())
	}
	args.Now = t0.Add(time.Second)
	again, err := s.Fail(ctxb, args)
	if err != nil || again.Outcome != retrystate.OutcomeDone || again.RunStatus != retrystate.StatusRunning {
		t.Fatalf("fail again: %+v %v", again, err)
	}
	run, _ := s.Run(ctxb, id)
	if run.Steps[0].Attempt != 2 || run.Steps[0].RetryAttempts != 1 {
		t.Errorf("after the repeat: attempt %d, retries %d; want 2, 1", run.Steps[0].Attempt, run.Steps[0].RetryAttempts)
	}
	es := mustJournal(t, s, id)
	if countEntries(es, retrystate.EventAttemptFailed) != 1 || countEntries(es, retrystate.EventRetryScheduled) != 1 {
		t.Errorf("journal: %+v", es)
	}
}

// TestRelease: an attempt its worker stopped for an unrenewable fence is
// handed back: a new dispatch of the same attempt, its task written, no
// crash and no attempt counted, journaled and notified; the resumed attempt
// is not a new attempt, nor a crash. A stranger's release changes nothing.
func TestRelease(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	id := runID(3)
	create(t, s, id, t0, "a")
	begin(t, s, id, 0, tasks.ID(id, 0, 1, 0), "tok", t0)
	next := tasks.Step{RunID: id, Workflow: "wf", Index: 0, Name: "a", Attempt: 1, Gen: 1}
	if r, err := s.Release(ctxb, retrystate.ReleaseParams{RunID: id, Index: 0, Token: "stranger",
		Now: t0}); err != nil || r.Outcome != retrystate.OutcomeFenced {
		t.Fatalf("a stranger's release: %+v %v", r, err)
	}
	r, err := s.Release(ctxb, retrystate.ReleaseParams{RunID: id, Index: 0, Token: "tok", Now: t0.Add(time.Second),
		TaskID: next.ID(), Message: next.AsynqMessage(s.Queue(), time.Minute)})
	if err != nil || r.Outcome != retrystate.OutcomeReleased || !r.Enqueued || r.Dispatch.Attempt != 1 || r.Dispatch.Gen != 1 {
		t.Fatalf("release: %+v %v", r, err)
	}
	if n, err := rdb.LPos(ctxb, tasks.QueueKeys(s.Queue()).Pending(), next.ID(), redis.LPosArgs{}).Result(); err != nil || n < 0 {
		t.Fatalf("the new dispatch's task is not pending in asynq: %v %v", n, err)
	}
	if again, err := s.Release(ctxb, retrystate.ReleaseParams{RunID: id, Index: 0, Token: "tok",
		Now: t0.Add(time.Second)}); err != nil || again.Outcome != retrystate.OutcomeFenced {
		t.Fatalf("a second release: %+v %v", again, err)
	}
	es := mustJournal(t, s, id)
	if countEntries(es, retrystate.EventAttemptInterrupted) != 1 || countEntries(es, retrystate.EventAttemptCrashed) != 0 {
		t.Errorf("journal: %+v", es)
	}
	ns := notificationsOf(t, s, id, "run_recovered")
	if len(ns) != 1 || ns[0].Fields["by"] != "worker" || ns[0].Fields["kind"] != "interrupted_attempt" ||
		ns[0].Fields["step"] != "a" || ns[0].Fields["owner"] != "o" {
		t.Errorf("notifications: %+v", ns)
	}
	b := begin(t, s, id, 0, next.ID(), "tok2", t0.Add(2*time.Second))
	if b.Outcome != retrystate.OutcomeOK || b.Started.Attempt != 1 || b.Started.Crashed || b.Started.Used != 1 {
		t.Fatalf("resume: %+v", b)
	}
	run, _ := s.Run(ctxb, id)
	if a := run.Steps[0]; a.AttemptsStarted != 1 || a.Crashes != 0 || a.RetryAttempts != 0 {
		t.Errorf("step: attempts started %d, crashes %d, retries %d; want 1, 0, 0", a.AttemptsStarted, a.Crashes, a.RetryAttempts)
	}
	es = mustJournal(t, s, id)
	if last := es[len(es)-1]; last.Type != retrystate.EventAttemptStarted || last.Fields["resumed"] != "interrupted" {
		t.Errorf("last entry: %+v", last)
	}
}

// TestRepairStalledTask: a step whose task asynq handed to a worker that
// never received it gets a new dispatch (not a crash, no budget), journaled
// and notified; a step that was begun meanwhile is left alone.
func TestRepairStalledTask(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	id := runID(4)
	create(t, s, id, t0, "a")
	task := tasks.ID(id, 0, 1, 0)
	rp, err := s.RepairTask(ctxb, retrystate.RepairParams{RunID: id, TaskID: task,
		Trouble: retrystate.TaskStalled, MaxAuto: 3, Now: t0.Add(10 * time.Second)})
	if err != nil || rp.Outcome != retrystate.OutcomeDispatch || rp.Kind != "stalled_delivery" ||
		rp.Dispatch.Attempt != 1 || rp.Dispatch.Gen != 1 {
		t.Fatalf("repair: %+v %v", rp, err)
	}
	run, _ := s.Run(ctxb, id)
	if a := run.Steps[0]; a.Task != tasks.ID(id, 0, 1, 1) || a.Crashes != 0 || a.Attempt != 1 || run.AutoRecoveries != 1 {
		t.Errorf("after the repair: task %s, crashes %d, attempt %d, auto recoveries %d", a.Task, a.Crashes, a.Attempt,
			run.AutoRecoveries)
	}
	ns := notificationsOf(t, s, id, "run_recovered")
	if len(ns) != 1 || ns[0].Fields["by"] != "reconciler" || ns[0].Fields["kind"] != "stalled_delivery" || ns[0].Workflow != "wf" {
		t.Errorf("notifications: %+v", ns)
	}
	// The old task is stale now: repairing it again does nothing.
	if rp, err := s.RepairTask(ctxb, retrystate.RepairParams{RunID: id, TaskID: task,
		Trouble: retrystate.TaskStalled, MaxAuto: 3, Now: t0.Add(11 * time.Second)}); err != nil || rp.Outcome != retrystate.OutcomeNoop {
		t.Fatalf("repair of the old task: %+v %v", rp, err)
	}
	// A begun step is not stalled, whatever asynq's lease says.
	begin(t, s, id, 0, tasks.ID(id, 0, 1, 1), "tok", t0.Add(12*time.Second))
	if rp, err := s.RepairTask(ctxb, retrystate.RepairParams{RunID: id, TaskID: tasks.ID(id, 0, 1, 1),
		Trouble: retrystate.TaskStalled, MaxAuto: 3, Now: t0.Add(13 * time.Second)}); err != nil || rp.Outcome != retrystate.OutcomeNoop {
		t.Fatalf("repair of a begun step: %+v %v", rp, err)
	}
}

// TestStalledTasks lists the tasks whose lease expires before the cut-off.
func TestStalledTasks(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	lease := tasks.QueueKeys(s.Queue()).Lease()
	rdb.ZAdd(ctxb, lease, redis.Z{Score: float64(t0.Unix()), Member: "old"}, redis.Z{Score: float64(t0.Unix() + 30), Member: "fresh"})
	got, err := s.StalledTasks(ctxb, t0.Add(10*time.Second), 10)
	if err != nil || len(got) != 1 || got[0] != "old" {
		t.Fatalf("stalled: %v %v", got, err)
	}
}

// TestSweepDue: a sweep has something to look at when a fence expired or,
// when asked, a lease went unextended; not for a live fence or a fresh
// lease, nor for a stale lease it was not asked about.
func TestSweepDue(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	cut := t0.Add(10 * time.Second) // the leases' cut-off
	due := func(now, leaseBefore time.Time) bool {
		t.Helper()
		d, err := s.SweepDue(ctxb, now, leaseBefore)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if due(t0, cut) {
		t.Fatal("due on an empty queue")
	}
	id := runID(1)
	create(t, s, id, t0, "a")
	begin(t, s, id, 0, tasks.ID(id, 0, 1, 0), "tok", t0) // a fence of 10s
	lease := tasks.QueueKeys(s.Queue()).Lease()
	rdb.ZAdd(ctxb, lease, redis.Z{Score: float64(t0.Unix() + 30), Member: "fresh"})
	if due(t0.Add(9*time.Second), cut) {
		t.Fatal("due with a live fence and a fresh lease")
	}
	if !due(t0.Add(10*time.Second), cut) {
		t.Fatal("not due with the fence expired")
	}
	rdb.ZAdd(ctxb, lease, redis.Z{Score: float64(t0.Unix()), Member: "old"})
	if !due(t0, cut) {
		t.Fatal("not due with a stale lease")
	}
	if due(t0, time.Time{}) {
		t.Fatal("due for a stale lease with the leases left unread")
	}
}

// TestRecoveryNotifications: every automatic repair that changes a run's
// course appends run_recovered, with by and kind, in its own script; the
// recovery-loop breaker appends run_needs_attention.
func TestRecoveryNotifications(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)

	// A crashed attempt re-dispatched by the reconciler.
	crashed := runID(5)
	create(t, s, crashed, t0, "a")
	begin(t, s, crashed, 0, tasks.ID(crashed, 0, 1, 0), "tok", t0)
	if rp, err := s.Redispatch(ctxb, retrystate.RedispatchParams{RunID: crashed, MaxAuto: 3,
		Retention: time.Hour, Now: t0.Add(11 * time.Second)}); err != nil || rp.Kind != "crashed_attempt" {
		t.Fatalf("redispatch: %+v %v", rp, err)
	}
	// A crash found by a delivery.
	found := runID(6)
	create(t, s, found, t0, "a")
	begin(t, s, found, 0, tasks.ID(found, 0, 1, 0), "tok", t0)
	if b := begin(t, s, found, 0, tasks.ID(found, 0, 1, 0), "tok2", t0.Add(11*time.Second)); b.Started == nil || !b.Started.Crashed {
		t.Fatalf("takeover: %+v", b)
	}
	// A lost task re-created.
	missing := runID(7)
	create(t, s, missing, t0, "a")
	if rp, err := s.RepairTask(ctxb, retrystate.RepairParams{RunID: missing, TaskID: tasks.ID(missing, 0, 1, 0),
		Trouble: retrystate.TaskMissing, MaxAuto: 3, Now: t0}); err != nil || rp.Kind != "task_missing" {
		t.Fatalf("repair: %+v %v", rp, err)
	}
	for _, c := range []struct{ run, by, kind string }{
		{crashed, "reconciler", "crashed_attempt"},
		{found, "worker", "crashed_attempt"},
		{missing, "reconciler", "task_missing"},
	} {
		ns := notificationsOf(t, s, c.run, "run_recovered")
		if len(ns) != 1 || ns[0].Fields["by"] != c.by || ns[0].Fields["kind"] != c.kind || ns[0].Fields["step"] != "a" {
			t.Errorf("%s by %s: notifications %+v", c.kind, c.by, ns)
		}
	}

	// Repaired too often: left for an operator, and said so.
	loop := runID(8)
	create(t, s, loop, t0, "a")
	task := tasks.ID(loop, 0, 1, 0)
	for i := range 2 {
		rp, err := s.RepairTask(ctxb, retrystate.RepairParams{RunID: loop, TaskID: task,
			Trouble: retrystate.TaskMissing, MaxAuto: 1, Now: t0.Add(time.Duration(i) * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if want := []retrystate.Outcome{retrystate.OutcomeDispatch, retrystate.OutcomeAttention}[i]; rp.Outcome != want {
			t.Fatalf("repair %d: %+v, want %s", i+1, rp, want)
		}
	}
	if ns := notificationsOf(t, s, loop, "run_needs_attention"); len(ns) != 1 || ns[0].Fields["code"] != "auto_recovery_exhausted" {
		t.Errorf("needs attention: %+v", ns)
	}
	if ns := notificationsOf(t, s, loop, "run_recovered"); len(ns) != 1 {
		t.Errorf("run_recovered %d times, want once (the repair that was made)", len(ns))
	}
}

// TestTryLockKnowsItsOwnToken: a lock taken by a caller whose reply was lost
// is the caller's at its next try with the same token, and nobody else's.
func TestTryLockKnowsItsOwnToken(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	for i, c := range []struct {
		token string
		want  bool
	}{{"a", true}, {"a", true}, {"b", false}} {
		ok, err := s.TryLock(ctxb, retrystate.LockSweep, c.token, time.Minute)
		if err != nil || ok != c.want {
			t.Errorf("try %d (%s): %v %v, want %v", i+1, c.token, ok, err, c.want)
		}
	}
}

// TestIdempotencyKeysAreScopedByOwner: two owners' equal keys are different
// keys; a key without an owner is a third; a finished run's key expires with
// it. A key written before keys were scoped still finds its run, for that
// run's owner only.
func TestIdempotencyKeysAreScopedByOwner(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	start := func(n int, owner, key string) retrystate.CreateResult {
		t.Helper()
		c, err := s.CreateRun(ctxb, retrystate.NewRun{ID: runID(n), Workflow: "wf", Owner: owner, IdempotencyKey: key,
			Input: "{}", Now: t0, Steps: []retrystate.NewStep{{Name: "a", MaxAttempts: 1, MaxCrashes: 1, Policy: "{}"}}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, c := range []struct {
		n            int
		owner, key   string
		existed      bool
		runOfTheKeyN int
	}{
		{10, "alice", "k", false, 10},
		{11, "bob", "k", false, 11},
		{12, "alice", "k", true, 10},
		{13, "", "k", false, 13},
		{14, "", "k", true, 13},
		// An owner that looks like another owner's name and key.
		{15, "alice:k", "", false, 15},
		{16, "5:alice", "k", false, 16},
	} {
		got := start(c.n, c.owner, c.key)
		if (got.Outcome == retrystate.OutcomeExists) != c.existed || got.RunID != runID(c.runOfTheKeyN) {
			t.Errorf("run %d (owner %q, key %q): %+v, want existed %v and run %d", c.n, c.owner, c.key, got, c.existed, c.runOfTheKeyN)
		}
	}
	// A key from before the scoping (idem:<key>) counts for its run's owner.
	start(20, "alice", "")
	rdb.Set(ctxb, "cairn:{"+s.Queue()+"}:idem:old", runID(20), 0)
	if got := start(21, "alice", "old"); got.Outcome != retrystate.OutcomeExists || got.RunID != runID(20) {
		t.Errorf("alice's legacy key: %+v, want run 20", got)
	}
	if got := start(22, "bob", "old"); got.Outcome == retrystate.OutcomeExists {
		t.Errorf("bob's start with alice's legacy key found %s", got.RunID)
	}
	// A finished run's key gets the run's retention.
	if _, err := s.Cancel(ctxb, retrystate.CancelParams{RunID: runID(11), Actor: "bob", Retention: time.Hour,
		Now: t0}); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctxb, "cairn:{"+s.Queue()+"}:idemo:3:bob:k").Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("bob's key after his run was cancelled: TTL %s, want the run's retention", ttl)
	}
	if ttl := rdb.PTTL(ctxb, "cairn:{"+s.Queue()+"}:idemo:5:alice:k").Val(); ttl != -1 {
		t.Errorf("alice's key (her run goes on): TTL %s, want none", ttl)
	}
}

// TestReadAfterTheLargestID: reading after the largest stream ID finds
// nothing (Redis itself refuses that range).
func TestReadAfterTheLargestID(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	create(t, s, runID(30), t0, "a")
	if _, err := s.Cancel(ctxb, retrystate.CancelParams{RunID: runID(30), Actor: "me", Retention: time.Hour,
		Now: t0}); err != nil {
		t.Fatal(err)
	}
	const largest = "18446744073709551615-18446744073709551615"
	if ns, err := s.Notifications(ctxb, largest, 10); err != nil || len(ns) != 0 {
		t.Errorf("notifications after the largest ID: %v %v", ns, err)
	}
	if es, err := s.Audit(ctxb, largest, 10); err != nil || len(es) != 0 {
		t.Errorf("audit after the largest ID: %v %v", es, err)
	}
}
