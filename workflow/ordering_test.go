package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// gatedSteps is a one-step workflow whose step blocks until the test lets
// the run go, and records the order runs started in and how many ran at once.
// A run whose input has fail_attempts n fails permanently on its attempts up
// to n.
type gatedSteps struct {
	mu      sync.Mutex
	started []string
	running map[string]bool
	maxConc int
	release map[string]chan struct{}
}

func newGatedSteps() *gatedSteps {
	return &gatedSteps{running: map[string]bool{}, release: map[string]chan struct{}{}}
}

func (g *gatedSteps) ch(run string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.release[run]
	if !ok {
		c = make(chan struct{})
		g.release[run] = c
	}
	return c
}

// let lets run's step finish (again: a no-op).
func (g *gatedSteps) let(run string) {
	c := g.ch(run)
	select {
	case <-c:
	default:
		close(c)
	}
}

func (g *gatedSteps) body(ctx context.Context, sc *workflow.StepContext) (any, error) {
	g.mu.Lock()
	g.started = append(g.started, sc.RunID)
	g.running[sc.RunID] = true
	if n := len(g.running); n > g.maxConc {
		g.maxConc = n
	}
	g.mu.Unlock()
	var in struct {
		FailAttempts int `json:"fail_attempts"`
	}
	_ = jsonUnmarshal(sc.Input, &in)
	failing := sc.Attempt <= in.FailAttempts
	defer func() {
		g.mu.Lock()
		delete(g.running, sc.RunID)
		g.mu.Unlock()
	}()
	if failing {
		return nil, workflow.Permanent(errors.New("injected permanent failure"))
	}
	select {
	case <-g.ch(sc.RunID):
		return map[string]string{"run": sc.RunID}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (g *gatedSteps) isRunning(run string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running[run]
}

func (g *gatedSteps) startOrder() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.started...)
}

func gatedDef(name string, g *gatedSteps, ord *workflow.Ordering, maxRunning int) workflow.Definition {
	return workflow.Definition{Name: name, Ordering: ord, MaxRunning: maxRunning,
		Policy: workflow.Policy{MaxAttempts: 1},
		Steps:  []workflow.Step{{Name: "only", Run: g.body}}}
}

func startKeyed(t *testing.T, c *workflow.Client, wf, key string) *workflow.Run {
	t.Helper()
	return startKeyedInput(t, c, wf, key, nil)
}

// failOnce is the input of a run whose first attempt fails permanently.
var failOnce = map[string]int{"fail_attempts": 1}

func startKeyedInput(t *testing.T, c *workflow.Client, wf, key string, input any) *workflow.Run {
	t.Helper()
	run, err := c.Start(ctxb, wf, input, &workflow.StartOptions{OrderingKey: key, Owner: "tester"})
	if err != nil {
		t.Fatalf("start %s key %q: %v", wf, key, err)
	}
	return run
}

func (e *env) get(id string) *workflow.Run {
	e.t.Helper()
	r, err := e.client.Get(ctxb, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func wantWaiting(t *testing.T, r *workflow.Run, key string, pos int) {
	t.Helper()
	if r.Status != workflow.StatusPending || r.WaitingFor == nil || r.WaitingFor.OrderingKey != key ||
		r.WaitingFor.Position != pos || r.OrderingKey != key {
		t.Fatalf("run %s: status %s ordering_key %q waiting_for %+v; want pending, waiting in %q at %d",
			r.ID, r.Status, r.OrderingKey, r.WaitingFor, key, pos)
	}
}

// TestOrderingKeyOneAfterAnother: runs with one key start strictly in start
// order, one at a time, each only when the one before ended; another key's
// run is not held up; a waiting run shows its place in the line.
func TestOrderingKeyOneAfterAnother(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := newGatedSteps()
	e.startWorker(workflow.WorkerConfig{}, gatedDef("ord", g, nil, 0))

	a := startKeyed(t, e.client, "ord", "acct-1")
	b := startKeyed(t, e.client, "ord", "acct-1")
	c := startKeyed(t, e.client, "ord", "acct-1")
	other := startKeyed(t, e.client, "ord", "acct-2")
	if a.WaitingFor != nil {
		t.Fatalf("first run of the key waits: %+v", a.WaitingFor)
	}
	wantWaiting(t, b, "acct-1", 1)
	wantWaiting(t, c, "acct-1", 2)
	e.eventually(10*time.Second, "first run and the other key's run running", func() bool {
		return g.isRunning(a.ID) && g.isRunning(other.ID)
	})
	wantWaiting(t, e.get(b.ID), "acct-1", 1)

	line, err := e.client.OrderingKey(ctxb, workflow.KeyLine{Key: "acct-1", Owner: "tester"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(line.Active) != 1 || line.Active[0].ID != a.ID || len(line.Waiting) != 2 || line.Waiting[0].ID != b.ID ||
		line.Waiting[1].ID != c.ID || line.WaitingTotal != 2 || line.Waiting[1].WaitingFor.Position != 2 {
		t.Fatalf("key line: %+v", line)
	}
	if own, err := e.client.OrderingKey(ctxb, workflow.KeyLine{Key: "acct-1", Owner: "someone-else"}, 0); err != nil || len(own.Active)+len(own.Waiting) != 0 {
		t.Fatalf("another owner sees %+v, %v", own, err)
	}

	for i, r := range []*workflow.Run{a, b, c} {
		e.eventually(10*time.Second, "run "+r.ID+" running", func() bool { return g.isRunning(r.ID) })
		if i+1 < 3 {
			wantWaiting(t, e.get([]*workflow.Run{a, b, c}[i+1].ID), "acct-1", 1)
		}
		g.let(r.ID)
		if got := e.wait(r.ID, 10*time.Second); got.Status != workflow.StatusSucceeded {
			t.Fatalf("run %d: %s", i, got.Status)
		}
	}
	g.let(other.ID)
	e.wait(other.ID, 10*time.Second)

	var keyed []string
	for _, id := range g.startOrder() {
		if id != other.ID {
			keyed = append(keyed, id)
		}
	}
	if fmt.Sprint(keyed) != fmt.Sprint([]string{a.ID, b.ID, c.ID}) {
		t.Fatalf("start order %v; want %v", keyed, []string{a.ID, b.ID, c.ID})
	}
	evs := e.events(b.ID)
	if countEvents(evs, "run_waiting", "") != 1 || countEvents(evs, "run_admitted", "") != 1 {
		t.Fatalf("b's journal lacks run_waiting / run_admitted: %+v", evs)
	}
	if line, _ := e.client.OrderingKey(ctxb, workflow.KeyLine{Key: "acct-1", Owner: "tester"}, 0); len(line.Active)+len(line.Waiting) != 0 {
		t.Fatalf("key not empty at the end: %+v", line)
	}
}

// TestOrderingKeyScopedByOwner: ordering keys are scoped by owner, as
// idempotency keys are: another owner's equal key is another line, whose
// runs neither wait for nor show in this one. A run with SharedOrdering,
// or without an owner, joins the key's shared line, which runs of every
// owner join. A waiting run names the runs that hold its line, and its
// journal names the key as it was given.
func TestOrderingKeyScopedByOwner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := newGatedSteps()
	e.startWorker(workflow.WorkerConfig{}, gatedDef("ord", g, nil, 0))
	start := func(owner string, shared bool) *workflow.Run {
		t.Helper()
		run, err := e.client.Start(ctxb, "ord", nil, &workflow.StartOptions{OrderingKey: "k", Owner: owner, SharedOrdering: shared})
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
	alice1, bob1, alice2 := start("alice", false), start("bob", false), start("alice", false)
	if alice1.WaitingFor != nil || bob1.WaitingFor != nil || alice1.OrderingShared {
		t.Fatalf("the first run of each owner's line waits: alice %+v, bob %+v", alice1.WaitingFor, bob1.WaitingFor)
	}
	wantWaiting(t, alice2, "k", 1)
	if w := e.get(alice2.ID).WaitingFor; w.Shared || strings.Join(w.HeldBy, ",") != alice1.ID {
		t.Errorf("alice's second run waits for %+v, want her line, held by %s", w, alice1.ID)
	}
	// The shared line: a run without an owner and runs that ask for it.
	none, bobShared, aliceShared := start("", false), start("bob", true), start("alice", true)
	if none.WaitingFor != nil || !none.OrderingShared || !bobShared.OrderingShared {
		t.Fatalf("shared line: first run %+v waits for %+v", none, none.WaitingFor)
	}
	wantWaiting(t, bobShared, "k", 1)
	wantWaiting(t, aliceShared, "k", 2)
	if w := e.get(aliceShared.ID).WaitingFor; !w.Shared || strings.Join(w.HeldBy, ",") != none.ID {
		t.Errorf("alice's shared run waits for %+v, want the shared line held by %s", w, none.ID)
	}
	lines := map[string]workflow.KeyLine{
		"alice": {Key: "k", Owner: "alice"}, "bob": {Key: "k", Owner: "bob"},
		"shared": {Key: "k", Shared: true}, "no owner": {Key: "k"}, "alice shared": {Key: "k", Owner: "alice", Shared: true},
	}
	want := map[string]string{
		"alice": alice1.ID + " | " + alice2.ID, "bob": bob1.ID + " | ",
		"shared": none.ID + " | " + bobShared.ID + "," + aliceShared.ID,
	}
	want["no owner"], want["alice shared"] = want["shared"], want["shared"]
	for name, l := range lines {
		k, err := e.client.OrderingKey(ctxb, l, 0)
		if err != nil {
			t.Fatal(err)
		}
		var act, wait []string
		for _, r := range k.Active {
			act = append(act, r.ID)
		}
		for _, r := range k.Waiting {
			wait = append(wait, r.ID)
		}
		if got := strings.Join(act, ",") + " | " + strings.Join(wait, ","); got != want[name] ||
			k.Shared != (l.Shared || l.Owner == "") {
			t.Errorf("line %s: %s (shared %v), want %s", name, got, k.Shared, want[name])
		}
	}
	gates, _, err := e.client.Gates(ctxb, 0)
	if err != nil {
		t.Fatal(err)
	}
	var owners []string
	for _, gu := range gates {
		if gu.OrderingKey != "k" {
			t.Errorf("gate %+v: want ordering key k", gu)
		}
		owners = append(owners, gu.Owner)
	}
	slices.Sort(owners)
	if strings.Join(owners, ",") != ",alice,bob" {
		t.Errorf("gates in use are the lines of %q, want the shared line, alice's and bob's", owners)
	}
	for _, r := range []*workflow.Run{alice1, alice2, bob1, none, bobShared, aliceShared} {
		e.eventually(10*time.Second, "run "+r.ID+" running", func() bool { return g.isRunning(r.ID) })
		g.let(r.ID)
		e.wait(r.ID, 10*time.Second)
	}
	for _, ev := range e.events(aliceShared.ID) {
		if ev.Type == workflow.EventRunWaiting && ev.Details["gate"] != "k" {
			t.Errorf("run_waiting names gate %q, want the key k", ev.Details["gate"])
		}
	}
	for _, ev := range e.events(alice2.ID) {
		if ev.Type == workflow.EventRunWaiting && ev.Details["gate"] != "k" {
			t.Errorf("run_waiting of alice's line names gate %q, want the key k", ev.Details["gate"])
		}
	}
}

// TestOrderingKeyConcurrency: a key with concurrency 2 runs two at a time.
func TestOrderingKeyConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := newGatedSteps()
	e.startWorker(workflow.WorkerConfig{}, gatedDef("ord2", g, &workflow.Ordering{Concurrency: 2}, 0))
	var runs []*workflow.Run
	for range 5 {
		runs = append(runs, startKeyed(t, e.client, "ord2", "k"))
	}
	wantWaiting(t, e.get(runs[2].ID), "k", 1)
	e.eventually(10*time.Second, "two runs running", func() bool { return g.isRunning(runs[0].ID) && g.isRunning(runs[1].ID) })
	g.let(runs[1].ID)
	e.eventually(10*time.Second, "third run running", func() bool { return g.isRunning(runs[2].ID) })
	wantWaiting(t, e.get(runs[3].ID), "k", 1)
	for _, r := range runs {
		g.let(r.ID)
		e.wait(r.ID, 10*time.Second)
	}
	if g.maxConc > 2 {
		t.Fatalf("%d runs of the key ran at once; concurrency is 2", g.maxConc)
	}
}

// TestOrderingKeyBlockAndRelease: with on_failure block a failed run holds
// its key until it is recovered (or cancelled); with release the next run
// starts at once.
func TestOrderingKeyBlockAndRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := newGatedSteps()
	e.startWorker(workflow.WorkerConfig{}, gatedDef("blk", g, &workflow.Ordering{OnFailure: workflow.OnFailureBlock}, 0),
		gatedDef("rel", g, &workflow.Ordering{OnFailure: workflow.OnFailureRelease}, 0))

	// block, then recover.
	a := startKeyedInput(t, e.client, "blk", "b1", failOnce)
	b := startKeyed(t, e.client, "blk", "b1")
	if got := e.wait(a.ID, 10*time.Second); got.Status != workflow.StatusFailed {
		t.Fatalf("a: %s", got.Status)
	}
	wantWaiting(t, e.get(b.ID), "b1", 1)
	line, _ := e.client.OrderingKey(ctxb, workflow.KeyLine{Key: "b1", Owner: "tester"}, 0)
	if len(line.Active) != 1 || line.Active[0].ID != a.ID {
		t.Fatalf("the failed run does not hold the key: %+v", line)
	}
	if ttl := e.rdb.PTTL(ctxb, "cairn:{"+e.queue+"}:run:"+a.ID).Val(); ttl > 0 {
		t.Fatalf("a blocking failed run got a retention of %s", ttl)
	}
	if _, err := e.client.Recover(ctxb, a.ID, nil); err != nil {
		t.Fatal(err)
	}
	e.eventually(10*time.Second, "recovered run running", func() bool { return g.isRunning(a.ID) })
	wantWaiting(t, e.get(b.ID), "b1", 1)
	g.let(a.ID)
	e.wait(a.ID, 10*time.Second)
	e.eventually(10*time.Second, "b running after a recovered", func() bool { return g.isRunning(b.ID) })
	g.let(b.ID)
	e.wait(b.ID, 10*time.Second)

	// block, then cancel the failed run.
	c := startKeyedInput(t, e.client, "blk", "b2", failOnce)
	d := startKeyed(t, e.client, "blk", "b2")
	e.wait(c.ID, 10*time.Second)
	wantWaiting(t, e.get(d.ID), "b2", 1)
	cr, err := e.client.Cancel(ctxb, c.ID, nil)
	if err != nil || cr.Status != workflow.StatusCancelled {
		t.Fatalf("cancel of a blocking failed run: %v, %+v", err, cr)
	}
	e.eventually(10*time.Second, "d running after c cancelled", func() bool { return g.isRunning(d.ID) })
	g.let(d.ID)
	e.wait(d.ID, 10*time.Second)

	// release.
	x := startKeyedInput(t, e.client, "rel", "r1", failOnce)
	y := startKeyed(t, e.client, "rel", "r1")
	e.wait(x.ID, 10*time.Second)
	e.eventually(10*time.Second, "y running after x failed", func() bool { return g.isRunning(y.ID) })
	if _, err := e.client.Cancel(ctxb, x.ID, nil); !errors.Is(err, workflow.ErrRunFinished) {
		t.Fatalf("cancel of a failed run that released its key: %v; want ErrRunFinished", err)
	}
	// Recovering x while y holds the key puts x back in the line.
	rx, err := e.client.Recover(ctxb, x.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantWaiting(t, rx, "r1", 1)
	g.let(y.ID)
	e.wait(y.ID, 10*time.Second)
	e.eventually(10*time.Second, "x running again", func() bool { return g.isRunning(x.ID) })
	g.let(x.ID)
	if got := e.wait(x.ID, 10*time.Second); got.Status != workflow.StatusSucceeded {
		t.Fatalf("x: %s", got.Status)
	}
}

// TestCancelWaitingRun: cancelling a waiting run takes it out of the line.
func TestCancelWaitingRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := newGatedSteps()
	e.startWorker(workflow.WorkerConfig{}, gatedDef("cw", g, nil, 0))
	a := startKeyed(t, e.client, "cw", "k")
	b := startKeyed(t, e.client, "cw", "k")
	c := startKeyed(t, e.client, "cw", "k")
	if _, err := e.client.Cancel(ctxb, b.ID, nil); err != nil {
		t.Fatal(err)
	}
	wantWaiting(t, e.get(c.ID), "k", 1)
	g.let(a.ID)
	e.wait(a.ID, 10*time.Second)
	e.eventually(10*time.Second, "c running", func() bool { return g.isRunning(c.ID) })
	g.let(c.ID)
	e.wait(c.ID, 10*time.Second)
	for _, id := range g.startOrder() {
		if id == b.ID {
			t.Fatal("the cancelled waiting run ran")
		}
	}
}

// TestMaxRunning: at most max_running runs of a workflow are active at once;
// the others wait in start order and all finish.
func TestMaxRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := newGatedSteps()
	e.startWorker(workflow.WorkerConfig{}, gatedDef("lim", g, nil, 2))
	var runs []*workflow.Run
	for range 6 {
		r, err := e.client.Start(ctxb, "lim", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if w := e.get(runs[3].ID).WaitingFor; w == nil || w.WorkflowLimit != 2 || w.Position != 2 {
		t.Fatalf("fourth run waiting_for %+v; want workflow_limit 2 position 2", w)
	}
	for _, r := range runs {
		e.eventually(10*time.Second, "run running", func() bool { return g.isRunning(r.ID) })
		g.let(r.ID)
		e.wait(r.ID, 10*time.Second)
	}
	if g.maxConc > 2 {
		t.Fatalf("%d runs at once; max_running is 2", g.maxConc)
	}
	// The first two start at once; each later one is admitted in start
	// order, and only once the run two places before it has ended.
	var last time.Time
	for i := 2; i < len(runs); i++ {
		var admitted time.Time
		for _, ev := range e.events(runs[i].ID) {
			if ev.Type == "run_admitted" {
				admitted = ev.At
			}
		}
		before := e.get(runs[i-2].ID)
		if admitted.IsZero() || admitted.Before(last) || before.FinishedAt == nil || admitted.Before(*before.FinishedAt) {
			t.Fatalf("run %d admitted at %v (previous admission %v), run %d finished at %v", i, admitted, last, i-2,
				before.FinishedAt)
		}
		last = admitted
	}
}

// TestGateAdmissionWritesAsynqTask: the task a script writes for an
// admitted run is the one Go would write (tasks.Step.AsynqMessage), and a
// waiting run has no task at all. No worker runs: the test reads asynq's
// records.
func TestGateAdmissionWritesAsynqTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := newGatedSteps()
	def := gatedDef("msg-wf", g, nil, 0)
	def.Steps[0].Policy.StepTimeout = 90 * time.Second
	eng, err := workflow.NewEngine(e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(def); err != nil {
		t.Fatal(err)
	}
	if err := eng.Publish(ctxb); err != nil {
		t.Fatal(err)
	}
	a := startKeyed(t, e.client, "msg-wf", "k")
	b := startKeyed(t, e.client, "msg-wf", "k")
	want := tasks.Step{RunID: b.ID, Workflow: "msg-wf", Index: 0, Name: "only", Attempt: 1}
	if n := e.rdb.Exists(ctxb, tasks.QueueKeys(e.queue).Task(want.ID())).Val(); n != 0 {
		t.Fatal("a waiting run has a task")
	}
	if _, err := e.client.Cancel(ctxb, a.ID, nil); err != nil {
		t.Fatal(err)
	}
	rec := e.rdb.HGetAll(ctxb, tasks.QueueKeys(e.queue).Task(want.ID())).Val()
	if rec["state"] != "pending" || rec["msg"] != string(want.AsynqMessage(e.queue, 90*time.Second)) {
		t.Fatalf("admitted run's task %q state %q;\nmsg  %q\nwant %q", want.ID(), rec["state"], rec["msg"],
			want.AsynqMessage(e.queue, 90*time.Second))
	}
	pending := e.rdb.LRange(ctxb, tasks.QueueKeys(e.queue).Pending(), 0, -1).Val()
	found := false
	for _, id := range pending {
		found = found || id == want.ID()
	}
	if !found {
		t.Fatalf("admitted run's task not in the pending list %v", pending)
	}
	if r := e.get(b.ID); r.WaitingFor != nil || r.Status != workflow.StatusPending {
		t.Fatalf("admitted run: %s waiting_for %+v", r.Status, r.WaitingFor)
	}
}

// TestGateRepair: an admitted run whose record disappears (deleted by hand)
// frees its slot at the reconciler's next pass, which starts the next run
// (writes its task). No worker runs, so nothing else moves.
func TestGateRepair(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	eng, err := workflow.NewEngine(e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(gatedDef("rep", newGatedSteps(), nil, 0)); err != nil {
		t.Fatal(err)
	}
	if err := eng.Publish(ctxb); err != nil {
		t.Fatal(err)
	}
	a := startKeyed(t, e.client, "rep", "k")
	b := startKeyed(t, e.client, "rep", "k")
	wantWaiting(t, b, "k", 1)
	e.rdb.Del(ctxb, "cairn:{"+e.queue+"}:run:"+a.ID)
	rep, err := eng.NewReconciler(workflow.ReconcilerConfig{}).Pass(ctxb)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Locked || rep.Repairs["gate_slot_freed"] != 1 || rep.Repairs["gate_admitted"] != 1 {
		t.Fatalf("repairs %v (locked %v); want one slot freed and one run admitted", rep.Repairs, rep.Locked)
	}
	got := e.get(b.ID)
	task := tasks.Step{RunID: b.ID, Workflow: "rep", Name: "only", Attempt: 1}.ID()
	if got.WaitingFor != nil || e.rdb.HGet(ctxb, tasks.QueueKeys(e.queue).Task(task), "state").Val() != "pending" {
		t.Fatalf("b after the repair: waiting_for %+v, task %s not pending", got.WaitingFor, task)
	}
	if rep, err := eng.NewReconciler(workflow.ReconcilerConfig{}).Pass(ctxb); err != nil || rep.Total() != 0 {
		t.Fatalf("a second pass repaired %v, %v; want nothing", rep.Repairs, err)
	}
}

// TestOrderingKeyRefused: bad keys are refused before anything is written.
func TestOrderingKeyRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, key := range []string{string(make([]byte, 257)), "a\nb", "\xff"} {
		if _, err := e.client.Start(ctxb, "any", nil, &workflow.StartOptions{OrderingKey: key}); !errors.Is(err, workflow.ErrInvalidInput) {
			t.Errorf("key %q: %v; want ErrInvalidInput", key, err)
		}
	}
	if n := e.rdb.Exists(ctxb, "cairn:{"+e.queue+"}:idx:all").Val(); n != 0 {
		t.Fatal("a refused start wrote a run")
	}
	bad := []workflow.Definition{
		{Name: "x", Ordering: &workflow.Ordering{Concurrency: -1}, Steps: []workflow.Step{{Name: "s", Run: newGatedSteps().body}}},
		{Name: "x", Ordering: &workflow.Ordering{OnFailure: "later"}, Steps: []workflow.Step{{Name: "s", Run: newGatedSteps().body}}},
		{Name: "x", MaxRunning: -2, Steps: []workflow.Step{{Name: "s", Run: newGatedSteps().body}}},
	}
	for _, d := range bad {
		if err := d.Validate(); !errors.Is(err, workflow.ErrInvalidDefinition) {
			t.Errorf("%+v: %v; want ErrInvalidDefinition", d, err)
		}
	}
}

// TestKeysAndMaxRunningTogether: runs with ordering keys under a workflow
// max_running, some failing for good (on_failure: release): per key at most
// one runs at a time, in start order; never more than max_running at once;
// every run ends.
func TestKeysAndMaxRunningTogether(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var (
		mu      sync.Mutex
		perKey  = map[string]int{}
		total   int
		maxTot  int
		starts  = map[string][]string{} // key → run IDs in the order their step started
		badKeys []string
	)
	body := func(_ context.Context, sc *workflow.StepContext) (any, error) {
		var in struct {
			Key  string `json:"key"`
			Fail bool   `json:"fail"`
		}
		if err := jsonUnmarshal(sc.Input, &in); err != nil {
			return nil, workflow.Permanent(err)
		}
		mu.Lock()
		perKey[in.Key]++
		total++
		if perKey[in.Key] > 1 {
			badKeys = append(badKeys, in.Key)
		}
		maxTot = max(maxTot, total)
		starts[in.Key] = append(starts[in.Key], sc.RunID)
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // the step's work
		mu.Lock()
		perKey[in.Key]--
		total--
		mu.Unlock()
		if in.Fail {
			return nil, workflow.Permanent(errors.New("injected"))
		}
		return nil, nil
	}
	def := workflow.Definition{Name: "both", MaxRunning: 3, Ordering: &workflow.Ordering{OnFailure: workflow.OnFailureRelease},
		Policy: workflow.Policy{MaxAttempts: 1}, Steps: []workflow.Step{{Name: "one", Run: body}, {Name: "two", Run: body}}}
	e.startWorker(workflow.WorkerConfig{Concurrency: 8}, def)
	var runs []*workflow.Run
	want := map[string][]string{}
	for i := range 40 {
		key := fmt.Sprintf("k%d", i%6)
		r, err := e.client.Start(ctxb, "both", map[string]any{"key": key, "fail": i%7 == 3},
			&workflow.StartOptions{OrderingKey: key})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
		want[key] = append(want[key], r.ID)
	}
	for _, r := range runs {
		if got := e.wait(r.ID, 30*time.Second); !got.Terminal() {
			t.Fatalf("run %s: %s", r.ID, got.Status)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(badKeys) > 0 || maxTot > 3 {
		t.Fatalf("keys with two runs at once: %v; most runs at once %d (max_running 3)", badKeys, maxTot)
	}
	for key, ids := range want {
		var first []string // each run's first step start, in order
		seen := map[string]bool{}
		for _, id := range starts[key] {
			if !seen[id] {
				seen[id] = true
				first = append(first, id)
			}
		}
		if fmt.Sprint(first) != fmt.Sprint(ids) {
			t.Errorf("key %s started %v; want start order %v", key, first, ids)
		}
	}
	if n, err := e.client.Counts(ctxb); err != nil || n["waiting:ordering_key"]+n["waiting:workflow_limit"] != 0 {
		t.Errorf("counts at the end %v, %v", n, err)
	}
}

// TestOrderingKeyWithWaits: a run whose last step awaits a signal, or
// sleeps, holds its key while it waits (it is active) and frees it when the
// wait ends it: the signal or the timer starts the key's next run.
func TestOrderingKeyWithWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(workflow.WorkerConfig{},
		workflow.Definition{Name: "approve", Steps: []workflow.Step{
			{Name: "approval", Await: &workflow.Await{Signal: "ok", Timeout: time.Hour}}}},
		workflow.Definition{Name: "nap", Steps: []workflow.Step{
			{Name: "nap", Sleep: &workflow.Sleep{For: 300 * time.Millisecond}}}})

	a := startKeyed(t, e.client, "approve", "k")
	b := startKeyed(t, e.client, "approve", "k")
	e.eventually(10*time.Second, "a waiting for its signal", func() bool {
		return e.get(a.ID).Step("approval").Status == workflow.StepWaiting
	})
	wantWaiting(t, e.get(b.ID), "k", 1)
	if _, err := e.client.Signal(ctxb, a.ID, "ok", map[string]bool{"yes": true}, nil); err != nil {
		t.Fatal(err)
	}
	if got := e.wait(a.ID, 10*time.Second); got.Status != workflow.StatusSucceeded {
		t.Fatalf("a: %s", got.Status)
	}
	e.eventually(10*time.Second, "b admitted and waiting for its signal", func() bool {
		r := e.get(b.ID)
		return r.WaitingFor != nil && r.WaitingFor.Signal == "ok"
	})
	if _, err := e.client.Signal(ctxb, b.ID, "ok", nil, nil); err != nil {
		t.Fatal(err)
	}
	e.wait(b.ID, 10*time.Second)

	x := startKeyed(t, e.client, "nap", "n")
	y := startKeyed(t, e.client, "nap", "n")
	wantWaiting(t, y, "n", 1)
	for _, r := range []*workflow.Run{x, y} {
		if got := e.wait(r.ID, 10*time.Second); got.Status != workflow.StatusSucceeded {
			t.Fatalf("%s: %s", r.ID, got.Status)
		}
	}
	if line, _ := e.client.OrderingKey(ctxb, workflow.KeyLine{Key: "n", Owner: "tester"}, 0); len(line.Active)+len(line.Waiting) != 0 {
		t.Fatalf("key n not free at the end: %+v", line)
	}
}
