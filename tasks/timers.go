package tasks

import (
	"context"
	_ "embed" // promote.lua
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Timers to the millisecond.
//
// asynq keeps a scheduled task's due time in whole seconds and moves it to
// pending when its forwarder next looks (every DelayedTaskCheckInterval),
// so a retry due in 150 ms starts up to a second and more late. Cairn keeps
// the exact due time too: every script that schedules a task also adds it
// to the queue's timers index (Keys.Timers, Unix ms), and each worker runs
// a promoter that sleeps until the earliest due time it knows and then
// moves the due tasks to pending (PromoteDue) in one script. asynq's own
// forwarder stays the fallback: it moves a task at its whole second, which
// is never before its due time (the second is rounded up), when no promoter
// did sooner.

// promoteSrc is promote.lua, the script of PromoteDue. A script of its
// own, not one of the functions of lua/ that the state scripts include.
//
//go:embed promote.lua
var promoteSrc string

// promoteScript runs promote.lua, on the keys Keys names (all in the
// queue's slot).
var promoteScript = sync.OnceValue(func() *redis.Script { return redis.NewScript(promoteSrc) })

// Promoted is what one PromoteDue did.
type Promoted struct {
	// Moved is the number of tasks moved to pending; Read the number of
	// index entries read (tasks asynq's forwarder moved first, or that
	// were deleted, are read and not moved). Read == the limit means more
	// may be due.
	Moved, Read int
	// Next is the earliest due time left in the index; zero when it is
	// empty.
	Next time.Time
}

// PromoteDue moves queue's scheduled tasks due at or before upTo (by the
// timers index, to the millisecond), at most limit of them, to pending, as
// asynq's forwarder would at the whole second, and reports what is due
// next. A task due after upTo is never moved. now is the time of the move
// (asynq's pending_since). Moving a task before its due time (upTo after
// now) is for a caller whose handler refuses to begin it early: the engine
// promotes a worker's fetch interval ahead, so that an idle worker's next
// poll finds the task by its due time, and waits out the rest in-process
// (begin.lua's "early").
func PromoteDue(ctx context.Context, rdb redis.Scripter, queue string, now, upTo time.Time, limit int) (Promoted, error) {
	k := QueueKeys(queue)
	v, err := promoteScript().Run(ctx, rdb, []string{k.Timers(), k.Scheduled(), k.Pending(), k.Retry()}, k.Task(""),
		strconv.FormatInt(now.UnixMilli(), 10), strconv.FormatInt(upTo.UnixMilli(), 10), limit).Slice()
	if err != nil {
		return Promoted{}, err
	}
	if len(v) != 3 {
		return Promoted{}, fmt.Errorf("tasks: promote_due answered %v", v)
	}
	moved, ok1 := v[0].(int64)
	read, ok2 := v[1].(int64)
	next, ok3 := v[2].(string)
	if !ok1 || !ok2 || !ok3 {
		return Promoted{}, fmt.Errorf("tasks: promote_due answered %v", v)
	}
	p := Promoted{Moved: int(moved), Read: int(read)}
	if next != "" {
		ms, err := strconv.ParseFloat(next, 64)
		if err != nil {
			return Promoted{}, fmt.Errorf("tasks: promote_due's next due time %q: %w", next, err)
		}
		p.Next = time.UnixMilli(int64(ms))
	}
	return p, nil
}

// AddTimer adds task id, scheduled for due on queue by asynq's own client
// (which keeps whole seconds), to the queue's timers index, so that a
// promoter moves it at due's millisecond. The task must have been
// scheduled for due rounded up to the second (Options): the index only
// makes it due sooner, never before due.
func AddTimer(ctx context.Context, rdb redis.Cmdable, queue, id string, due time.Time) error {
	return rdb.ZAdd(ctx, QueueKeys(queue).Timers(), redis.Z{Score: float64(due.UnixMilli()), Member: id}).Err()
}
