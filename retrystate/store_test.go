package retrystate_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

var (
	ctxb = context.Background()
	seq  atomic.Int64
	t0   = time.UnixMilli(1_800_000_000_000)
)

func newStore(t *testing.T) (*retrystate.Store, *redis.Client) {
	t.Helper()
	rdb := redistest.Shared(t).Client(t)
	return retrystate.New(rdb, fmt.Sprintf("rs%d", seq.Add(1))), rdb
}

func runID(n int) string { return fmt.Sprintf("%026d", n) }

func create(t *testing.T, s *retrystate.Store, id string, at time.Time, steps ...string) retrystate.CreateResult {
	t.Helper()
	nr := retrystate.NewRun{ID: id, Workflow: "wf", Owner: "o", Input: "{}", Now: at}
	for _, name := range steps {
		nr.Steps = append(nr.Steps, retrystate.NewStep{Name: name, MaxAttempts: 3, MaxCrashes: 1, Timeout: time.Minute, Policy: "{}"})
	}
	c, err := s.CreateRun(ctxb, nr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func begin(t *testing.T, s *retrystate.Store, id string, idx int, task, token string, now time.Time) retrystate.BeginResult {
	t.Helper()
	b, err := s.Begin(ctxb, retrystate.BeginParams{RunID: id, Index: idx, TaskID: task, Token: token,
		FenceTTL: 10 * time.Second, Retention: time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The scripts build task IDs in Lua; they must be the IDs tasks.ID builds.
func TestScriptTaskIDsMatchTasksPackage(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	id := runID(1)
	c := create(t, s, id, t0, "a", "b")
	run, err := s.Run(ctxb, id)
	if err != nil {
		t.Fatal(err)
	}
	if want := tasks.ID(id, 0, 1, 0); run.Steps[0].Task != want || c.Dispatch.Attempt != 1 {
		t.Fatalf("first task %q (attempt %d), want %q", run.Steps[0].Task, c.Dispatch.Attempt, want)
	}
	b := begin(t, s, id, 0, tasks.ID(id, 0, 1, 0), "tok", t0)
	if b.Outcome != retrystate.OutcomeOK {
		t.Fatalf("begin: %+v", b)
	}
	f, err := s.Fail(ctxb, retrystate.FailParams{RunID: id, Index: 0, Token: "tok", Error: "e",
		Class: retrystate.ClassTransient,
		Delay: time.Second, Retention: time.Hour, Now: t0})
	if err != nil || f.Dispatch == nil {
		t.Fatalf("fail: %+v %v", f, err)
	}
	run, _ = s.Run(ctxb, id)
	if want := tasks.ID(id, 0, 2, 0); run.Steps[0].Task != want {
		t.Errorf("retry task %q, want %q", run.Steps[0].Task, want)
	}
	if !f.Dispatch.DueAt.Equal(t0.Add(time.Second)) || f.Dispatch.Attempt != 2 {
		t.Errorf("retry dispatch %+v", f.Dispatch)
	}
}

// Seed a state, act, check the state: the fenced transitions.
func TestFencing(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	id := runID(2)
	create(t, s, id, t0, "a", "b")
	task := tasks.ID(id, 0, 1, 0)

	if b := begin(t, s, id, 0, "other_task", "x", t0); b.Outcome != retrystate.OutcomeStale || b.Dispatch == nil ||
		b.Dispatch.Name != "a" || b.Dispatch.Attempt != 1 {
		t.Fatalf("wrong task ID: %+v", b)
	}
	if b := begin(t, s, id, 0, task, "tok1", t0); b.Outcome != retrystate.OutcomeOK || b.Started.Attempt != 1 || b.Started.Used != 1 {
		t.Fatalf("begin: %+v", b)
	}
	// Another delivery while the fence lives: busy, for the fence's time left.
	if b := begin(t, s, id, 0, task, "tok2", t0.Add(4*time.Second)); b.Outcome != retrystate.OutcomeBusy || b.Wait != 6*time.Second {
		t.Fatalf("duplicate: %+v", b)
	}
	// Renewal by the owner only.
	if r, _ := s.Renew(ctxb, retrystate.RenewParams{RunID: id, Token: "tok2", TTL: 10 * time.Second,
		Now: t0.Add(5 * time.Second)}); r != retrystate.FenceLost {
		t.Errorf("renew by a stranger: %v", r)
	}
	if r, _ := s.Renew(ctxb, retrystate.RenewParams{RunID: id, Token: "tok1", TTL: 10 * time.Second,
		Now: t0.Add(5 * time.Second)}); r != retrystate.Renewed {
		t.Errorf("renew by the owner: %v", r)
	}
	// After the fence expires, a delivery takes over: a crash, not an attempt.
	b := begin(t, s, id, 0, task, "tok3", t0.Add(16*time.Second))
	if b.Outcome != retrystate.OutcomeOK || !b.Started.Crashed || b.Started.Crashes != 1 || b.Started.Attempt != 1 {
		t.Fatalf("takeover: %+v", b)
	}
	// The old owner's results are fenced off and change nothing.
	if c, err := s.Complete(ctxb, retrystate.CompleteParams{RunID: id, Index: 0, Token: "tok1", Output: `"old"`,
		Now: t0.Add(17 * time.Second)}); err != nil || c.Outcome != retrystate.OutcomeFenced {
		t.Fatalf("stale complete: %+v %v", c, err)
	}
	if f, err := s.Fail(ctxb, retrystate.FailParams{RunID: id, Index: 0, Token: "tok1", Error: "e",
		Class: retrystate.ClassTransient, Now: t0.Add(17 * time.Second)}); err != nil || f.Outcome != retrystate.OutcomeFenced {
		t.Fatalf("stale fail: %+v %v", f, err)
	}
	c, err := s.Complete(ctxb, retrystate.CompleteParams{RunID: id, Index: 0, Token: "tok3", Output: `"new"`,
		Now: t0.Add(18 * time.Second)})
	if err != nil || c.Outcome != retrystate.OutcomeNext || c.Dispatch.Name != "b" || c.Dispatch.Attempt != 1 {
		t.Fatalf("complete: %+v %v", c, err)
	}
	run, _ := s.Run(ctxb, id)
	a := run.Steps[0]
	if a.Status != retrystate.StepSucceeded || a.Output != `"new"` || a.AttemptsStarted != 1 || a.Crashes != 1 || a.Fence != "done:tok3" {
		t.Errorf("step a: %+v", a)
	}
	// The same complete again (its first reply lost) is known as done, and
	// writes nothing; another attempt's is still fenced off.
	journalLen := len(mustJournal(t, s, id))
	if c, err := s.Complete(ctxb, retrystate.CompleteParams{RunID: id, Index: 0, Token: "tok3", Output: `"again"`,
		Now: t0.Add(19 * time.Second)}); err != nil || c.Outcome != retrystate.OutcomeDone || c.RunStatus != retrystate.StatusRunning {
		t.Fatalf("repeated complete: %+v %v", c, err)
	}
	if f, err := s.Fail(ctxb, retrystate.FailParams{RunID: id, Index: 0, Token: "tok1", Error: "e",
		Class: retrystate.ClassTransient, Now: t0.Add(19 * time.Second)}); err != nil || f.Outcome != retrystate.OutcomeFenced {
		t.Fatalf("stale fail after the complete: %+v %v", f, err)
	}
	if run, _ := s.Run(ctxb, id); run.Steps[0].Output != `"new"` || len(mustJournal(t, s, id)) != journalLen {
		t.Fatalf("a repeated complete wrote: output %s, journal %d -> %d", run.Steps[0].Output, journalLen,
			len(mustJournal(t, s, id)))
	}
	// A second crash of the same step exhausts max_crashes (1).
	taskB := tasks.ID(id, 1, 1, 0)
	if b := begin(t, s, id, 1, taskB, "t4", t0.Add(20*time.Second)); b.Outcome != retrystate.OutcomeOK || len(b.Started.Earlier) != 1 ||
		b.Started.Earlier[0] != (retrystate.Checkpoint{Name: "a", Output: `"new"`}) {
		t.Fatalf("begin b: %+v", b)
	}
	begin(t, s, id, 1, taskB, "t5", t0.Add(31*time.Second)) // crash 1: resumes
	b = begin(t, s, id, 1, taskB, "t6", t0.Add(42*time.Second))
	if b.Outcome != retrystate.OutcomeRunFailed || b.Code != retrystate.CodeCrashBudgetExhausted {
		t.Fatalf("second crash: %+v", b)
	}
	run, _ = s.Run(ctxb, id)
	if run.Status != retrystate.StatusFailed || !run.NeedsAttention || run.FailureCode != retrystate.CodeCrashBudgetExhausted {
		t.Errorf("run: %+v", run)
	}
	if b := begin(t, s, id, 1, taskB, "t7", t0.Add(43*time.Second)); b.Outcome != retrystate.OutcomeEnded || b.RunStatus != retrystate.StatusFailed {
		t.Errorf("delivery after the end: %+v", b)
	}
}

func TestDeadlineBetweenAttempts(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	id := runID(3)
	_, err := s.CreateRun(ctxb, retrystate.NewRun{ID: id, Workflow: "wf", Input: "{}", Now: t0,
		RunTimeout: 5 * time.Second, Steps: []retrystate.NewStep{{Name: "a", MaxAttempts: 5, MaxCrashes: 1, Policy: "{}"}}})
	if err != nil {
		t.Fatal(err)
	}
	task := tasks.ID(id, 0, 1, 0)
	if b := begin(t, s, id, 0, task, "t", t0); b.Outcome != retrystate.OutcomeOK || !b.Started.Deadline.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("begin: %+v", b)
	}
	// A retry due after the deadline is not scheduled: the run times out now.
	f, err := s.Fail(ctxb, retrystate.FailParams{RunID: id, Index: 0, Token: "t", Error: "slow",
		Class: retrystate.ClassTransient,
		Delay: 6 * time.Second, Now: t0.Add(time.Second)})
	if err != nil || f.Outcome != retrystate.OutcomeRunFailed || f.Code != retrystate.CodeRunTimeout {
		t.Fatalf("fail: %+v %v", f, err)
	}
}

func TestListPagesNewestFirst(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	var want []string
	for i := range 7 {
		id := runID(100 + i)
		// Two runs share each millisecond, to exercise the cursor's tie-break.
		create(t, s, id, t0.Add(time.Duration(i/2)*time.Millisecond), "a")
		want = append([]string{id}, want...)
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		runs, next, err := s.ListRuns(ctxb, retrystate.ListQuery{Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			got = append(got, r.ID)
		}
		if next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		cursor = next
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("listed %v\nwant     %v", got, want)
	}
	if _, _, err := s.ListRuns(ctxb, retrystate.ListQuery{Cursor: "garbage"}); !errors.Is(err, retrystate.ErrBadCursor) {
		t.Errorf("bad cursor: %v", err)
	}
	pending, _, _ := s.ListRuns(ctxb, retrystate.ListQuery{Status: retrystate.StatusPending})
	running, _, _ := s.ListRuns(ctxb, retrystate.ListQuery{Status: retrystate.StatusRunning})
	if len(pending) != 7 || len(running) != 0 {
		t.Errorf("by status: %d pending, %d running", len(pending), len(running))
	}
}

func TestFinishedRunsExpire(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	id := runID(4)
	_, err := s.CreateRun(ctxb, retrystate.NewRun{ID: id, Workflow: "wf", Input: "{}", Now: t0,
		IdempotencyKey: "k1", Steps: []retrystate.NewStep{{Name: "a", MaxAttempts: 1, MaxCrashes: 1, Policy: "{}"}}})
	if err != nil {
		t.Fatal(err)
	}
	begin(t, s, id, 0, tasks.ID(id, 0, 1, 0), "t", t0)
	if _, err := s.Complete(ctxb, retrystate.CompleteParams{RunID: id, Index: 0, Token: "t", Output: "1",
		Retention: time.Hour, Now: t0}); err != nil {
		t.Fatal(err)
	}
	keys, err := rdb.Keys(ctxb, "cairn:{"+s.Queue()+"}:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	perRun := 0
	for _, k := range keys {
		ttl, _ := rdb.PTTL(ctxb, k).Result()
		isIndex := len(k) > len("cairn:{"+s.Queue()+"}:idx") && k[:len("cairn:{"+s.Queue()+"}:idx")] == "cairn:{"+s.Queue()+"}:idx"
		switch {
		case isIndex || k == "cairn:{"+s.Queue()+"}:notifications":
			if ttl > 0 {
				t.Errorf("shared key %s expires", k)
			}
		default:
			perRun++
			if ttl <= 0 || ttl > time.Hour {
				t.Errorf("run key %s: TTL %s, want the retention", k, ttl)
			}
		}
	}
	if perRun != 3 { // run (steps included), journal, idempotency key
		t.Errorf("%d per-run keys (%v), want 3", perRun, keys)
	}
}

func TestNotificationsReadOn(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	for i := range 3 {
		id := runID(200 + i)
		create(t, s, id, t0, "a")
		if _, err := s.Cancel(ctxb, retrystate.CancelParams{RunID: id, Actor: "me", Retention: time.Hour,
			Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := s.Notifications(ctxb, "", 2)
	if err != nil || len(first) != 2 || first[0].Type != "run_cancelled" || first[0].RunID != runID(200) || first[0].Fields["actor"] != "me" {
		t.Fatalf("first page: %+v %v", first, err)
	}
	rest, err := s.Notifications(ctxb, first[1].ID, 10)
	if err != nil || len(rest) != 1 || rest[0].RunID != runID(202) {
		t.Fatalf("rest: %+v %v", rest, err)
	}
	if c, err := s.Cancel(ctxb, retrystate.CancelParams{RunID: runID(200), Actor: "me", Retention: time.Hour,
		Now: t0}); err != nil || c.Outcome != retrystate.OutcomeAlreadyCancelled {
		t.Errorf("second cancel: %+v %v", c, err)
	}
	if _, err := s.Cancel(ctxb, retrystate.CancelParams{RunID: runID(299), Actor: "me", Retention: time.Hour,
		Now: t0}); !errors.Is(err, retrystate.ErrRunNotFound) {
		t.Errorf("cancel unknown: %v", err)
	}
}

func mustJournal(t *testing.T, s *retrystate.Store, id string) []retrystate.Entry {
	t.Helper()
	es, err := s.Journal(ctxb, id)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// A create of a run ID that exists writes nothing and says so with
// ErrRunIDCollision (the outbox's replay of a create whose reply was lost).
func TestCreateOfAnExistingRunID(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	id := runID(1)
	create(t, s, id, t0, "a")
	_, err := s.CreateRun(ctxb, retrystate.NewRun{ID: id, Workflow: "other", Input: "{}", Now: t0,
		Steps: []retrystate.NewStep{{Name: "b", MaxAttempts: 1, MaxCrashes: 1, Timeout: time.Minute, Policy: "{}"}}})
	if !errors.Is(err, retrystate.ErrRunIDCollision) {
		t.Fatalf("second create: %v; want ErrRunIDCollision", err)
	}
	if wf, err := s.RunWorkflow(ctxb, id); err != nil || wf != "wf" {
		t.Fatalf("the run is now of %q (%v); want it unchanged", wf, err)
	}
}
