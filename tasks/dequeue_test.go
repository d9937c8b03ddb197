package tasks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/tasks"
)

// dequeueFixture is a queue with asynq's client and inspector on a real
// Redis.
type dequeueFixture struct {
	t      *testing.T
	ctx    context.Context
	rdb    *redis.Client
	queue  string
	client *asynq.Client
	insp   *asynq.Inspector
}

func newDequeueFixture(t *testing.T, queue string) *dequeueFixture {
	t.Helper()
	rdb := redistest.Start(t, nil).Client(t)
	f := &dequeueFixture{t: t, ctx: context.Background(), rdb: rdb, queue: queue,
		client: asynq.NewClientFromRedisClient(rdb), insp: asynq.NewInspectorFromRedisClient(rdb)}
	return f
}

// enqueue enqueues a task with asynq's own client.
func (f *dequeueFixture) enqueue(id string, opts ...asynq.Option) {
	f.t.Helper()
	opts = append([]asynq.Option{asynq.Queue(f.queue), asynq.TaskID(id)}, opts...)
	if _, err := f.client.Enqueue(asynq.NewTask("job", []byte("payload "+id)), opts...); err != nil {
		f.t.Fatal(err)
	}
}

// state returns asynq's view of task id.
func (f *dequeueFixture) state(id string) *asynq.TaskInfo {
	f.t.Helper()
	info, err := f.insp.GetTaskInfo(f.queue, id)
	if err != nil {
		f.t.Fatalf("GetTaskInfo(%s): %v", id, err)
	}
	return info
}

// take claims and takes the next task, which must be id.
func (f *dequeueFixture) take(d *tasks.Dequeuer, id string) *tasks.Message {
	f.t.Helper()
	got, err := d.Claim(f.ctx, time.Second)
	if err != nil || got != id {
		f.t.Fatalf("Claim = %q, %v; want %q", got, err, id)
	}
	m, out, err := d.Take(f.ctx, got, time.Now())
	if err != nil || out != tasks.Taken {
		f.t.Fatalf("Take(%s) = %v, %v", id, out, err)
	}
	return m
}

// TestDequeueTakeAndDone: Claim takes the oldest pending task (asynq's
// order), Take makes it active with its lease as asynq's dequeue does, and
// Done acknowledges it as asynq does: deleted (or completed, with a
// retention), the processed counters counted, which asynq's Inspector
// reads back.
func TestDequeueTakeAndDone(t *testing.T) {
	f := newDequeueFixture(t, "dq_done")
	d := tasks.NewDequeuer(f.rdb, f.queue, "w1")
	f.enqueue("a")
	f.enqueue("b", asynq.Retention(time.Hour), asynq.MaxRetry(3))

	start := time.Now()
	ma := f.take(d, "a")
	if ma.Type != "job" || string(ma.Payload) != "payload a" || ma.ID != "a" || ma.Queue != f.queue {
		t.Fatalf("message of a: %+v", ma)
	}
	if info := f.state("a"); info.State != asynq.TaskStateActive {
		t.Fatalf("a is %v, want active", info.State)
	}
	score, err := f.rdb.ZScore(f.ctx, tasks.QueueKeys(f.queue).Lease(), "a").Result()
	if err != nil || int64(score) < start.Add(tasks.AsynqLeaseDuration).Unix() {
		t.Fatalf("lease of a: %v, %v", score, err)
	}
	if n, _ := f.rdb.LLen(f.ctx, tasks.QueueKeys(f.queue).Claim("w1")).Result(); n != 0 {
		t.Fatalf("claim list holds %d IDs after the take", n)
	}
	if err := d.Done(f.ctx, ma, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.insp.GetTaskInfo(f.queue, "a"); !errors.Is(err, asynq.ErrTaskNotFound) {
		t.Fatalf("a after Done: %v, want not found", err)
	}
	mb := f.take(d, "b")
	if mb.Retry != 3 || mb.Retention != 3600 {
		t.Fatalf("message of b: %+v", mb)
	}
	if err := d.Done(f.ctx, mb, time.Now()); err != nil {
		t.Fatal(err)
	}
	if info := f.state("b"); info.State != asynq.TaskStateCompleted || info.CompletedAt.IsZero() {
		t.Fatalf("b after Done: %v completed at %v, want completed", info.State, info.CompletedAt)
	}
	// Done again: no longer active.
	if err := d.Done(f.ctx, mb, time.Now()); !errors.Is(err, tasks.ErrNotActive) {
		t.Fatalf("second Done: %v, want ErrNotActive", err)
	}
	qi, err := f.insp.GetQueueInfo(f.queue)
	if err != nil {
		t.Fatal(err)
	}
	if qi.Processed != 2 || qi.ProcessedTotal != 2 || qi.Failed != 0 || qi.Completed != 1 || qi.Active != 0 {
		t.Fatalf("queue stats %+v, want 2 processed, 1 completed", qi)
	}
}

// TestDequeueRetryAndArchive: Retry moves the task to asynq's retry set
// with its retried count, error and due second (and Cairn's timers index at
// the millisecond); a failure is counted, a handing back is not; Archive
// archives it with its error; both as asynq's Inspector reads them.
func TestDequeueRetryAndArchive(t *testing.T) {
	f := newDequeueFixture(t, "dq_retry")
	k := tasks.QueueKeys(f.queue)
	d := tasks.NewDequeuer(f.rdb, f.queue, "w1")
	f.enqueue("a", asynq.MaxRetry(5))
	m := f.take(d, "a")
	at := time.Now().Add(time.Hour + 250*time.Millisecond)
	if err := d.Retry(f.ctx, m, at, "boom", true, time.Now()); err != nil {
		t.Fatal(err)
	}
	info := f.state("a")
	if info.State != asynq.TaskStateRetry || info.Retried != 1 || info.LastErr != "boom" ||
		info.NextProcessAt.Unix() != at.Unix() || info.LastFailedAt.IsZero() {
		t.Fatalf("a after Retry: %+v", info)
	}
	if ms, err := f.rdb.ZScore(f.ctx, k.Timers(), "a").Result(); err != nil || int64(ms) != at.UnixMilli() {
		t.Fatalf("timers entry of a: %v, %v; want %d", ms, err, at.UnixMilli())
	}
	// The promoter takes it at its millisecond, not before.
	p, err := tasks.PromoteDue(f.ctx, f.rdb, f.queue, time.Now(), at.Add(-time.Millisecond), 10)
	if err != nil || p.Moved != 0 {
		t.Fatalf("PromoteDue before the due time: %+v, %v", p, err)
	}
	p, err = tasks.PromoteDue(f.ctx, f.rdb, f.queue, time.Now(), at, 10)
	if err != nil || p.Moved != 1 {
		t.Fatalf("PromoteDue at the due time: %+v, %v", p, err)
	}
	if info := f.state("a"); info.State != asynq.TaskStatePending {
		t.Fatalf("a after its promotion: %v, want pending", info.State)
	}
	m = f.take(d, "a")
	if m.Retried != 1 || m.ErrorMsg != "boom" {
		t.Fatalf("message after a retry: %+v", m)
	}
	// Handed back (not a failure): the retried count stays.
	if err := d.Retry(f.ctx, m, time.Now(), "later", false, time.Now()); err != nil {
		t.Fatal(err)
	}
	if info := f.state("a"); info.Retried != 1 || info.State != asynq.TaskStateRetry {
		t.Fatalf("a after a non-failure retry: %+v", info)
	}
	qi, err := f.insp.GetQueueInfo(f.queue)
	if err != nil {
		t.Fatal(err)
	}
	if qi.Processed != 1 || qi.Failed != 1 || qi.Retry != 1 {
		t.Fatalf("queue stats %+v, want 1 processed, 1 failed, 1 retry", qi)
	}
	// The fallback forwarder (Housekeep) moves the due retry once the
	// second after its score began (never early), not before.
	retryAt := time.Unix(int64(mustScore(t, f, k.Retry(), "a")), 0)
	h, err := d.Housekeep(f.ctx, retryAt.Add(999*time.Millisecond), 10*time.Second)
	if err != nil || h.Forwarded != 0 {
		t.Fatalf("Housekeep within the retry's second: %+v, %v; want none forwarded", h, err)
	}
	h, err = d.Housekeep(f.ctx, retryAt.Add(time.Second), 10*time.Second)
	if err != nil || h.Forwarded != 1 {
		t.Fatalf("Housekeep: %+v, %v; want 1 forwarded", h, err)
	}
	m = f.take(d, "a")
	if err := d.Archive(f.ctx, m, "gave up", time.Now()); err != nil {
		t.Fatal(err)
	}
	if info := f.state("a"); info.State != asynq.TaskStateArchived || info.LastErr != "gave up" || info.Retried != 1 {
		t.Fatalf("a after Archive: %+v", info)
	}
	if qi, _ := f.insp.GetQueueInfo(f.queue); qi.Processed != 2 || qi.Failed != 2 || qi.Archived != 1 {
		t.Fatalf("queue stats %+v, want 2 processed, 2 failed, 1 archived", qi)
	}
}

// TestDequeuePauseAndRequeue: on a queue paused by asynq's Inspector, Take
// puts the claimed ID back where asynq takes from; Requeue hands a running
// task back to the head of the queue.
func TestDequeuePauseAndRequeue(t *testing.T) {
	f := newDequeueFixture(t, "dq_pause")
	d := tasks.NewDequeuer(f.rdb, f.queue, "w1")
	f.enqueue("a")
	f.enqueue("b")
	if err := f.insp.PauseQueue(f.queue); err != nil {
		t.Fatal(err)
	}
	id, err := d.Claim(f.ctx, time.Second)
	if err != nil || id != "a" {
		t.Fatalf("Claim = %q, %v", id, err)
	}
	if _, out, err := d.Take(f.ctx, id, time.Now()); err != nil || out != tasks.TakePaused {
		t.Fatalf("Take on a paused queue: %v, %v", out, err)
	}
	if paused, err := d.Paused(f.ctx); err != nil || !paused {
		t.Fatalf("Paused = %v, %v", paused, err)
	}
	if err := f.insp.UnpauseQueue(f.queue); err != nil {
		t.Fatal(err)
	}
	ma := f.take(d, "a") // still first
	if info := f.state("a"); info.State != asynq.TaskStateActive {
		t.Fatalf("a is %v", info.State)
	}
	if err := d.Requeue(f.ctx, ma.ID); err != nil {
		t.Fatal(err)
	}
	if info := f.state("a"); info.State != asynq.TaskStatePending {
		t.Fatalf("a after Requeue: %v", info.State)
	}
	f.take(d, "a") // the head of the queue again, before b
}

// TestDequeueRecovery: the claim list of a worker killed between its
// BLMOVE and its take goes back to pending once its heartbeat expires (the
// first of its IDs first); a task whose lease expired long enough ago is
// returned for asynq's recoverer treatment; a deleted task's ID only
// leaves; a clean Leave hands the claims back at once.
func TestDequeueRecovery(t *testing.T) {
	f := newDequeueFixture(t, "dq_recover")
	k := tasks.QueueKeys(f.queue)
	dead := tasks.NewDequeuer(f.rdb, f.queue, "dead")
	live := tasks.NewDequeuer(f.rdb, f.queue, "live")
	now := time.Now()
	if _, err := dead.Housekeep(f.ctx, now, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "gone", "c"} {
		f.enqueue(id)
	}
	for _, want := range []string{"a", "b", "gone"} {
		if id, err := dead.Claim(f.ctx, time.Second); err != nil || id != want {
			t.Fatalf("Claim = %q, %v; want %q", id, err, want)
		}
	}
	if err := f.rdb.Del(f.ctx, k.Task("gone")).Err(); err != nil {
		t.Fatal(err)
	}
	// While its heartbeat lasts, the claims stay.
	h, err := live.Housekeep(f.ctx, now.Add(5*time.Second), 10*time.Second)
	if err != nil || h.HandedBack != 0 {
		t.Fatalf("Housekeep with the heartbeat alive: %+v, %v", h, err)
	}
	h, err = live.Housekeep(f.ctx, now.Add(11*time.Second), 10*time.Second)
	if err != nil || h.HandedBack != 2 {
		t.Fatalf("Housekeep after the heartbeat expired: %+v, %v; want 2 handed back", h, err)
	}
	for _, id := range []string{"a", "b"} {
		if info := f.state(id); info.State != asynq.TaskStatePending {
			t.Fatalf("%s after recovery: %v", id, info.State)
		}
	}
	if n, _ := f.rdb.Exists(f.ctx, k.Claim("dead")).Result(); n != 0 {
		t.Fatal("the dead worker's claim list is still there")
	}
	if n, _ := f.rdb.ZCard(f.ctx, k.Fetchers()).Result(); n != 1 {
		t.Fatalf("%d fetchers, want the live one", n)
	}
	// The oldest claim first, then the others in asynq's order.
	ma := f.take(live, "a")
	f.take(live, "b")
	f.take(live, "c")

	// A lease nobody extended, expired more than 30 s ago: returned.
	if err := f.rdb.ZAdd(f.ctx, k.Lease(), redis.Z{Score: float64(now.Add(-31 * time.Second).Unix()), Member: "a"}).Err(); err != nil {
		t.Fatal(err)
	}
	h, err = live.Housekeep(f.ctx, now, 10*time.Second)
	if err != nil || len(h.Expired) != 1 || h.Expired[0].ID != "a" {
		t.Fatalf("Housekeep with an expired lease: %+v, %v", h, err)
	}
	// Extended: not returned.
	if err := live.ExtendLeases(f.ctx, []string{"a", "nope"}, now); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.rdb.ZCard(f.ctx, k.Lease()).Result(); n != 3 {
		t.Fatalf("%d leases, want 3 (ExtendLeases must not add one)", n)
	}
	if h, err = live.Housekeep(f.ctx, now, 10*time.Second); err != nil || len(h.Expired) != 0 {
		t.Fatalf("Housekeep after ExtendLeases: %+v, %v", h, err)
	}
	if err := live.Done(f.ctx, ma, now); err != nil {
		t.Fatal(err)
	}

	// A clean exit hands the claims back at once.
	f.enqueue("d")
	if id, err := live.Claim(f.ctx, time.Second); err != nil || id != "d" {
		t.Fatalf("Claim = %q, %v", id, err)
	}
	if err := live.Leave(f.ctx); err != nil {
		t.Fatal(err)
	}
	if info := f.state("d"); info.State != asynq.TaskStatePending {
		t.Fatalf("d after Leave: %v", info.State)
	}
	if n, _ := f.rdb.ZCard(f.ctx, k.Fetchers()).Result(); n != 0 {
		t.Fatalf("%d fetchers after Leave", n)
	}
}

// TestMessageRoundTrip: a message asynq wrote is read and written back
// with every field (asynq's Inspector reads the written one the same).
func TestMessageRoundTrip(t *testing.T) {
	f := newDequeueFixture(t, "dq_msg")
	k := tasks.QueueKeys(f.queue)
	if _, err := f.client.Enqueue(asynq.NewTaskWithHeaders("job", []byte{0, 1, 2}, map[string]string{"x": "1", "y": "2"}),
		asynq.Queue(f.queue), asynq.TaskID("a"), asynq.MaxRetry(7), asynq.Timeout(time.Minute),
		asynq.Deadline(time.Unix(2000000000, 0)), asynq.Retention(time.Hour)); err != nil {
		t.Fatal(err)
	}
	raw, err := f.rdb.HGet(f.ctx, k.Task("a"), tasks.MessageField).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	m, err := tasks.ParseMessage(raw)
	if err != nil {
		t.Fatal(err)
	}
	if m.Retry != 7 || m.Timeout != 60 || m.Deadline != 2000000000 || m.Retention != 3600 ||
		m.Headers["x"] != "1" || m.Headers["y"] != "2" || string(m.Payload) != "\x00\x01\x02" {
		t.Fatalf("parsed %+v", m)
	}
	back, err := tasks.ParseMessage(m.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if string(back.Encode()) != string(m.Encode()) || back.ID != "a" || back.Headers["y"] != "2" {
		t.Fatalf("round trip: %+v", back)
	}
	m.Retried, m.ErrorMsg = 3, "e"
	if err := f.rdb.HSet(f.ctx, k.Task("a"), tasks.MessageField, m.Encode()).Err(); err != nil {
		t.Fatal(err)
	}
	info := f.state("a")
	if info.Retried != 3 || info.LastErr != "e" || info.MaxRetry != 7 || info.Timeout != time.Minute ||
		info.Retention != time.Hour || string(info.Payload) != "\x00\x01\x02" {
		t.Fatalf("asynq reads the written message as %+v", info)
	}
}

func mustScore(t *testing.T, f *dequeueFixture, key, member string) float64 {
	t.Helper()
	v, err := f.rdb.ZScore(f.ctx, key, member).Result()
	if err != nil {
		t.Fatalf("ZSCORE %s %s: %v", key, member, err)
	}
	return v
}

// TestDequeueTakeNext: a worker that found work takes the next task in one
// call, as asynq's dequeue does: the oldest first, active with its lease;
// nothing moves on a paused queue; an empty queue answers TakeEmpty.
func TestDequeueTakeNext(t *testing.T) {
	f := newDequeueFixture(t, "dq_next")
	d := tasks.NewDequeuer(f.rdb, f.queue, "w1")
	f.enqueue("a")
	f.enqueue("b")
	m, out, err := d.TakeNext(f.ctx, time.Now())
	if err != nil || out != tasks.Taken || m.ID != "a" {
		t.Fatalf("TakeNext = %+v, %v, %v; want a", m, out, err)
	}
	if info := f.state("a"); info.State != asynq.TaskStateActive {
		t.Fatalf("a is %v", info.State)
	}
	if _, err := f.rdb.ZScore(f.ctx, tasks.QueueKeys(f.queue).Lease(), "a").Result(); err != nil {
		t.Fatalf("no lease for a: %v", err)
	}
	if err := f.insp.PauseQueue(f.queue); err != nil {
		t.Fatal(err)
	}
	if _, out, err := d.TakeNext(f.ctx, time.Now()); err != nil || out != tasks.TakePaused {
		t.Fatalf("TakeNext on a paused queue: %v, %v", out, err)
	}
	if info := f.state("b"); info.State != asynq.TaskStatePending {
		t.Fatalf("b on a paused queue: %v", info.State)
	}
	if err := f.insp.UnpauseQueue(f.queue); err != nil {
		t.Fatal(err)
	}
	if m, out, err := d.TakeNext(f.ctx, time.Now()); err != nil || out != tasks.Taken || m.ID != "b" {
		t.Fatalf("TakeNext = %+v, %v, %v; want b", m, out, err)
	}
	if _, out, err := d.TakeNext(f.ctx, time.Now()); err != nil || out != tasks.TakeEmpty {
		t.Fatalf("TakeNext on an empty queue: %v, %v", out, err)
	}
	if err := d.Done(f.ctx, m, time.Now()); err != nil {
		t.Fatal(err)
	}
}
