package engine

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/internal/embedded"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/tasks"
)

// deadlineOwn is the one generous deadline of each wait in these tests.
const deadlineOwn = time.Minute

// ownWorker is a worker on Cairn's own dequeue, run until stop or the
// test's end, with its processor's test signals on.
type ownWorker struct {
	w    *Worker
	proc *processor
	stop func()
}

func startOwnWorker(t *testing.T, rdb redis.UniversalClient, queue string, shutdown time.Duration,
	defs ...core.Definition) *ownWorker {
	t.Helper()
	w, err := NewWorker(rdb, WorkerConfig{EngineConfig: EngineConfig{Queue: queue,
		Logger: testLog(t)}, Dequeue: DequeueCairn, ShutdownTimeout: shutdown,
		SkipRedisChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Register(defs...); err != nil {
		t.Fatal(err)
	}
	procCh := make(chan *processor, 1)
	w.onProcessor = func(p *processor) {
		p.taken.Init()
		p.paused.Init()
		p.acked.Init()
		p.housekept.Init()
		procCh <- p
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}
	t.Cleanup(stop)
	select {
	case <-w.Ready():
	case <-time.After(deadlineOwn):
		t.Fatal("worker not ready")
	}
	return &ownWorker{w: w, proc: <-procCh, stop: stop}
}

// waitAck waits for the acknowledgement of task id and returns how.
func (o *ownWorker) waitAck(t *testing.T, id string) string {
	t.Helper()
	for {
		ev, ok := o.proc.acked.Wait(deadlineOwn)
		if !ok {
			t.Fatalf("task %s not acknowledged within %s", id, deadlineOwn)
		}
		if ev.id == id {
			return ev.how
		}
	}
}

func oneStep(name string, fn core.StepFunc) core.Definition {
	return core.Definition{Name: name, Steps: []core.Step{{Name: "s1", Run: fn}}}
}

func waitEnded(t *testing.T, c *Client, id string) *core.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadlineOwn)
	defer cancel()
	r, err := c.Wait(ctx, id, 10*time.Millisecond)
	if err != nil {
		t.Fatalf("run %s: %v", id, err)
	}
	return r
}

// TestOwnDequeueRunsAndAcks: a run completes on the own dequeue; its
// tasks are acknowledged as asynq would (gone, counted as processed), each
// by the checkpoint of its step (stepAck), a failed step's by the write of
// its failure, and a compensation's, which its checkpoint does not
// acknowledge, by the processor.
func TestOwnDequeueRunsAndAcks(t *testing.T) {
	rdb := redistest.Start(t, nil).Client(t)
	const queue = "own_runs"
	def := core.Definition{Name: "three", Steps: []core.Step{
		{Name: "a", Run: func(context.Context, *core.StepContext) (any, error) { return 1, nil }},
		{Name: "b", Run: func(context.Context, *core.StepContext) (any, error) { return 2, nil }},
		{Name: "c", Run: func(context.Context, *core.StepContext) (any, error) { return 3, nil }},
	}}
	o := startOwnWorker(t, rdb, queue, time.Second, def)
	c := NewClient(rdb, ClientConfig{Queue: queue})
	run, err := c.Start(context.Background(), "three", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := waitEnded(t, c, run.ID); r.Status != core.StatusSucceeded {
		t.Fatalf("run %s", r.Status)
	}
	for i, name := range []string{"a", "b", "c"} {
		id := tasks.Step{RunID: run.ID, Workflow: "three", Index: i, Name: name, Attempt: 1}.ID()
		if how := o.waitAck(t, id); how != "checkpoint" {
			t.Errorf("step %s's task acknowledged by %q, want by its checkpoint", name, how)
		}
	}
	qi, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(queue)
	if err != nil {
		t.Fatal(err)
	}
	if qi.Processed != 3 || qi.Active != 0 || qi.Pending != 0 || qi.Retry != 0 || qi.Failed != 0 {
		t.Fatalf("queue stats %+v, want 3 processed and nothing left", qi)
	}
	// Each attempt is journaled with the worker that began it: the name of
	// its heartbeat on the queue.
	evs, err := c.Events(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	started := 0
	for _, ev := range evs {
		if ev.Type == core.EventAttemptStarted {
			started++
			if w := ev.Details["worker"]; w != o.w.engine.id || w == "" {
				t.Errorf("attempt %s/%d journaled by worker %q, want %q", ev.Step, ev.Attempt, w, o.w.engine.id)
			}
		}
	}
	if started != 3 {
		t.Errorf("%d attempts started, want 3", started)
	}
	if beat, err := rdb.ZScore(context.Background(), tasks.QueueKeys(queue).Fetchers(), o.w.engine.id).Result(); err != nil || beat == 0 {
		t.Errorf("no heartbeat under the worker's identity %q: %v", o.w.engine.id, err)
	}

	// A saga: b fails for good, a's compensation runs (compdone.lua does
	// not acknowledge: the processor does).
	saga := core.Definition{Name: "saga", OnFailure: core.FailureCompensate, Steps: []core.Step{
		{Name: "a", Run: func(context.Context, *core.StepContext) (any, error) { return 1, nil },
			Compensate: func(context.Context, *core.StepContext) (any, error) { return nil, nil }},
		{Name: "b", Run: func(context.Context, *core.StepContext) (any, error) {
			return nil, core.Permanent(errors.New("no"))
		}},
	}}
	o.stop()
	o = startOwnWorker(t, rdb, queue, time.Second, saga)
	run, err = c.Start(context.Background(), "saga", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := waitEnded(t, c, run.ID); r.Status != core.StatusCompensated {
		t.Fatalf("saga run %s, want compensated", r.Status)
	}
	hows := map[string]int{}
	for {
		ev, ok := o.proc.acked.Wait(deadlineOwn)
		if !ok {
			t.Fatalf("the saga's 3 tasks not acknowledged: %v", hows)
		}
		if strings.HasPrefix(ev.id, run.ID) {
			hows[ev.how]++
		}
		if hows["checkpoint"]+hows["done"] == 3 {
			break
		}
	}
	// a by its checkpoint, b by its failure's write; the compensation by
	// the processor.
	if hows["checkpoint"] != 2 || hows["done"] != 1 {
		t.Errorf("the saga's tasks acknowledged %v, want 2 by a checkpoint or failure and 1 by the processor", hows)
	}
	if qi, err = asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(queue); err != nil {
		t.Fatal(err)
	}
	if qi.Processed != 6 || qi.Active != 0 || qi.Pending != 0 {
		t.Fatalf("queue stats %+v, want 6 processed and nothing left", qi)
	}
}

// TestOwnDequeueAsynqSemantics: a task's handler error is acknowledged as
// asynq's processor would: a malformed step task (asynq.SkipRetry) is
// archived, a task of a type with no handler is retried (counted as a
// failure), as asynq's Inspector shows.
func TestOwnDequeueAsynqSemantics(t *testing.T) {
	rdb := redistest.Start(t, nil).Client(t)
	const queue = "own_semantics"
	o := startOwnWorker(t, rdb, queue, time.Second)
	client := asynq.NewClientFromRedisClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	if _, err := client.Enqueue(asynq.NewTask(tasks.TypeStep, []byte("garbage")), asynq.Queue(queue),
		asynq.TaskID("bad"), asynq.MaxRetry(5)); err != nil {
		t.Fatal(err)
	}
	if how := o.waitAck(t, "bad"); how != "archive" {
		t.Fatalf("malformed step task: %s, want archive", how)
	}
	info, err := insp.GetTaskInfo(queue, "bad")
	if err != nil || info.State != asynq.TaskStateArchived || !strings.Contains(info.LastErr, "malformed") {
		t.Fatalf("malformed step task: %+v, %v", info, err)
	}
	if _, err := client.Enqueue(asynq.NewTask("other:type", nil), asynq.Queue(queue), asynq.TaskID("other"),
		asynq.MaxRetry(5)); err != nil {
		t.Fatal(err)
	}
	if how := o.waitAck(t, "other"); how != "retry" {
		t.Fatalf("unknown task type: %s, want retry", how)
	}
	info, err = insp.GetTaskInfo(queue, "other")
	if err != nil || info.State != asynq.TaskStateRetry || info.Retried != 1 {
		t.Fatalf("unknown task type: %+v, %v", info, err)
	}
	qi, err := insp.GetQueueInfo(queue)
	if err != nil || qi.Processed != 2 || qi.Failed != 2 {
		t.Fatalf("queue stats %+v, %v", qi, err)
	}
}

// TestOwnDequeuePause: asynq's PauseQueue stops the fetching (the task
// stays pending, the step does not begin), UnpauseQueue resumes it.
func TestOwnDequeuePause(t *testing.T) {
	rdb := redistest.Start(t, nil).Client(t)
	const queue = "own_pause"
	ran := make(chan struct{}, 1)
	o := startOwnWorker(t, rdb, queue, time.Second, oneStep("one", func(context.Context, *core.StepContext) (any, error) {
		ran <- struct{}{}
		return nil, nil
	}))
	insp := asynq.NewInspectorFromRedisClient(rdb)
	if err := insp.PauseQueue(queue); err != nil {
		t.Fatal(err)
	}
	c := NewClient(rdb, ClientConfig{Queue: queue})
	run, err := c.Start(context.Background(), "one", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := o.proc.paused.Wait(deadlineOwn); !ok {
		t.Fatal("the fetcher did not find the queue paused")
	}
	id := tasks.ID(run.ID, 0, 1, 0)
	info, err := insp.GetTaskInfo(queue, id)
	if err != nil || info.State != asynq.TaskStatePending {
		t.Fatalf("task of a paused queue: %+v, %v; want pending", info, err)
	}
	select {
	case <-ran:
		t.Fatal("the step ran on a paused queue")
	default:
	}
	if err := insp.UnpauseQueue(queue); err != nil {
		t.Fatal(err)
	}
	if r := waitEnded(t, c, run.ID); r.Status != core.StatusSucceeded {
		t.Fatalf("run %s", r.Status)
	}
}

// TestOwnDequeueShutdownHandsBack: a worker that shuts down with a step
// still running past its ShutdownTimeout hands the task back to pending,
// and another worker finishes the run; the step succeeds once.
func TestOwnDequeueShutdownHandsBack(t *testing.T) {
	rdb := redistest.Start(t, nil).Client(t)
	const queue = "own_shutdown"
	started := make(chan struct{}, 10)
	succeeded := make(chan struct{}, 10)
	var block atomic.Bool
	block.Store(true)
	def := oneStep("slow", func(ctx context.Context, _ *core.StepContext) (any, error) {
		started <- struct{}{}
		if block.Load() {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		succeeded <- struct{}{}
		return "ok", nil
	})
	a := startOwnWorker(t, rdb, queue, 200*time.Millisecond, def)
	c := NewClient(rdb, ClientConfig{Queue: queue})
	run, err := c.Start(context.Background(), "slow", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(deadlineOwn):
		t.Fatal("the step did not start")
	}
	id := tasks.ID(run.ID, 0, 1, 0)
	a.stop()
	if how := a.waitAck(t, id); how != "requeue" {
		t.Fatalf("the running task was %s at shutdown, want requeue", how)
	}
	block.Store(false) // before the second worker starts
	startOwnWorker(t, rdb, queue, time.Second, def)
	r := waitEnded(t, c, run.ID)
	if r.Status != core.StatusSucceeded {
		t.Fatalf("run %s", r.Status)
	}
	if len(succeeded) != 1 {
		t.Fatalf("the step succeeded %d times", len(succeeded))
	}
}

// TestOwnDequeueRecoversClaim: a task claimed by a worker killed between
// its BLMOVE and its take (its claim list left, its heartbeat expired) is
// handed back by another worker's housekeeping and its run completes.
func TestOwnDequeueRecoversClaim(t *testing.T) {
	rdb := redistest.Start(t, nil).Client(t)
	const queue = "own_claim"
	def := oneStep("one", func(context.Context, *core.StepContext) (any, error) { return nil, nil })
	// Definitions published, no worker fetching yet.
	e, err := NewEngine(rdb, EngineConfig{Queue: queue, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(def); err != nil {
		t.Fatal(err)
	}
	if err := e.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := NewClient(rdb, ClientConfig{Queue: queue})
	run, err := c.Start(context.Background(), "one", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ghost := tasks.NewDequeuer(rdb, queue, "ghost")
	if _, err := ghost.Housekeep(context.Background(), time.Now().Add(-time.Minute), time.Second); err != nil {
		t.Fatal(err)
	}
	if id, err := ghost.Claim(context.Background(), time.Second); err != nil || id != tasks.ID(run.ID, 0, 1, 0) {
		t.Fatalf("ghost's claim: %q, %v", id, err)
	}
	startOwnWorker(t, rdb, queue, time.Second, def)
	if r := waitEnded(t, c, run.ID); r.Status != core.StatusSucceeded {
		t.Fatalf("run %s", r.Status)
	}
	if n, _ := rdb.Exists(context.Background(), tasks.QueueKeys(queue).Claim("ghost")).Result(); n != 0 {
		t.Fatal("the ghost's claim list is left")
	}
}

// TestOwnDequeueCancel: asynq's CancelProcessing (what dispatcher.Stop
// sends when a running run is cancelled) cancels the running handler's
// context.
func TestOwnDequeueCancel(t *testing.T) {
	rdb := redistest.Start(t, nil).Client(t)
	const queue = "own_cancel"
	started := make(chan struct{}, 1)
	cancelled := make(chan error, 1)
	startOwnWorker(t, rdb, queue, time.Second, oneStep("wait", func(ctx context.Context, _ *core.StepContext) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- ctx.Err()
		return nil, ctx.Err()
	}))
	c := NewClient(rdb, ClientConfig{Queue: queue})
	run, err := c.Start(context.Background(), "wait", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(deadlineOwn):
		t.Fatal("the step did not start")
	}
	if _, err := c.Cancel(context.Background(), run.ID, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the step's context ended with %v", err)
		}
	case <-time.After(deadlineOwn):
		t.Fatal("the running step's context was not cancelled")
	}
	if r := waitEnded(t, c, run.ID); r.Status != core.StatusCancelled {
		t.Fatalf("run %s", r.Status)
	}
}

func testLog(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// TestOwnDequeueEmbedded: a worker on the own dequeue runs on the embedded
// store (miniredis, `make run`): its BLMOVE, scripts and cancellation
// subscription work there, and a run completes.
func TestOwnDequeueEmbedded(t *testing.T) {
	store, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	rdb := redis.NewClient(&redis.Options{Addr: store.Addr(), Protocol: 2})
	t.Cleanup(func() { _ = rdb.Close() })
	const queue = "own_embedded"
	def := core.Definition{Name: "two", Steps: []core.Step{
		{Name: "a", Run: func(context.Context, *core.StepContext) (any, error) { return 1, nil }},
		{Name: "b", Run: func(context.Context, *core.StepContext) (any, error) { return 2, nil }},
	}}
	o := startOwnWorker(t, rdb, queue, time.Second, def)
	c := NewClient(rdb, ClientConfig{Queue: queue})
	run, err := c.Start(context.Background(), "two", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := waitEnded(t, c, run.ID); r.Status != core.StatusSucceeded {
		t.Fatalf("run %s", r.Status)
	}
	if _, ok := o.proc.housekept.Wait(deadlineOwn); !ok {
		t.Fatal("no housekeeping pass on the embedded store")
	}
}
