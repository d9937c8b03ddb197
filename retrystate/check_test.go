package retrystate_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// TestCheckTasks: one pipeline checks every run and repairs each missing
// task (written for its due time, the queue listed in asynq:queues); a
// healthy run is left alone; a run whose script fails has its own error
// and the others go on; after the server's script cache was flushed (a
// restart) the calls are sent again; and with Redis unreachable the whole
// call fails.
func TestCheckTasks(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t, nil).Client(t)
	s := retrystate.New(rdb, "chk")
	task := func(id string, attempt int) string { return tasks.QueueKeys("chk").Task(tasks.ID(id, 0, attempt, 0)) }
	healthy, missing, retry, corrupt := runID(1), runID(2), runID(3), runID(4)
	for _, id := range []string{healthy, missing, retry} {
		create(t, s, id, t0, "a")
	}
	rdb.HSet(ctxb, task(healthy, 1), "msg", "m", "state", "pending")
	begin(t, s, retry, 0, tasks.ID(retry, 0, 1, 0), "tok", t0)
	f, err := s.Fail(ctxb, retrystate.FailParams{RunID: retry, Index: 0, Token: "tok", Error: "boom",
		Class: retrystate.ClassTransient, Delay: time.Hour, Retention: time.Hour, Now: t0})
	if err != nil || f.Outcome != retrystate.OutcomeRetry || f.Enqueued {
		t.Fatalf("fail: %+v %v", f, err)
	}
	// Not a run hash: its script fails.
	rdb.Set(ctxb, "cairn:{chk}:run:"+corrupt, "x", 0)

	now := t0.Add(time.Minute)
	args := retrystate.CheckParams{Grace: 10 * time.Second, MaxAuto: 3, Now: now}
	check := func(ctx context.Context, ids ...string) map[string]retrystate.Check {
		t.Helper()
		cs, err := s.CheckTasks(ctx, ids, args)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]retrystate.Check{}
		for i, c := range cs {
			if c.RunID != ids[i] {
				t.Fatalf("check %d is of run %s, want %s", i, c.RunID, ids[i])
			}
			out[c.RunID] = c
		}
		return out
	}
	got := check(ctxb, healthy, missing, corrupt, retry)
	if c := got[healthy]; c.Err != nil || c.Result.Outcome != retrystate.OutcomeNoop || c.Result.Reason != "task pending" {
		t.Errorf("healthy run: %+v", c)
	}
	if c := got[missing]; c.Err != nil || c.Result.Outcome != retrystate.OutcomeDispatch || !c.Result.Enqueued ||
		c.Result.Kind != "task_missing" {
		t.Errorf("run whose task is missing: %+v", c)
	}
	if c := got[retry]; c.Err != nil || c.Result.Outcome != retrystate.OutcomeDispatch || c.Result.Kind != "retry_task_missing" ||
		!c.Result.Dispatch.DueAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("run whose retry's task is missing: %+v", c)
	}
	if c := got[corrupt]; c.Err == nil || !strings.Contains(c.Err.Error(), "WRONGTYPE") || c.Result.Outcome != "" {
		t.Errorf("run whose script fails: %+v; want its error (WRONGTYPE)", c)
	}
	if st := rdb.HGet(ctxb, task(missing, 1), "state").Val(); st != "pending" {
		t.Errorf("the missing task is %q after the check, want pending", st)
	}
	due, err := rdb.ZScore(ctxb, tasks.QueueKeys("chk").Scheduled(), tasks.ID(retry, 0, 2, 0)).Result()
	if err != nil || int64(due) != t0.Add(time.Hour).Unix() {
		t.Errorf("the retry's task is scheduled at %v (%v), want %d", due, err, t0.Add(time.Hour).Unix())
	}
	if ok, err := rdb.SIsMember(ctxb, "asynq:queues", "chk").Result(); err != nil || !ok {
		t.Errorf("the queue is not in asynq:queues: %v", err)
	}

	// The script cache flushed: the calls are sent again.
	if err := rdb.ScriptFlush(ctxb).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctxb, task(missing, 1))
	args.Now = now.Add(time.Minute) // the repair's grace over
	got = check(ctxb, healthy, missing)
	if c := got[missing]; c.Err != nil || c.Result.Outcome != retrystate.OutcomeDispatch {
		t.Errorf("after SCRIPT FLUSH: %+v", c)
	}
	if c := got[healthy]; c.Err != nil || c.Result.Outcome != retrystate.OutcomeNoop {
		t.Errorf("after SCRIPT FLUSH: %+v", c)
	}

	// Redis unreachable: no check, the call's error.
	gone := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer func() { _ = gone.Close() }()
	if cs, err := retrystate.New(gone, "chk").CheckTasks(ctxb, []string{healthy}, args); err == nil {
		t.Errorf("with Redis unreachable: %+v, no error", cs)
	}
}

// TestIndexPages: a walk of an index page by page reads each entry once, in
// score order, also when more entries than a page share one score, and
// ends (done, the cursor back at the start) after the last; IdlePage reads
// only the entries at or before its bound.
func TestIndexPages(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	key := "cairn:{" + s.Queue() + "}:idx:scheduled"
	var want []string
	add := func(score int64, n int) {
		for range n {
			id := runID(len(want) + 1)
			rdb.ZAdd(ctxb, key, redis.Z{Score: float64(score), Member: id})
			want = append(want, id)
		}
	}
	add(t0.UnixMilli(), 7) // more than a page of one score
	add(t0.UnixMilli()+1, 2)
	add(t0.UnixMilli()+2, 1)
	add(t0.UnixMilli()+3, 5)
	for _, limit := range []int64{1, 3, 4, 7, 100} {
		var got []string
		var at retrystate.IndexCursor
		for pages := 0; ; pages++ {
			if pages > len(want)+1 {
				t.Fatalf("limit %d: the walk does not end; read %v", limit, got)
			}
			page, next, done, err := s.ScheduledPage(ctxb, at, limit)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(page)) > limit {
				t.Fatalf("limit %d: a page of %d", limit, len(page))
			}
			for _, d := range page {
				got = append(got, d.RunID)
			}
			at = next
			if done {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: read\n%v\nwant\n%v", limit, got, want)
		}
		if at != (retrystate.IndexCursor{}) {
			t.Errorf("limit %d: the cursor after the walk is %+v, not the start", limit, at)
		}
	}

	// idx:active, up to a bound.
	active := "cairn:{" + s.Queue() + "}:idx:active"
	for i := range 5 {
		rdb.ZAdd(ctxb, active, redis.Z{Score: float64(t0.UnixMilli() + int64(i)), Member: fmt.Sprint(i)})
	}
	var got []string
	var at retrystate.IndexCursor
	for {
		page, next, done, err := s.IdlePage(ctxb, at, t0.Add(2*time.Millisecond), 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page {
			got = append(got, d.RunID)
		}
		at = next
		if done {
			break
		}
	}
	if !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Errorf("idle runs: %v, want 0 1 2", got)
	}
}

// TestUnscheduled: the runs not in idx:scheduled, in their order.
func TestUnscheduled(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	key := "cairn:{" + s.Queue() + "}:idx:scheduled"
	rdb.ZAdd(ctxb, key, redis.Z{Score: 1, Member: "b"}, redis.Z{Score: 2, Member: "d"})
	got, err := s.Unscheduled(ctxb, []string{"a", "b", "c", "d", "e"})
	if err != nil || !slices.Equal(got, []string{"a", "c", "e"}) {
		t.Errorf("Unscheduled: %v, %v; want a c e", got, err)
	}
	if got, err := s.Unscheduled(ctxb, nil); err != nil || len(got) != 0 {
		t.Errorf("Unscheduled of none: %v, %v", got, err)
	}
}
