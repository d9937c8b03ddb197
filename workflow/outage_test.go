package workflow_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// loseDelivery does what asynq's dequeue does (asynq v0.26,
// internal/rdb.dequeueCmd) for a worker that never gets the reply: the
// queue's next pending task becomes active under a lease expiring at
// leaseExpiry, and nobody holds it. It returns the task's ID.
func loseDelivery(t *testing.T, rdb redis.UniversalClient, queue string, leaseExpiry time.Time) string {
	t.Helper()
	q := tasks.QueueKeys(queue)
	id, err := rdb.RPopLPush(ctxb, q.Pending(), q.Active()).Result()
	if err != nil {
		t.Fatalf("no pending task to lose: %v", err)
	}
	rdb.HSet(ctxb, q.Task(id), "state", "active")
	rdb.HDel(ctxb, q.Task(id), "pending_since")
	rdb.ZAdd(ctxb, q.Lease(), redis.Z{Score: float64(leaseExpiry.Unix()), Member: id})
	return id
}

// TestSweepFreesStalledDelivery: a step's task that asynq moved to active
// for a worker that never received it (the reply of the dequeue lost) is
// given a new dispatch by the sweep once its lease has gone StalledAfter
// without being extended: not before, not as a crash, and the old task,
// should asynq deliver it after its lease, runs nothing.
func TestSweepFreesStalledDelivery(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	r := newRig(t, twoSteps(func(context.Context, *workflow.StepContext) (any, error) {
		calls.Add(1)
		return "ok", nil
	}))
	run := mustStart(t, r.client, "two", nil)
	lost := loseDelivery(t, r.rdb, r.queue, r.clock.Now().Add(tasks.AsynqLeaseDuration))
	if lost != tasks.ID(run.ID, 0, 1, 0) {
		t.Fatalf("lost %s, want step a's task", lost)
	}

	// Just dequeued: a worker may be about to begin it.
	r.clock.Advance(7 * time.Second)
	if rep, err := r.rec.Sweep(ctxb); err != nil || rep.Total() != 0 {
		t.Fatalf("sweep 7s after the dequeue: %v %v", rep, err)
	}
	// Not extended for StalledAfter (8s): nobody has it.
	r.clock.Advance(2 * time.Second)
	rep, err := r.rec.Sweep(ctxb)
	if err != nil || rep.Repairs["stalled_delivery"] != 1 || rep.Total() != 1 {
		t.Fatalf("sweep 9s after the dequeue: %v %v", rep, err)
	}
	again := tasks.ID(run.ID, 0, 1, 1)
	if info, ok := r.taskExists(again); !ok || info.State != asynq.TaskStatePending {
		t.Fatalf("the new dispatch's task: %+v %v", info, ok)
	}
	// A second sweep finds the old task still active (asynq recovers it
	// later) and does nothing more.
	if rep, err := r.rec.Sweep(ctxb); err != nil || rep.Total() != 0 {
		t.Fatalf("second sweep: %v %v", rep, err)
	}
	// asynq delivers the old task after all: stale; the new one runs.
	if err := r.deliver(run.ID, "two", 0, "a", 1, 0); err != nil || calls.Load() != 0 {
		t.Fatalf("old task: %v, %d executions", err, calls.Load())
	}
	if err := r.deliver(run.ID, "two", 0, "a", 1, 1); err != nil || calls.Load() != 1 {
		t.Fatalf("new task: %v, %d executions", err, calls.Load())
	}
	got := r.get(run.ID)
	if a := got.Step("a"); a.Status != workflow.StepSucceeded || a.Crashes != 0 || a.Attempts != 1 {
		t.Errorf("step a: %+v", a)
	}
	evs, _ := r.client.Events(ctxb, run.ID)
	if ev := lastEvent(evs, workflow.EventRepair); ev == nil || ev.Details["kind"] != "stalled_delivery" {
		t.Errorf("repair journaled as %+v", ev)
	}
}

// TestSweepLeavesHeldDeliveries: a task whose lease its worker extends, or
// whose step was begun, is not stalled.
func TestSweepLeavesHeldDeliveries(t *testing.T) {
	t.Parallel()
	r := newRig(t, twoSteps(noop))
	held := mustStart(t, r.client, "two", nil)
	loseDelivery(t, r.rdb, r.queue, r.clock.Now().Add(tasks.AsynqLeaseDuration))
	begun := mustStart(t, r.client, "two", nil)
	task := loseDelivery(t, r.rdb, r.queue, r.clock.Now().Add(tasks.AsynqLeaseDuration))
	if _, err := r.store.Begin(ctxb, retrystate.BeginParams{RunID: begun.ID, Index: 0, TaskID: task, Token: "tok",
		FenceTTL: time.Minute, Now: r.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(20 * time.Second)
	// The worker holding the first task extends its lease, as asynq's
	// heartbeat does every 5s.
	r.rdb.ZAdd(ctxb, tasks.QueueKeys(r.queue).Lease(), redis.Z{Score: float64(r.clock.Now().Add(tasks.AsynqLeaseDuration).Unix()),
		Member: tasks.ID(held.ID, 0, 1, 0)})
	if rep, err := r.rec.Sweep(ctxb); err != nil || rep.Total() != 0 {
		t.Fatalf("sweep: %v %v", rep, err)
	}
}

// TestOutageGraceHoldsCrashChecks: when Redis answers again after the
// reconciler could not reach it, an attempt whose fence expired meanwhile is
// not counted as crashed for OutageGrace, so its live worker can save it;
// after the grace, one that nobody saved is.
func TestOutageGraceHoldsCrashChecks(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	clock := newFakeClock()
	const queue = "outage"
	eng, err := workflow.NewEngine(rdb, workflow.EngineConfig{Queue: queue, Clock: clock, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(twoSteps(noop)); err != nil {
		t.Fatal(err)
	}
	if err := eng.Publish(ctxb); err != nil {
		t.Fatal(err)
	}
	rec := eng.NewReconciler(workflow.ReconcilerConfig{OutageGrace: 5 * time.Second})
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Clock: clock})
	store := retrystate.New(rdb, queue)
	begin := func(id string) {
		t.Helper()
		if b, err := store.Begin(ctxb, retrystate.BeginParams{RunID: id, Index: 0, TaskID: tasks.ID(id, 0, 1, 0),
			Token:    "tok-" + id,
			FenceTTL: 10 * time.Second, Now: clock.Now()}); err != nil || b.Outcome != retrystate.OutcomeOK {
			t.Fatalf("begin: %+v %v", b, err)
		}
	}
	saved, dead := mustStart(t, client, "two", nil), mustStart(t, client, "two", nil)
	begin(saved.ID)
	begin(dead.ID)

	srv.Stop(t)
	clock.Advance(20 * time.Second) // both fences expire while Redis is away
	if _, err := rec.Sweep(ctxb); err == nil {
		t.Fatal("sweep with Redis stopped succeeded")
	}
	srv.Restart(t)
	rep, err := rec.Sweep(ctxb)
	if err != nil || !rep.RepairsHeld || rep.Total() != 0 {
		t.Fatalf("first sweep after the outage: %+v %v", rep, err)
	}
	// The live worker saves its attempt within the grace.
	if c, err := store.Complete(ctxb, retrystate.CompleteParams{RunID: saved.ID, Index: 0, Token: "tok-" + saved.ID,
		Output: "1", Now: clock.Now()}); err != nil || c.Outcome == retrystate.OutcomeFenced {
		t.Fatalf("the live worker's checkpoint: %+v %v", c, err)
	}
	clock.Advance(5 * time.Second)
	rep, err = rec.Sweep(ctxb)
	if err != nil || rep.RepairsHeld || rep.Repairs["crashed_attempt"] != 1 {
		t.Fatalf("sweep after the grace: %+v %v", rep, err)
	}
	for id, crashes := range map[string]int{saved.ID: 0, dead.ID: 1} {
		r, err := client.Get(ctxb, id)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Step("a").Crashes; got != crashes {
			t.Errorf("run %s: %d crashes, want %d", id, got, crashes)
		}
	}
}

// TestAsynqLease: asynq gives a worker a lease of tasks.AsynqLeaseDuration
// on a task it dequeues, scored in Unix seconds in asynq:{q}:lease (what the
// sweep reads to find stalled deliveries).
func TestAsynqLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started, release := make(chan struct{}), make(chan struct{})
	srv := asynq.NewServerFromRedisClient(e.rdb, asynq.Config{Queues: map[string]int{e.queue: 1}, Concurrency: 1,
		Logger: asynqLogger{}, LogLevel: asynq.FatalLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc("lease", func(context.Context, *asynq.Task) error {
		close(started)
		<-release
		return nil
	})
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	before := time.Now()
	if _, err := asynq.NewClientFromRedisClient(e.rdb).Enqueue(asynq.NewTask("lease", nil), asynq.Queue(e.queue),
		asynq.TaskID("leased")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the task was not delivered")
	}
	score, err := e.rdb.ZScore(ctxb, tasks.QueueKeys(e.queue).Lease(), "leased").Result()
	after := time.Now()
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := before.Add(tasks.AsynqLeaseDuration).Unix(), after.Add(tasks.AsynqLeaseDuration).Unix()
	if int64(score) < lo || int64(score) > hi {
		t.Errorf("lease expires at %d; want within [%d, %d] (dequeue time + %s)", int64(score), lo, hi, tasks.AsynqLeaseDuration)
	}
}

// asynqLogger discards asynq's own logs.
type asynqLogger struct{}

func (asynqLogger) Debug(...any) {}
func (asynqLogger) Info(...any)  {}
func (asynqLogger) Warn(...any)  {}
func (asynqLogger) Error(...any) {}
func (asynqLogger) Fatal(...any) {}

// freezeHook makes one Redis command of the test's client wait out a
// frozen Redis: when the command it is armed for is sent, the clock moves on
// by the freeze before the command goes through, as if Redis had been
// stopped (SIGSTOP) while the command waited for its reply, and then
// answered. Nothing else happens meanwhile: no call fails.
type freezeHook struct {
	clock  *fakeClock
	freeze time.Duration
	mu     sync.Mutex
	match  func(args []any) bool // nil: disarmed
}

// arm makes the next command match picks wait out the freeze.
func (h *freezeHook) arm(match func(args []any) bool) {
	h.mu.Lock()
	h.match = match
	h.mu.Unlock()
}

// fired reports whether the armed command was sent.
func (h *freezeHook) fired() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.match == nil
}

func (h *freezeHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *freezeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		if h.match != nil && h.match(cmd.Args()) {
			h.match = nil
			h.clock.Advance(h.freeze)
		}
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook holds up a pipeline when any of its commands matches.
func (h *freezeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		for _, cmd := range cmds {
			if h.match != nil && h.match(cmd.Args()) {
				h.match = nil
				h.clock.Advance(h.freeze)
			}
		}
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// cmdOn matches a command named name (evalsha matches a script's run) whose
// arguments include key, and, when last is not nil, whose last argument is
// last.
func cmdOn(name, key string, last any) func(args []any) bool {
	return func(args []any) bool {
		if len(args) == 0 || !strings.EqualFold(fmt.Sprint(args[0]), name) {
			return false
		}
		if last != nil && fmt.Sprint(args[len(args)-1]) != fmt.Sprint(last) {
			return false
		}
		for _, a := range args[1:] {
			if fmt.Sprint(a) == key {
				return true
			}
		}
		return false
	}
}

// freezeRig is an engine, its reconciler and a client on the test's queue,
// on a client of their own whose commands a freezeHook can hold up.
type freezeRig struct {
	clock  *fakeClock
	hook   *freezeHook
	rdb    *redis.Client
	queue  string
	eng    *workflow.Engine
	rec    *workflow.Reconciler
	client *workflow.Client
	store  *retrystate.Store
}

// newFreezeRig returns a freezeRig whose engine has the fence TTL fence
// and whose hook's freeze lasts freeze, with defs registered and published.
func newFreezeRig(t *testing.T, fence, freeze time.Duration, defs ...workflow.Definition) *freezeRig {
	t.Helper()
	e := newEnv(t)
	clock := newFakeClock()
	hook := &freezeHook{clock: clock, freeze: freeze}
	rdb := redis.NewClient(&redis.Options{Addr: e.rdb.Options().Addr})
	rdb.AddHook(hook)
	t.Cleanup(func() { _ = rdb.Close() })
	eng := publishedEngine(t, rdb, workflow.EngineConfig{Queue: e.queue, Clock: clock, Logger: e.log, FenceTTL: fence}, defs...)
	return &freezeRig{clock: clock, hook: hook, rdb: rdb, queue: e.queue, eng: eng,
		rec:    eng.NewReconciler(workflow.ReconcilerConfig{OutageGrace: 5 * time.Second}),
		client: workflow.NewClient(rdb, workflow.ClientConfig{Queue: e.queue, Clock: clock}),
		store:  retrystate.New(rdb, e.queue)}
}

// TestOutageGraceWhicheverCallWaited: Redis freezes (SIGSTOP) for longer
// than the fence of a live attempt while one call of the reconciler waits
// for its reply, and then answers: no call fails (a frozen Redis answers
// late). Whichever call it was, not only the lock's, the reconciler must
// start its OutageGrace: the next sweep, right after the thaw (the sweep
// ticker fired meanwhile), and the rest of the call's own sweep or pass
// must not charge the expired fence as a crash while the live worker saves
// its attempt. TestRedisFreeze flaked so: attempt_crashed
// detected_by=reconciler at the thaw.
func TestOutageGraceWhicheverCallWaited(t *testing.T) {
	t.Parallel()
	const fence = 10 * time.Second
	cases := []struct {
		name string
		pass bool // the call is a full pass's (else a sweep's)
		// match picks the call that waits out the freeze, from the test's
		// queue q.
		match func(q string) func(args []any) bool
	}{
		// The sweep's first read, without the lock (Store.SweepDue: one
		// entry of each index, in one pipeline).
		{"sweep check", false, func(q string) func([]any) bool {
			return cmdOn("zrangebyscore", "cairn:{"+q+"}:idx:fences", 1)
		}},
		{"sweep lock", false, func(q string) func([]any) bool { return cmdOn("set", "cairn:{"+q+"}:lock:sweep", nil) }},
		{"expired fences", false, func(q string) func([]any) bool {
			return cmdOn("zrangebyscore", "cairn:{"+q+"}:idx:fences", 1000)
		}},
		{"stalled deliveries", false, func(q string) func([]any) bool {
			return cmdOn("zrangebyscore", tasks.QueueKeys(q).Lease(), 1000)
		}},
		// (The unlock is the lock script run with a TTL of 0.)
		{"sweep unlock", false, func(q string) func([]any) bool { return cmdOn("evalsha", "cairn:{"+q+"}:lock:sweep", 0) }},
		{"pass count", true, func(q string) func([]any) bool { return cmdOn("zcard", "cairn:{"+q+"}:idx:active", nil) }},
		{"pass deadlines", true, func(q string) func([]any) bool {
			return cmdOn("zrangebyscore", "cairn:{"+q+"}:idx:deadlines", nil)
		}},
		// After these, the pass checks the live attempt's run, idle since
		// its begin, whose fence has expired: a crash, unless held.
		{"pass scheduled walk", true, func(q string) func([]any) bool {
			return cmdOn("zrangebyscore", "cairn:{"+q+"}:idx:scheduled", nil)
		}},
		{"pass idle walk", true, func(q string) func([]any) bool {
			return cmdOn("zrangebyscore", "cairn:{"+q+"}:idx:active", nil)
		}},
	}
	// The control: the same fence expiring while Redis answered every call
	// promptly is a crash, charged by the first sweep.
	t.Run("no freeze", func(t *testing.T) {
		t.Parallel()
		f := newFreezeRig(t, fence, 0, twoSteps(noop))
		run := mustStart(t, f.client, "two", nil)
		if b, err := f.store.Begin(ctxb, retrystate.BeginParams{RunID: run.ID, Index: 0, TaskID: tasks.ID(run.ID, 0, 1, 0),
			Token: "dead", FenceTTL: fence, Now: f.clock.Now()}); err != nil || b.Outcome != retrystate.OutcomeOK {
			t.Fatalf("begin: %+v %v", b, err)
		}
		f.clock.Advance(2 * fence)
		if rep, err := f.rec.Sweep(ctxb); err != nil || rep.RepairsHeld || rep.Repairs["crashed_attempt"] != 1 {
			t.Fatalf("sweep: %+v %v; want the crash charged", rep, err)
		}
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFreezeRig(t, fence, 2*fence, twoSteps(noop))
			clock, hook, rec, client, store, rdb := f.clock, f.hook, f.rec, f.client, f.store, f.rdb
			run := mustStart(t, client, "two", nil)
			// A live worker runs step a (it renews its fence until Redis freezes).
			if b, err := store.Begin(ctxb, retrystate.BeginParams{RunID: run.ID, Index: 0, TaskID: tasks.ID(run.ID, 0, 1, 0),
				Token: "live", FenceTTL: fence, Now: clock.Now()}); err != nil || b.Outcome != retrystate.OutcomeOK {
				t.Fatalf("begin: %+v %v", b, err)
			}
			if k := "cairn:{" + f.queue + "}:idx:fences"; rdb.Exists(ctxb, k).Val() != 1 {
				t.Fatalf("no key %s: the test's key names are stale", k)
			}
			if !c.pass {
				// A sweep takes its lock, and makes the calls after its
				// first read, only when something is due: a task of another
				// kind (not a step's) whose lease nobody extends.
				if err := rdb.ZAdd(ctxb, tasks.QueueKeys(f.queue).Lease(),
					redis.Z{Score: float64(clock.Now().Add(-time.Minute).Unix()), Member: "not-a-step"}).Err(); err != nil {
					t.Fatal(err)
				}
			}

			hook.arm(c.match(f.queue))
			var rep workflow.Report
			var err error
			if c.pass {
				rep, err = rec.Pass(ctxb)
			} else {
				rep, err = rec.Sweep(ctxb)
			}
			if !hook.fired() {
				t.Fatal("the call to freeze on was not made: the test's command names are stale")
			}
			if err != nil || rep.Repairs["crashed_attempt"] != 0 {
				t.Fatalf("the %s whose call waited out the freeze charged a crash: %+v %v", map[bool]string{true: "pass", false: "sweep"}[c.pass], rep, err)
			}
			// The sweep ticker fired during the freeze: the next sweep comes
			// at once. The fence expired a fence TTL ago; its worker is
			// alive and about to save.
			rep, err = rec.Sweep(ctxb)
			if err != nil || !rep.RepairsHeld || rep.Total() != 0 {
				t.Fatalf("sweep right after the thaw: %+v %v; want the repairs held (OutageGrace)", rep, err)
			}
			if res, err := store.Complete(ctxb, retrystate.CompleteParams{RunID: run.ID, Index: 0, Token: "live",
				Output: "1", Now: clock.Now()}); err != nil || res.Outcome == retrystate.OutcomeFenced {
				t.Fatalf("the live worker's checkpoint: %+v %v", res, err)
			}
			clock.Advance(5 * time.Second)
			if rep, err := rec.Sweep(ctxb); err != nil || rep.RepairsHeld || rep.Total() != 0 {
				t.Fatalf("sweep after the grace: %+v %v", rep, err)
			}
			got, err := client.Get(ctxb, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if a := got.Step("a"); a.Crashes != 0 || a.Status != workflow.StepSucceeded {
				t.Errorf("step a: %s, %d crashes; want succeeded, none", a.Status, a.Crashes)
			}
		})
	}
}

// beginOf matches the begin of task `task` (its ID is among the script's
// arguments).
func beginOf(task string) func(args []any) bool {
	return func(args []any) bool {
		if len(args) == 0 || !strings.EqualFold(fmt.Sprint(args[0]), "evalsha") {
			return false
		}
		for _, a := range args {
			if fmt.Sprint(a) == task {
				return true
			}
		}
		return false
	}
}

// TestSlowBeginRenewsAtOnce: a begin that waited out a freeze of more than
// a third of the fence TTL answers with a fence taken when it was asked,
// already old: the heartbeat renews it at once, not a third of the TTL
// after the answer, while the reconciler would find it expired (the body
// must be running the whole time under a fence that is valid in Redis).
func TestSlowBeginRenewsAtOnce(t *testing.T) {
	t.Parallel()
	// The fence TTL is long in real time: without the fix, the first
	// renewal would come 20s after the begin's answer.
	const fence = time.Minute
	started, release := make(chan struct{}), make(chan struct{})
	f := newFreezeRig(t, fence, 50*time.Second, twoSteps(func(ctx context.Context, _ *workflow.StepContext) (any, error) {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "ok", ctx.Err()
	}))
	run := mustStart(t, f.client, "two", nil)
	task := tasks.ID(run.ID, 0, 1, 0)
	f.hook.arm(beginOf(task))
	done := make(chan error, 1)
	go func() {
		p := tasks.Step{RunID: run.ID, Workflow: "two", Index: 0, Name: "a", Attempt: 1}
		done <- f.eng.ProcessTask(ctxb, asynq.NewTask(tasks.TypeStep, p.Encode()))
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the step body did not run: %v", err)
	}
	if !f.hook.fired() {
		t.Fatal("the begin did not wait out the freeze")
	}
	// The fence the begin took expires 10s (fake) from now; the heartbeat
	// renews it for a whole TTL from now.
	key := "cairn:{" + f.queue + "}:run:" + run.ID
	testkit.Eventually(t, 10*time.Second, "the fence renewed for a TTL from the begin's answer", func() bool {
		ms, err := f.rdb.HGet(ctxb, key, "s0.fence_expires_at").Int64()
		return err == nil && time.UnixMilli(ms).After(f.clock.Now().Add(fence/2))
	})
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, err := f.client.Get(ctxb, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a := got.Step("a"); a.Status != workflow.StepSucceeded || a.Crashes != 0 {
		t.Errorf("step a: %s, %d crashes", a.Status, a.Crashes)
	}
}

// TestLateBeginHandsBack: a begin that answers after the fence it took
// expired (it waited out a freeze longer than the fence TTL) does not run
// the step body, whose step another delivery may own by now: the attempt is
// handed back (interrupted, resumed under a new dispatch), spending no
// budget, and the new dispatch runs it.
func TestLateBeginHandsBack(t *testing.T) {
	t.Parallel()
	const fence = 10 * time.Second
	var calls atomic.Int32
	f := newFreezeRig(t, fence, fence+time.Second, twoSteps(func(context.Context, *workflow.StepContext) (any, error) {
		calls.Add(1)
		return "ok", nil
	}))
	run := mustStart(t, f.client, "two", nil)
	f.hook.arm(beginOf(tasks.ID(run.ID, 0, 1, 0)))
	deliver := func(gen int) error {
		p := tasks.Step{RunID: run.ID, Workflow: "two", Index: 0, Name: "a", Attempt: 1, Gen: gen}
		return f.eng.ProcessTask(ctxb, asynq.NewTask(tasks.TypeStep, p.Encode()))
	}
	if err := deliver(0); err != nil {
		t.Fatal(err)
	}
	if !f.hook.fired() || calls.Load() != 0 {
		t.Fatalf("begin waited out the freeze: %v; body ran %d times, want 0", f.hook.fired(), calls.Load())
	}
	evs, err := f.client.Events(ctxb, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := countEvents(evs, workflow.EventAttemptInterrupted, "a"); n != 1 {
		t.Fatalf("%d attempt_interrupted events, want 1", n)
	}
	if err := deliver(1); err != nil || calls.Load() != 1 {
		t.Fatalf("the new dispatch: %v, body ran %d times", err, calls.Load())
	}
	got, err := f.client.Get(ctxb, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a := got.Step("a"); a.Status != workflow.StepSucceeded || a.Crashes != 0 || a.Attempts != 1 {
		t.Errorf("step a: %s, %d crashes, %d attempts; want succeeded, none, 1", a.Status, a.Crashes, a.Attempts)
	}
}
