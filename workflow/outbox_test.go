package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// obRig is a queue on the shared server with two workflows published, an
// outbox file, and clients of it with Redis up or down.
type obRig struct {
	t     *testing.T
	rdb   *redis.Client
	queue string
	path  string
	// plain has no outbox: it stands for other processes.
	plain *workflow.Client
}

// obDefs: "ob" (a step, then an await of "go") and, with an ordering key,
// one run of a key at a time.
func obDefs() []workflow.Definition {
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	return []workflow.Definition{{
		Name: "ob", Ordering: &workflow.Ordering{Concurrency: 1},
		Steps: []workflow.Step{{Name: "a", Run: noop}, {Name: "wait", Await: &workflow.Await{Signal: "go", Timeout: time.Hour}}},
	}}
}

func newOBRig(t *testing.T) *obRig {
	t.Helper()
	r := &obRig{t: t, rdb: redistest.Shared(t).Client(t), queue: testkit.Queue(t, "ob"),
		path: filepath.Join(t.TempDir(), "outbox.db")}
	publishedEngine(t, r.rdb, workflow.EngineConfig{Queue: r.queue, Logger: testLogger(t)}, obDefs()...)
	r.plain = workflow.NewClient(r.rdb, workflow.ClientConfig{Queue: r.queue, Logger: testLogger(t)})
	return r
}

// open opens a client of rdb with the rig's outbox; Close at the test's end.
func (r *obRig) open(rdb redis.UniversalClient, cfg workflow.ClientConfig) *workflow.Client {
	r.t.Helper()
	cfg.Queue, cfg.Outbox = r.queue, r.path
	if cfg.Logger == nil {
		cfg.Logger = testLogger(r.t)
	}
	c, err := workflow.OpenClient(rdb, cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = c.Close() })
	return c
}

// down opens a client whose Redis refuses connections.
func (r *obRig) down(cfg workflow.ClientConfig) *workflow.Client {
	r.t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: testkit.FreeAddr(r.t), MaxRetries: -1, DialerRetries: 1})
	r.t.Cleanup(func() { _ = rdb.Close() })
	return r.open(rdb, cfg)
}

func (r *obRig) count() int64 {
	r.t.Helper()
	counts, err := r.plain.Counts(ctxb)
	if err != nil {
		r.t.Fatal(err)
	}
	var n int64
	for _, st := range workflow.RunStatuses {
		n += counts[string(st)]
	}
	return n
}

func mustQueue(t *testing.T, c *workflow.Client, wf string, opts *workflow.StartOptions) *workflow.Run {
	t.Helper()
	run, err := c.Start(ctxb, wf, map[string]int{"n": 1}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !run.Queued || !workflow.ValidRunID(run.ID) || run.Status != workflow.StatusPending {
		t.Fatalf("start while Redis is down: %+v; want a queued pending run with an ID", run)
	}
	return run
}

func closeClient(t *testing.T, c *workflow.Client) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOutboxQueuesWhileRedisIsDown: Starts and Signals queue while Redis
// cannot be reached and are applied in order once it can; a signal to a
// queued run follows its start; Get shows a queued run as queued.
func TestOutboxQueuesWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	r := newOBRig(t)
	off := r.down(workflow.ClientConfig{})
	var runs []*workflow.Run
	for _, key := range []string{"k1", "k2", "k1"} {
		runs = append(runs, mustQueue(t, off, "ob", &workflow.StartOptions{OrderingKey: key, Owner: "me"}))
	}
	res, err := off.Signal(ctxb, runs[0].ID, "go", map[string]bool{"ok": true}, nil)
	if err != nil || res.Outcome != workflow.SignalOutbox || !strings.HasPrefix(res.ID, "ob_") {
		t.Fatalf("signal while down: %+v, %v; want outcome outbox with a generated ID", res, err)
	}
	got, err := off.Get(ctxb, runs[2].ID)
	if err != nil || !got.Queued || got.OrderingKey != "k1" || got.Owner != "me" {
		t.Fatalf("Get of a queued run while Redis is down: %+v, %v", got, err)
	}
	contents, err := off.Outbox()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range contents.Queued {
		kinds = append(kinds, string(e.Kind)+":"+e.RunID)
	}
	want := []string{"start:" + runs[0].ID, "start:" + runs[1].ID, "start:" + runs[2].ID, "signal:" + runs[0].ID}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Fatalf("queued %v; want %v", kinds, want)
	}
	if st, err := off.OutboxStats(); err != nil || st.Entries != 4 || st.Oldest.IsZero() || st.MaxEntries != workflow.DefaultOutboxMaxEntries {
		t.Fatalf("stats %+v, %v", st, err)
	}
	if r.count() != 0 {
		t.Fatal("a run reached Redis")
	}
	closeClient(t, off)

	// The same file, opened by a client whose Redis answers: it flushes.
	on := r.open(r.rdb, workflow.ClientConfig{})
	if _, err := on.FlushOutbox(ctxb); err != nil {
		t.Fatal(err)
	}
	if st, _ := on.OutboxStats(); st.Entries != 0 || st.Flushed+0 > 4 {
		t.Fatalf("after the flush: %+v", st)
	}
	for _, run := range runs {
		got, err := on.Get(ctxb, run.ID)
		if err != nil || got.Queued || got.Workflow != "ob" || got.Owner != "me" {
			t.Fatalf("run %s after the flush: %+v, %v", run.ID, got, err)
		}
	}
	line, err := on.OrderingKey(ctxb, workflow.KeyLine{Key: "k1", Owner: "me"}, 0)
	if err != nil || len(line.Active) != 1 || line.Active[0].ID != runs[0].ID || len(line.Waiting) != 1 || line.Waiting[0].ID != runs[2].ID {
		t.Fatalf("key k1's line: %+v, %v; want %s then %s", line, err, runs[0].ID, runs[2].ID)
	}
	evs, err := on.Events(ctxb, runs[0].ID)
	if err != nil || testkit.CountEvents(evs, workflow.EventSignalReceived, "") != 1 {
		t.Fatalf("events of the signalled run: %+v, %v", evs, err)
	}
	if r.count() != 3 {
		t.Fatalf("%d runs; want 3", r.count())
	}
}

// lostReply makes the first create.lua (testkit.IsRunCreate, sent in a
// pipeline) look as if its reply was lost: it runs, and its caller gets a
// timeout.
type lostReply struct{ fired atomic.Bool }

func (*lostReply) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*lostReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *lostReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if cmd.Err() == nil && testkit.IsRunCreate(cmd) && h.fired.CompareAndSwap(false, true) {
				lost := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
				cmd.SetErr(lost)
				return lost
			}
		}
		return err
	}
}

// TestOutboxReplayIsIdempotent: a start whose reply was lost is queued with
// its run ID; the flush finds the run created and creates nothing more.
func TestOutboxReplayIsIdempotent(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"", "idem-1"} {
		t.Run("key="+key, func(t *testing.T) {
			t.Parallel()
			r := newOBRig(t)
			rdb := redis.NewClient(&redis.Options{Addr: r.rdb.Options().Addr})
			t.Cleanup(func() { _ = rdb.Close() })
			rdb.AddHook(&lostReply{})
			c := r.open(rdb, workflow.ClientConfig{})
			run := mustQueue(t, c, "ob", &workflow.StartOptions{IdempotencyKey: key})
			if r.count() != 1 {
				t.Fatalf("%d runs; want the one whose reply was lost", r.count())
			}
			rep, err := c.FlushOutbox(ctxb)
			if err != nil {
				t.Fatal(err)
			}
			if st, _ := c.OutboxStats(); st.Entries != 0 || st.Flushed != 1 || st.DeadLettered != 0 || rep.DeadLettered != 0 {
				t.Fatalf("stats %+v, report %+v", st, rep)
			}
			if r.count() != 1 {
				t.Fatalf("%d runs after the replay; want 1", r.count())
			}
			got, err := c.Get(ctxb, run.ID)
			if err != nil || got.Queued || got.Status != workflow.StatusPending {
				t.Fatalf("run: %+v, %v", got, err)
			}
			evs, _ := c.Events(ctxb, run.ID)
			if n := testkit.CountEvents(evs, workflow.EventRunStarted, ""); n != 1 {
				t.Fatalf("%d run_started events", n)
			}
		})
	}
}

// TestOutboxIdempotencyKeyNamesAnotherRun: a queued start whose key names,
// when it is flushed, a run started meanwhile creates nothing; the queued
// ID stands for that run, and a signal queued for it goes there.
func TestOutboxIdempotencyKeyNamesAnotherRun(t *testing.T) {
	t.Parallel()
	r := newOBRig(t)
	off := r.down(workflow.ClientConfig{})
	queued := mustQueue(t, off, "ob", &workflow.StartOptions{IdempotencyKey: "order-7", Owner: "shop"})
	if res, err := off.Signal(ctxb, queued.ID, "go", nil, &workflow.SignalOptions{ID: "s1"}); err != nil || res.ID != "s1" {
		t.Fatalf("signal: %+v, %v", res, err)
	}
	closeClient(t, off)
	other, err := r.plain.Start(ctxb, "ob", nil, &workflow.StartOptions{IdempotencyKey: "order-7", Owner: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	on := r.open(r.rdb, workflow.ClientConfig{}) // its flusher flushes at once
	testkit.Eventually(t, 10*time.Second, "the outbox to be flushed", func() bool {
		st, err := on.OutboxStats()
		return err == nil && st.Entries == 0
	})
	got, err := on.Get(ctxb, queued.ID)
	if err != nil || got.ID != other.ID || got.Queued {
		t.Fatalf("Get(queued ID) = %+v, %v; want run %s", got, err, other.ID)
	}
	if _, err := r.plain.Get(ctxb, queued.ID); !errors.Is(err, workflow.ErrRunNotFound) {
		t.Fatalf("the queued ID exists: %v", err)
	}
	evs, _ := on.Events(ctxb, other.ID)
	if testkit.CountEvents(evs, workflow.EventSignalReceived, "") != 1 {
		t.Fatalf("the signal did not reach run %s: %+v", other.ID, evs)
	}
	if r.count() != 1 {
		t.Fatalf("%d runs; want 1", r.count())
	}
}

// TestOutboxDeadLetters: what Redis refuses at flush time is dead-lettered,
// visible and does not block the entries behind it.
func TestOutboxDeadLetters(t *testing.T) {
	t.Parallel()
	r := newOBRig(t)
	off := r.down(workflow.ClientConfig{})
	unknown := mustQueue(t, off, "nosuch", nil)
	good := mustQueue(t, off, "ob", nil)
	ghost := workflow.NewRunID(time.Now())
	if _, err := off.Signal(ctxb, ghost, "go", nil, nil); err != nil {
		t.Fatal(err)
	}
	closeClient(t, off)
	on := r.open(r.rdb, workflow.ClientConfig{})
	testkit.Eventually(t, 10*time.Second, "the outbox to be flushed", func() bool {
		st, err := on.OutboxStats()
		return err == nil && st.Entries == 0
	})
	st, _ := on.OutboxStats()
	if st.DeadLetters != 2 || st.DeadLettered != 2 || st.Flushed != 1 {
		t.Fatalf("stats %+v; want 2 dead letters, 1 flushed", st)
	}
	contents, _ := on.Outbox()
	if len(contents.Dead) != 2 || !strings.Contains(contents.Dead[0].DeadReason, "unknown workflow") ||
		contents.Dead[0].RunID != unknown.ID || !strings.Contains(contents.Dead[1].DeadReason, "run not found") ||
		contents.Dead[1].DeadAt == nil {
		t.Fatalf("dead letters %+v", contents.Dead)
	}
	if _, err := on.Get(ctxb, good.ID); err != nil {
		t.Fatal(err)
	}
	_, err := on.Get(ctxb, unknown.ID)
	if !errors.Is(err, workflow.ErrRunNotFound) || !strings.Contains(err.Error(), "dead letter") {
		t.Fatalf("Get of a dead-lettered start: %v", err)
	}
	closeClient(t, on)

	// Requeued (into a client whose Redis is down, so they stay queued),
	// then dropped.
	off = r.down(workflow.ClientConfig{})
	if n, err := off.RequeueOutboxDeadLetters(); n != 2 || err != nil {
		t.Fatalf("requeue: %d, %v", n, err)
	}
	contents, _ = off.Outbox()
	if len(contents.Queued) != 2 || len(contents.Dead) != 0 || contents.Queued[0].DeadReason != "" {
		t.Fatalf("after requeue: %+v", contents)
	}
	if _, err := off.FlushOutbox(ctxb); err == nil {
		t.Fatal("flush with Redis down: no error")
	}
	contents, _ = off.Outbox()
	if e := contents.Queued[0]; e.Attempts == 0 || !strings.Contains(e.LastError, "refused") || e.LastAttemptAt == nil {
		t.Fatalf("the entry Redis could not be reached for: %+v", e)
	}
}

// TestOutboxBounds: a full outbox refuses with ErrOutboxFull and queues
// nothing.
func TestOutboxBounds(t *testing.T) {
	t.Parallel()
	r := newOBRig(t)
	off := r.down(workflow.ClientConfig{OutboxMaxEntries: 2, OutboxMaxBytes: 2000})
	mustQueue(t, off, "ob", nil)
	if _, err := off.Start(ctxb, "ob", map[string]string{"big": strings.Repeat("x", 2000)}, nil); !errors.Is(err, workflow.ErrOutboxFull) {
		t.Fatalf("start over the byte bound: %v", err)
	}
	mustQueue(t, off, "ob", nil)
	_, err := off.Start(ctxb, "ob", nil, nil)
	if !errors.Is(err, workflow.ErrOutboxFull) || !strings.Contains(err.Error(), "2 entries") {
		t.Fatalf("third start: %v; want ErrOutboxFull", err)
	}
	if _, err := off.Signal(ctxb, workflow.NewRunID(time.Now()), "go", nil, nil); !errors.Is(err, workflow.ErrOutboxFull) {
		t.Fatalf("signal into a full outbox: %v", err)
	}
	if st, _ := off.OutboxStats(); st.Entries != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestOutboxOneProcessAtATime: a second opener of the file waits, then
// fails with ErrOutboxLocked; ReadOutbox too, and reads it once it is free.
func TestOutboxOneProcessAtATime(t *testing.T) {
	t.Parallel()
	r := newOBRig(t)
	first := r.down(workflow.ClientConfig{})
	mustQueue(t, first, "ob", nil)
	_, err := workflow.OpenClient(r.rdb, workflow.ClientConfig{Queue: r.queue, Outbox: r.path, OutboxLockTimeout: 100 * time.Millisecond})
	if !errors.Is(err, workflow.ErrOutboxLocked) {
		t.Fatalf("second OpenClient: %v; want ErrOutboxLocked", err)
	}
	if _, err := workflow.ReadOutbox(r.path, 100*time.Millisecond); !errors.Is(err, workflow.ErrOutboxLocked) {
		t.Fatalf("ReadOutbox of an open outbox: %v; want ErrOutboxLocked", err)
	}
	closeClient(t, first)
	contents, err := workflow.ReadOutbox(r.path, 0)
	if err != nil || len(contents.Queued) != 1 {
		t.Fatalf("ReadOutbox: %+v, %v", contents, err)
	}
	if contents, err := workflow.ReadOutbox(filepath.Join(t.TempDir(), "none"), 0); err != nil || len(contents.Queued) != 0 {
		t.Fatalf("ReadOutbox of no file: %+v, %v", contents, err)
	}
}

// TestOutboxRefusalsStaySynchronous: only an unreachable Redis queues.
func TestOutboxRefusalsStaySynchronous(t *testing.T) {
	t.Parallel()
	r := newOBRig(t)
	on := r.open(r.rdb, workflow.ClientConfig{})
	if _, err := on.Start(ctxb, "nosuch", nil, nil); !errors.Is(err, workflow.ErrUnknownWorkflow) {
		t.Fatalf("unknown workflow: %v", err)
	}
	if _, err := on.Start(ctxb, "ob", []byte("{"), nil); !errors.Is(err, workflow.ErrInvalidInput) {
		t.Fatalf("bad input: %v", err)
	}
	if _, err := on.Signal(ctxb, workflow.NewRunID(time.Now()), "go", nil, nil); !errors.Is(err, workflow.ErrRunNotFound) {
		t.Fatalf("signal of an unknown run: %v", err)
	}
	// A signal sent at once gets an ID all the same.
	run, err := on.Start(ctxb, "ob", nil, nil)
	if err != nil || run.Queued {
		t.Fatalf("start: %+v, %v", run, err)
	}
	if res, err := on.Signal(ctxb, run.ID, "go", nil, nil); err != nil || res.Outcome != workflow.SignalQueued {
		t.Fatalf("signal: %+v, %v", res, err)
	}
	if again, err := on.Signal(ctxb, run.ID, "go", nil, nil); err != nil || again.Outcome != workflow.SignalQueued {
		t.Fatalf("second signal without an ID: %+v, %v; want it kept too", again, err)
	}
	ctx, cancel := context.WithCancel(ctxb)
	cancel()
	closeClient(t, on)
	off := r.down(workflow.ClientConfig{})
	if _, err := off.Start(ctx, "ob", nil, nil); err == nil {
		t.Fatal("a start with a cancelled context queued")
	}
	if _, err := off.Start(ctxb, "ob", []byte("{"), nil); !errors.Is(err, workflow.ErrInvalidInput) {
		t.Fatalf("bad input while down: %v", err)
	}
	closed := redis.NewClient(&redis.Options{Addr: r.rdb.Options().Addr})
	_ = closed.Close()
	closeClient(t, off)
	c := r.open(closed, workflow.ClientConfig{})
	if _, err := c.Start(ctxb, "ob", nil, nil); !errors.Is(err, redis.ErrClosed) {
		t.Fatalf("start on a closed Redis client: %v; want redis.ErrClosed, not queued", err)
	}
	if st, _ := c.OutboxStats(); st.Entries != 0 {
		t.Fatalf("queued %d", st.Entries)
	}
	// After Close, a client works as one without an outbox.
	closeClient(t, c)
	if _, err := c.Start(ctxb, "ob", nil, nil); !errors.Is(err, redis.ErrClosed) {
		t.Fatalf("start after Close: %v", err)
	}
}

func TestNewClientRefusesAnOutbox(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("NewClient with an outbox did not panic")
		}
	}()
	workflow.NewClient(redistest.Shared(t).Client(t), workflow.ClientConfig{Outbox: "x"})
}

// TestOutboxConcurrentStarts: starts from several goroutines, while Redis
// is down and then while the queue drains into it, keep each goroutine's
// order and all arrive once.
func TestOutboxConcurrentStarts(t *testing.T) {
	t.Parallel()
	r := newOBRig(t)
	off := r.down(workflow.ClientConfig{})
	const workers, each = 4, 10
	ids := make([][]string, workers)
	start := func(c *workflow.Client) {
		t.Helper()
		done := make(chan error, workers)
		for w := range workers {
			go func() {
				for range each {
					run, err := c.Start(ctxb, "ob", nil, &workflow.StartOptions{OrderingKey: fmt.Sprintf("w%d", w)})
					if err != nil {
						done <- err
						return
					}
					ids[w] = append(ids[w], run.ID)
				}
				done <- nil
			}()
		}
		for range workers {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	}
	start(off)
	closeClient(t, off)
	on := r.open(r.rdb, workflow.ClientConfig{}) // drains while more starts come
	start(on)
	if _, err := on.FlushOutbox(ctxb); err != nil {
		t.Fatal(err)
	}
	if n := r.count(); n != 2*workers*each {
		t.Fatalf("%d runs; want %d", n, 2*workers*each)
	}
	for w := range workers {
		line, err := on.OrderingKey(ctxb, workflow.KeyLine{Key: fmt.Sprintf("w%d", w)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, run := range append(line.Active, line.Waiting...) {
			got = append(got, run.ID)
		}
		if strings.Join(got, " ") != strings.Join(ids[w], " ") {
			t.Fatalf("key w%d's line\n%v\nwant\n%v", w, got, ids[w])
		}
	}
}
