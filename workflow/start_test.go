package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// tripCounter counts a client's round trips to Redis (a command, or a
// pipeline) and the commands they carry.
type tripCounter struct{ trips, cmds atomic.Int64 }

func (*tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.trips.Add(1)
		c.cmds.Add(1)
		return next(ctx, cmd)
	}
}

func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.trips.Add(1)
		c.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func (c *tripCounter) reset() { c.trips.Store(0); c.cmds.Store(0) }

func threeSteps(name string) workflow.Definition {
	return workflow.Definition{Name: name, Steps: []workflow.Step{{Name: "a", Run: noop}, {Name: "b", Run: noop},
		{Name: "c", Run: noop}}}
}

// TestStartIsOneRoundTrip: a Start is one round trip to Redis (once the
// client has read the definition), its run's first task is written with it,
// and StartMany starts a batch in one round trip.
func TestStartIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	q := testkit.Queue(t, "t")
	publishedEngine(t, srv.Client(t), workflow.EngineConfig{Queue: q, Logger: testLogger(t)}, threeSteps("rt"))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	counter := &tripCounter{}
	rdb.AddHook(counter)
	c := workflow.NewClient(rdb, workflow.ClientConfig{Queue: q, Logger: testLogger(t)})
	if _, err := c.Start(ctxb, "rt", nil, nil); err != nil { // reads the definition, loads the script
		t.Fatal(err)
	}

	counter.reset()
	const n = 10
	var ids []string
	for i := range n {
		run, err := c.Start(ctxb, "rt", map[string]int{"i": i}, &workflow.StartOptions{IdempotencyKey: fmt.Sprint("k", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, run.ID)
	}
	if trips, cmds := counter.trips.Load(), counter.cmds.Load(); trips != n || cmds != n {
		t.Fatalf("%d starts: %d round trips, %d commands; want %d of each", n, trips, cmds, n)
	}
	insp := asynq.NewInspectorFromRedisClient(srv.Client(t))
	for _, id := range ids {
		if _, err := insp.GetTaskInfo(q, tasks.ID(id, 0, 1, 0)); err != nil {
			t.Fatalf("run %s: its first task: %v", id, err)
		}
	}

	counter.reset()
	reqs := make([]workflow.StartRequest, 20)
	for i := range reqs {
		reqs[i] = workflow.StartRequest{Workflow: "rt", Input: map[string]int{"i": i}}
	}
	reqs[7].Workflow = "not a workflow name"
	reqs[9].Input = json.RawMessage("{")
	res := c.StartMany(ctxb, reqs)
	if trips := counter.trips.Load(); trips != 1 {
		t.Fatalf("StartMany of %d runs: %d round trips; want 1", len(reqs), trips)
	}
	for i, r := range res {
		switch i {
		case 7, 9:
			if r.Err == nil {
				t.Errorf("request %d: no error", i)
			}
		default:
			if r.Err != nil || r.Run == nil || r.Run.Status != workflow.StatusPending {
				t.Errorf("request %d: %+v", i, r)
			}
		}
	}
}

// TestStartReturnsWhatGetReads: the Run that Start builds without reading
// it back is the one Get reads, for every kind of run.
func TestStartReturnsWhatGetReads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ordered := threeSteps("ordered")
	ordered.Ordering = &workflow.Ordering{Concurrency: 1}
	limited := threeSteps("limited")
	limited.MaxRunning = 1
	timed := threeSteps("timed")
	timed.Policy.RunTimeout = time.Hour
	timed.Steps[0].Policy.RunTimeout = time.Minute
	timed.Policy.MaxIterations = 9
	saga := threeSteps("saga")
	saga.OnFailure = workflow.FailureCompensate
	saga.Steps[0].Compensate = noop
	saga.Steps[1].Group, saga.Steps[2].Group = "g", "g"
	saga.Groups = map[string]workflow.Group{"g": {Optional: true}}
	waits := workflow.Definition{Name: "waits", Steps: []workflow.Step{
		{Name: "ok", Await: &workflow.Await{Signal: "go", Timeout: time.Hour}},
		{Name: "nap", Sleep: &workflow.Sleep{For: time.Minute}}, {Name: "c", Run: noop}}}
	breaker := threeSteps("breaker")
	breaker.Steps[1].Policy.CircuitBreaker = &workflow.CircuitBreaker{Name: "dep", FailureThreshold: 3}
	publishedEngine(t, e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log}, threeSteps("plain"), ordered,
		limited, timed, saga, waits, breaker)
	// A definition as a worker of the version before published it: its
	// snapshot, no version (the run gets its fixed fields as arguments).
	store := retrystate.New(e.rdb, e.queue)
	snap, err := store.Definition(ctxb, "saga")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.RegisterDefinitions(ctxb, map[string]string{"unversioned": snap}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, workflow string
		input          any
		opts           *workflow.StartOptions
	}{
		{"no input", "plain", nil, nil},
		{"input, owner and key", "plain", map[string]any{"x": []int{1, 2}}, &workflow.StartOptions{Owner: "ann", IdempotencyKey: "k1"}},
		{"key without owner", "plain", nil, &workflow.StartOptions{IdempotencyKey: "k2"}},
		{"ordering key, first", "ordered", nil, &workflow.StartOptions{OrderingKey: "o"}},
		{"ordering key, waits", "ordered", nil, &workflow.StartOptions{OrderingKey: "o"}},
		{"max_running, first", "limited", nil, nil},
		{"max_running, waits", "limited", nil, nil},
		{"run timeout, iteration ceiling", "timed", nil, nil},
		{"saga and groups", "saga", nil, nil},
		{"await and sleep", "waits", nil, nil},
		{"circuit breaker", "breaker", nil, nil},
		{"a definition published without a version", "unversioned", nil, nil},
		{"the key's run again", "plain", nil, &workflow.StartOptions{Owner: "ann", IdempotencyKey: "k1"}},
	} {
		started, err := e.client.Start(ctxb, tc.workflow, tc.input, tc.opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		read, err := e.client.Get(ctxb, started.ID)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if w := read.WaitingFor; w != nil {
			w.HeldBy = nil // Get reads what holds a waiting run; Start (one round trip) does not
		}
		if a, b := mustJSON(t, started), mustJSON(t, read); string(a) != string(b) {
			t.Errorf("%s: Start returned\n%s\nGet reads\n%s", tc.name, a, b)
		}
	}
}

// TestStartAfterRepublish: a client that kept a definition a worker has
// since published again (changed) finds it stale and starts the run with
// the new one, in the same Start.
func TestStartAfterRepublish(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	publishedEngine(t, e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log}, threeSteps("re"))
	if _, err := e.client.Start(ctxb, "re", nil, nil); err != nil {
		t.Fatal(err)
	}
	changed := threeSteps("re")
	changed.Steps = append(changed.Steps, workflow.Step{Name: "d", Run: noop})
	publishedEngine(t, e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log}, changed)
	run, err := e.client.Start(ctxb, "re", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Steps) != 4 {
		t.Fatalf("the run started with %d steps; want the republished 4", len(run.Steps))
	}
	read, err := e.client.Get(ctxb, run.ID)
	if err != nil || len(read.Steps) != 4 {
		t.Fatalf("Get: %d steps, %v; want 4", len(read.Steps), err)
	}
}

// TestFinishedRunsAreCompact: a run that succeeds, or is cancelled, keeps
// a compact hash and no journal stream, and reads (Get, Events) as a run
// of the layout before templates does after the same transitions.
func TestFinishedRunsAreCompact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	def := threeSteps("compact")
	def.Steps[1].Policy = workflow.Policy{MaxAttempts: 3, InitialInterval: 10 * time.Millisecond, Jitter: workflow.JitterNone}
	var failOnce atomic.Bool
	def.Steps[1].Run = func(context.Context, *workflow.StepContext) (any, error) {
		if failOnce.CompareAndSwap(false, true) {
			return nil, workflow.Transient(errors.New("once"))
		}
		return map[string]int{"n": 1}, nil
	}
	e.startWorker(workflow.WorkerConfig{}, def)
	run, err := e.client.Start(ctxb, "compact", map[string]string{"in": "put"}, &workflow.StartOptions{Owner: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	done := e.wait(run.ID, 20*time.Second)
	if done.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s", done.Status)
	}
	store := retrystate.New(e.rdb, e.queue)
	h, err := e.rdb.HGetAll(ctxb, "cairn:{"+e.queue+"}:run:"+run.ID).Result()
	if err != nil {
		t.Fatal(err)
	}
	if h["steps"] != "" || h["s0.name"] != "" || h["def"] == "" || h["jn"] == "" {
		t.Fatalf("the finished run is not compact: %v", h)
	}
	if enc, _ := e.rdb.ObjectEncoding(ctxb, "cairn:{"+e.queue+"}:run:"+run.ID).Result(); enc != "listpack" {
		t.Errorf("the compact run hash is a %s; want a listpack", enc)
	}
	if n, _ := e.rdb.Exists(ctxb, "cairn:{"+e.queue+"}:run:"+run.ID+":j").Result(); n != 0 {
		t.Error("the journal stream is still there")
	}
	rec, err := store.Run(ctxb, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.StepCount != 3 || rec.Steps[1].Name != "b" || rec.Steps[1].MaxAttempts != 3 || rec.Steps[1].Attempt != 2 ||
		rec.Steps[1].Task != tasks.ID(run.ID, 1, 2, 0) || rec.Steps[0].RetryState != retrystate.RetryNone ||
		rec.Steps[1].LastError != "once" || rec.Steps[1].Policy == "" {
		t.Errorf("the compact run reads %+v", rec.Steps)
	}
	evs := e.events(run.ID)
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	want := []string{"run_started", "attempt_started", "attempt_succeeded", "attempt_started", "attempt_failed",
		"retry_scheduled", "attempt_started", "attempt_succeeded", "attempt_started", "attempt_succeeded", "run_succeeded"}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Fatalf("events %v; want %v", types, want)
	}
	if d := evs[0].Details; d["workflow"] != "compact" || d["owner"] != "ann" || d["task"] != tasks.ID(run.ID, 0, 1, 0) {
		t.Errorf("run_started: %v", d)
	}
	if d := evs[5].Details; d["task"] != tasks.ID(run.ID, 1, 2, 0) || d["delay_ms"] == "" || evs[5].Attempt != 2 {
		t.Errorf("retry_scheduled: %+v", evs[5])
	}
	// A late delivery of a finished run is journaled after the moved
	// entries, in a stream that expires with the run.
	if _, err := store.Begin(ctxb, retrystate.BeginParams{RunID: run.ID, Index: 2, TaskID: tasks.ID(run.ID, 2, 1, 0),
		Token: "late", FenceTTL: time.Second, Retention: time.Hour, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	evs = e.events(run.ID)
	if last := evs[len(evs)-1]; last.Type != "delivery_ignored" || len(evs) != len(want)+1 {
		t.Errorf("after a late delivery: %d events, the last %+v", len(evs), last)
	}
	if ttl, _ := e.rdb.PTTL(ctxb, "cairn:{"+e.queue+"}:run:"+run.ID+":j").Result(); ttl <= 0 {
		t.Errorf("the journal stream of the finished run has no expiry (%v)", ttl)
	}
}

// TestOldLayoutRunsReadAndProgress: a run created before definitions had
// versions (its definition's JSON in the field definition, every fixed
// field in its hash, no def) is read and run to its end by this version,
// and keeps its layout.
func TestOldLayoutRunsReadAndProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	store := retrystate.New(e.rdb, e.queue)
	id := workflow.NewRunID(time.Now())
	nr := retrystate.NewRun{ID: id, Workflow: "old", Owner: "ann", Input: `{"n":1}`, Now: time.Now()}
	pol := mustJSON(t, workflow.Policy{MaxAttempts: 3, StepTimeout: time.Minute}.Or(workflow.DefaultPolicy()))
	for _, name := range []string{"a", "b", "c"} {
		nr.Steps = append(nr.Steps, retrystate.NewStep{Name: name, MaxAttempts: 3, MaxCrashes: 3, Timeout: time.Minute,
			Policy: string(pol)})
	}
	created, err := store.CreateRun(ctxb, nr) // no Def, no Template: the fixed fields as arguments, as before
	if err != nil {
		t.Fatal(err)
	}
	key := "cairn:{" + e.queue + "}:run:" + id
	if err := e.rdb.HSet(ctxb, key, "definition", `{"name":"old","policy":`+string(pol)+`,"steps":[{"name":"a","policy":`+
		string(pol)+`},{"name":"b","policy":`+string(pol)+`},{"name":"c","policy":`+string(pol)+`}]}`).Err(); err != nil {
		t.Fatal(err)
	}
	before, err := e.client.Get(ctxb, id)
	if err != nil || len(before.Steps) != 3 || before.Steps[0].EffectivePolicy == nil || before.Status != workflow.StatusPending {
		t.Fatalf("the old run reads %+v, %v", before, err)
	}
	insp := asynq.NewInspectorFromRedisClient(e.rdb)
	if _, err := insp.GetTaskInfo(e.queue, created.Task); err == nil {
		t.Fatal("a first task exists already; the old layout's create did not write one")
	}
	ac := asynq.NewClientFromRedisClient(e.rdb)
	p := tasks.Step{RunID: id, Workflow: "old", Index: 0, Name: "a", Attempt: 1}
	if _, err := ac.EnqueueContext(ctxb, asynq.NewTask(tasks.TypeStep, p.Encode()),
		tasks.Options(e.queue, p.ID(), time.Minute, time.Time{}, time.Now())...); err != nil {
		t.Fatal(err)
	}
	_ = ac.Close()
	old := workflow.Definition{Name: "old", Steps: []workflow.Step{{Name: "a", Run: noop}, {Name: "b", Run: noop},
		{Name: "c", Run: noop}}}
	e.startWorker(workflow.WorkerConfig{}, old)
	done := e.wait(id, 20*time.Second)
	if done.Status != workflow.StatusSucceeded || len(done.Steps) != 3 || done.Steps[2].Status != workflow.StepSucceeded ||
		done.Steps[1].EffectivePolicy == nil || done.Steps[1].EffectivePolicy.MaxAttempts != 3 {
		t.Fatalf("the old run ended %+v", done)
	}
	if evs := e.events(id); len(evs) != 8 || evs[len(evs)-1].Type != workflow.EventRunSucceeded {
		t.Errorf("%d events", len(evs))
	}
	h, err := e.rdb.HGetAll(ctxb, key).Result()
	if err != nil || h["definition"] == "" || h["steps"] != "3" || h["s1.policy"] == "" {
		t.Errorf("the old run lost its layout: %v %v", h, err)
	}
}
