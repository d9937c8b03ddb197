package engine

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/tasks"
)

// startPromoter runs a promoter of queue on rdb, with lead and poll, until
// the test ends, and waits for its first look.
func startPromoter(t *testing.T, rdb *redis.Client, queue string, lead, poll time.Duration) *promoter {
	t.Helper()
	p := newPromoter(rdb, queue, core.SystemClock, slog.New(slog.DiscardHandler), lead)
	p.poll = poll
	p.looked.Init()
	ctx, cancel := context.WithCancel(context.Background())
	done := p.start(ctx)
	t.Cleanup(func() {
		cancel()
		<-done
	})
	if _, ok := p.looked.Wait(time.Minute); !ok {
		t.Fatal("the promoter did not look within a minute")
	}
	return p
}

// scheduleTask writes a scheduled step task due at due, as the scripts do
// (put_task: indexed by its millisecond).
func scheduleTask(t *testing.T, rdb *redis.Client, queue string, idx int, due time.Time) string {
	t.Helper()
	s := tasks.Step{RunID: "r", Workflow: "w", Index: idx, Name: "s", Attempt: 2}
	if err := tasks.NewLuaTaskWriter(rdb).WriteTask(context.Background(), queue, s.ID(),
		s.AsynqMessage(queue, time.Minute), due, time.Now()); err != nil {
		t.Fatal(err)
	}
	return s.ID()
}

// waitMoved waits for the look that moves a task, and returns the time
// asynq's record says the task became pending.
func waitMoved(t *testing.T, rdb *redis.Client, p *promoter, queue, id string) time.Time {
	t.Helper()
	for {
		res, ok := p.looked.Wait(time.Minute)
		if !ok {
			t.Fatalf("task %s was not promoted within a minute", id)
		}
		if res.Moved == 0 {
			continue
		}
		h, err := rdb.HMGet(context.Background(), tasks.QueueKeys(queue).Task(id), "state", "pending_since").Result()
		if err != nil {
			t.Fatal(err)
		}
		if h[0] != "pending" {
			t.Fatalf("task %s promoted, state %v", id, h[0])
		}
		since, _ := h[1].(string)
		ns, err := strconv.ParseInt(since, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return time.Unix(0, ns)
	}
}

// A task this process schedules wakes the promoter, which moves it no
// sooner than lead before its due time (here with no poll to fall back
// on); a task another process scheduled is found by the next poll.
func TestPromoter(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t, nil).Client(t)
	const lead = 30 * time.Millisecond

	t.Run("woken", func(t *testing.T) {
		p := startPromoter(t, rdb, "woken", lead, time.Hour)
		due := time.Now().Add(150 * time.Millisecond).Truncate(time.Millisecond)
		id := scheduleTask(t, rdb, "woken", 0, due)
		p.wake(due)
		if at := waitMoved(t, rdb, p, "woken", id); at.Before(due.Add(-lead)) {
			t.Errorf("moved at %s, more than %s before its due time %s", at, lead, due)
		}
	})
	t.Run("polled", func(t *testing.T) {
		p := startPromoter(t, rdb, "polled", lead, 100*time.Millisecond)
		due := time.Now().Add(300 * time.Millisecond).Truncate(time.Millisecond)
		id := scheduleTask(t, rdb, "polled", 1, due) // and nobody wakes it
		if at := waitMoved(t, rdb, p, "polled", id); at.Before(due.Add(-lead)) {
			t.Errorf("moved at %s, more than %s before its due time %s", at, lead, due)
		}
	})
}
