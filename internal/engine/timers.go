package engine

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/internal/testsignal"
	"github.com/cairnhq/cairn/tasks"
)

// The promoter: timers to the millisecond.
//
// A retry, a snooze, a sleep's or an await's wake-up, a breaker's deferral
// and a repaired timer are asynq tasks scheduled for a due time; asynq keeps
// whole seconds (rounded up, so never early) and forwards due tasks every
// DelayedTaskCheckInterval. Every script that schedules one also indexes it
// by its millisecond (tasks.Keys.Timers), and each worker runs a promoter
// that moves the due ones to pending when their millisecond comes
// (tasks.PromoteDue): it sleeps until the earliest due time the index
// holds, and is woken sooner when this process schedules an earlier one
// (dispatcher.scheduled).
//
// It moves them a little ahead of time, by lead: an idle asynq worker polls
// its queue every TaskCheckInterval, give or take half of it (asynq's
// jitter), so a task that became pending at its due time would start up to
// 1.5 TaskCheckInterval late. Moved lead ahead (1.5 TaskCheckInterval), it
// is fetched by its due time, and the attempt still never begins early:
// begin.lua answers "early" before the due millisecond, and the engine
// waits the rest out in-process (Engine.begin, MaxEarlyWait) before it
// begins it. Timers another process schedules are seen at the
// next look, at most promotePoll later (and asynq's forwarder, at the whole
// second, remains the fallback whatever happens to promoters).

const (
	// promotePoll is the longest the promoter sleeps without looking:
	// how late a timer scheduled by another process (a CLI, a client
	// without a worker) can be promoted. One script call per second on an
	// idle queue.
	promotePoll = time.Second
	// promoteBatch is the most tasks one script moves.
	promoteBatch = 200
)

// promoter moves a queue's due timers to pending (see above).
type promoter struct {
	rdb   redis.Scripter
	queue string
	clock core.Clock
	log   core.Logger
	// lead is how far ahead of its due time a task is moved (see above).
	lead time.Duration
	// poll is the longest it sleeps without looking (promotePoll).
	poll time.Duration

	mu sync.Mutex
	// soonest is the earliest time to look that this process's scheduled
	// tasks ask for (a due time less lead) since the last look (zero:
	// none); kick wakes the sleeping loop.
	soonest time.Time
	kick    chan struct{}

	// looked signals each look, with what it did (tests wait on it).
	looked testsignal.Signal[tasks.Promoted]
}

// promoteLead is how far ahead of its due time a task is promoted for an
// asynq server that fetches every taskCheck: the longest its idle fetch
// sleeps (the interval and half of it as jitter), never more than an early
// delivery waits in-process (maxEarlyWait).
func promoteLead(taskCheck, maxEarlyWait time.Duration) time.Duration {
	return min(taskCheck*3/2, maxEarlyWait)
}

// start runs the promoter until ctx ends; the channel is closed when it
// has stopped.
func (p *promoter) start(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.run(ctx)
	}()
	return done
}

func newPromoter(rdb redis.Scripter, queue string, clock core.Clock, log core.Logger, lead time.Duration) *promoter {
	return &promoter{rdb: rdb, queue: queue, clock: clock, log: log, lead: lead, poll: promotePoll,
		kick: make(chan struct{}, 1)}
}

// wake tells the promoter that a task is due at due: it looks then, if that
// is sooner than it planned to. Safe on a nil promoter (a client's
// dispatcher has none).
func (p *promoter) wake(due time.Time) {
	if p == nil || due.IsZero() {
		return
	}
	at := due.Add(-p.lead)
	p.mu.Lock()
	if p.soonest.IsZero() || at.Before(p.soonest) {
		p.soonest = at
	}
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// run promotes due timers until ctx ends.
func (p *promoter) run(ctx context.Context) {
	failing := false
	for ctx.Err() == nil {
		now := p.clock.Now()
		p.mu.Lock()
		p.soonest = time.Time{}
		p.mu.Unlock()
		res, err := tasks.PromoteDue(ctx, p.rdb, p.queue, now, now.Add(p.lead), promoteBatch)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				// Once per outage: asynq's forwarder moves the tasks at
				// their whole second meanwhile, if Redis answers it.
				p.log.Warn("cannot promote due timers; retrying", core.AttrError, err)
				failing = true
			}
			p.sleep(ctx, now.Add(p.poll))
			continue
		}
		if failing {
			p.log.Info("promoting due timers again")
			failing = false
		}
		p.looked.Signal(res)
		if res.Read == promoteBatch {
			continue // more may be due
		}
		until := now.Add(p.poll)
		if next := res.Next.Add(-p.lead); !res.Next.IsZero() && next.Before(until) {
			until = next
		}
		p.sleep(ctx, until)
	}
}

// sleep waits until the time until, by the promoter's clock, or sooner when wake
// names an earlier due time, or ctx ends.
func (p *promoter) sleep(ctx context.Context, until time.Time) {
	for {
		p.mu.Lock()
		if !p.soonest.IsZero() && p.soonest.Before(until) {
			until = p.soonest
		}
		p.mu.Unlock()
		d := until.Sub(p.clock.Now())
		if d <= 0 {
			return
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
			return
		case <-p.kick:
			t.Stop()
		}
	}
}
