package tasks_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/embedded"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/tasks"
)

// TestPromoteDue: a scheduled task is indexed by its millisecond and moved
// to pending at that millisecond, never one before; a task that left the
// scheduled set meanwhile (asynq's forwarder or an operator moved it, or it
// was deleted) only leaves the index; the index says what is due next.
func TestPromoteDue(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, nil).Client(t)
	const queue = "timers"
	k := tasks.QueueKeys(queue)
	w := tasks.NewLuaTaskWriter(rdb)
	// Not on a whole second: asynq's own schedule keeps whole seconds.
	t0 := time.UnixMilli(time.Now().Add(time.Hour).Truncate(time.Second).UnixMilli() + 123)
	step := func(i int) tasks.Step {
		return tasks.Step{RunID: "r", Workflow: "w", Index: i, Name: "s", Attempt: 2}
	}
	write := func(i int, due time.Time, lua bool) string {
		t.Helper()
		s := step(i)
		var err error
		if lua {
			err = w.WriteStepTask(ctx, queue, s, time.Minute, due, t0.Add(-time.Minute))
		} else {
			err = w.WriteTask(ctx, queue, s.ID(), s.AsynqMessage(queue, time.Minute), due, t0.Add(-time.Minute))
		}
		if err != nil {
			t.Fatal(err)
		}
		return s.ID()
	}
	a := write(0, t0.Add(100*time.Millisecond), false)
	b := write(1, t0.Add(250*time.Millisecond), true)
	gone := write(2, t0.Add(100*time.Millisecond), false)
	ran := write(3, t0.Add(50*time.Millisecond), true)

	for id, due := range map[string]time.Time{a: t0.Add(100 * time.Millisecond), b: t0.Add(250 * time.Millisecond)} {
		score, err := rdb.ZScore(ctx, k.Timers(), id).Result()
		if err != nil || int64(score) != due.UnixMilli() {
			t.Fatalf("timers index entry of %s: %v, %v; want %d", id, score, err, due.UnixMilli())
		}
	}
	// (asynq's enqueue adds the queue to asynq:queues; the Store does for
	// the scripts.)
	if err := rdb.SAdd(ctx, tasks.AllQueues, queue).Err(); err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	if err := insp.DeleteTask(queue, gone); err != nil {
		t.Fatal(err)
	}
	if err := insp.RunTask(queue, ran); err != nil { // as asynqmon's "Run" does
		t.Fatal(err)
	}

	promote := func(now time.Time, limit int) tasks.Promoted {
		t.Helper()
		p, err := tasks.PromoteDue(ctx, rdb, queue, now.Add(-time.Second), now, limit)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	state := func(id string) asynq.TaskState {
		t.Helper()
		info, err := insp.GetTaskInfo(queue, id)
		if err != nil {
			t.Fatal(err)
		}
		return info.State
	}

	// One millisecond early: nothing of a moves (ran only leaves the index).
	if p := promote(t0.Add(99*time.Millisecond), 100); p.Moved != 0 || p.Read != 1 ||
		!p.Next.Equal(t0.Add(100*time.Millisecond)) {
		t.Fatalf("at due-1ms: %+v; want nothing moved, ran's entry read, next at a's due time", p)
	}
	if s := state(a); s != asynq.TaskStateScheduled {
		t.Fatalf("a is %v one millisecond before its due time", s)
	}
	if p := promote(t0.Add(100*time.Millisecond), 100); p.Moved != 1 || p.Read != 2 ||
		!p.Next.Equal(t0.Add(250*time.Millisecond)) {
		t.Fatalf("at a's due time: %+v; want a moved, gone read, next at b's", p)
	}
	if s := state(a); s != asynq.TaskStatePending {
		t.Fatalf("a is %v at its due time; want pending", s)
	}
	if s := state(b); s != asynq.TaskStateScheduled {
		t.Fatalf("b is %v before its due time", s)
	}
	if p := promote(t0.Add(time.Second), 100); p.Moved != 1 || !p.Next.IsZero() {
		t.Fatalf("after b's due time: %+v; want b moved and the index empty", p)
	}
	pending, err := rdb.LRange(ctx, k.Pending(), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 3 { // ran, a, b: each once
		t.Fatalf("pending holds %q; want ran, a and b once each", pending)
	}
	if n, _ := rdb.ZCard(ctx, k.Scheduled()).Result(); n != 0 {
		t.Fatalf("%d tasks left in asynq's scheduled set", n)
	}

	// At most limit a call; the rest the next.
	for i := 10; i < 15; i++ {
		write(i, t0, i%2 == 0)
	}
	if p := promote(t0, 2); p.Moved != 2 || p.Read != 2 || !p.Next.Equal(t0) {
		t.Fatalf("limit 2: %+v; want 2 moved and more due", p)
	}
	if p := promote(t0, 10); p.Moved != 3 || p.Read != 3 {
		t.Fatalf("the rest: %+v; want 3 moved", p)
	}
}

// TestAddTimer: a task asynq's own client scheduled (whole seconds) is
// promoted at its millisecond once indexed.
func TestAddTimer(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, nil).Client(t)
	const queue = "timers"
	now := time.Now().Truncate(time.Millisecond)
	due := now.Add(time.Hour + 300*time.Millisecond)
	s := tasks.Step{RunID: "r", Workflow: "w", Index: 1, Name: "s", Attempt: 2}
	client := asynq.NewClientFromRedisClient(rdb)
	if _, err := client.Enqueue(asynq.NewTask(tasks.TypeStep, s.Encode()),
		tasks.Options(queue, s.ID(), time.Minute, due, now)...); err != nil {
		t.Fatal(err)
	}
	if err := tasks.AddTimer(ctx, rdb, queue, s.ID(), due); err != nil {
		t.Fatal(err)
	}
	p, err := tasks.PromoteDue(ctx, rdb, queue, now, due, 10)
	if err != nil || p.Moved != 1 {
		t.Fatalf("promote at the due time: %+v, %v; want the task moved", p, err)
	}
	if n, err := rdb.LLen(ctx, tasks.QueueKeys(queue).Pending()).Result(); err != nil || n != 1 {
		t.Fatalf("pending: %d, %v", n, err)
	}
}

// TestPromoteDueEmbedded: the promoter's script runs on the embedded store
// (miniredis, `make run`) as on Redis: a due task moves, a later one stays.
func TestPromoteDueEmbedded(t *testing.T) {
	store, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	rdb := redis.NewClient(&redis.Options{Addr: store.Addr(), Protocol: 2})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	const queue = "embedded"
	now := time.Now().Truncate(time.Millisecond)
	w := tasks.NewLuaTaskWriter(rdb)
	var ids []string
	for i, due := range []time.Time{now.Add(time.Hour + 100*time.Millisecond), now.Add(time.Hour + 900*time.Millisecond)} {
		s := tasks.Step{RunID: "r", Workflow: "w", Index: i, Name: "s", Attempt: 2}
		if err := w.WriteTask(ctx, queue, s.ID(), s.AsynqMessage(queue, time.Minute), due, now); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID())
	}
	p, err := tasks.PromoteDue(ctx, rdb, queue, now, now.Add(time.Hour+500*time.Millisecond), 10)
	if err != nil || p.Moved != 1 || p.Read != 1 || !p.Next.Equal(now.Add(time.Hour+900*time.Millisecond)) {
		t.Fatalf("promote: %+v, %v; want the first task moved, the second next", p, err)
	}
	pending, err := rdb.LRange(ctx, tasks.QueueKeys(queue).Pending(), 0, -1).Result()
	if err != nil || len(pending) != 1 || pending[0] != ids[0] {
		t.Fatalf("pending %q, %v; want %s", pending, err, ids[0])
	}
}
