package tasks

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cairn's own dequeue.
//
// A Cairn worker does not run asynq's processor on its queue: asynq's fetch
// loop polls (an idle server sleeps TaskCheckInterval between looks), which
// is both the wait before every step of an idle worker and nearly all of an
// idle worker's Redis cost. A Dequeuer fetches asynq's tasks itself, with
// asynq's semantics and on asynq's records, so asynqmon and any asynq server
// on the same queue (a service embedding the engine) see what they would
// see of an asynq worker:
//
//   - Claim blocks on the queue's pending list (BLMOVE from its right end,
//     where asynq dequeues) into a claim list of the worker's own, so that
//     a worker killed before its next call leaves the ID where Housekeep
//     finds it;
//   - Take does the rest of asynq's dequeue (the active list, the record's
//     state, the lease) and honours asynq's pause;
//   - Done, Retry, Archive and Requeue are asynq's acknowledgements
//     (processed and failed counters included), ExtendLeases its lease
//     renewal;
//   - Housekeep, once a second, is the worker's heartbeat, hands back the
//     claims of workers whose heartbeat ended, forwards due scheduled and
//     retry tasks (a fallback of the promoter), deletes completed tasks
//     past their retention and returns the tasks whose lease expired, as
//     asynq's forwarder, janitor and recoverer do, and (Describe) rewrites
//     the worker's record for the Workers page; Leave ends a worker's
//     heartbeat and deletes its record at a clean exit.

//go:embed dequeue/*.lua dequeue/lib/*.lua
var dequeueFS embed.FS

// dequeueScript returns the script dequeue/<name>.lua, with the Lua
// functions it uses put in front of it: dequeue/lib/<helper>.lua, the
// dequeue's own, or lua/<helper>.lua, shared with the state scripts.
func dequeueScript(name string, helpers ...string) func() *redis.Script {
	return sync.OnceValue(func() *redis.Script {
		b, err := dequeueFS.ReadFile("dequeue/" + name + ".lua")
		if err != nil { // embedded at build time: an error is a build bug
			panic("tasks: " + err.Error())
		}
		var src strings.Builder
		for _, h := range helpers {
			if own, err := dequeueFS.ReadFile("dequeue/lib/" + h + ".lua"); err == nil {
				src.Write(own)
				continue
			}
			src.WriteString(luaFunc(h))
		}
		src.Write(b)
		return redis.NewScript(src.String())
	})
}

var (
	takeScript      = dequeueScript("take", "task_take")
	takeNextScript  = dequeueScript("take_next", "task_take")
	doneScript      = dequeueScript("done", "task_done")
	retryScript     = dequeueScript("retry")
	archiveScript   = dequeueScript("archive")
	requeueScript   = dequeueScript("requeue")
	housekeepScript = dequeueScript("housekeep")
	leaveScript     = dequeueScript("leave")
)

// asynq v0.26's constants for its acknowledgements (internal/rdb/rdb.go).
const (
	// statsTTL is how long asynq keeps a day's processed and failed
	// counters.
	statsTTL = 90 * 24 * time.Hour
	// maxArchiveSize and archivedExpiration bound asynq's archive.
	maxArchiveSize     = 10000
	archivedExpiration = 90 // days
	// LeaseRecoveryDelay is how long after its lease ended asynq's
	// recoverer takes an active task back (recoverer.go: a lease ended 30
	// seconds ago or earlier, to allow for clock skew).
	LeaseRecoveryDelay = 30 * time.Second
)

// ErrNotActive is returned by an acknowledgement of a task that is no
// longer active under this worker's lease (asynq's recoverer, in this
// process or another, took it back): asynq's "NOT FOUND".
var ErrNotActive = errors.New("tasks: the task is no longer active")

// Dequeuer is one worker's own dequeue of a queue's asynq tasks (see
// above). Its methods are safe for concurrent use.
type Dequeuer struct {
	rdb    redis.UniversalClient
	keys   Keys
	worker string
	// record, when set (Describe), returns the worker's record for each
	// heartbeat.
	record func() WorkerInfo
}

// NewDequeuer returns the dequeuer of worker (an ID unique among the
// queue's workers, e.g. host:pid:random) on queue.
func NewDequeuer(rdb redis.UniversalClient, queue, worker string) *Dequeuer {
	return &Dequeuer{rdb: rdb, keys: QueueKeys(queue), worker: worker}
}

// Worker is the dequeuer's worker ID.
func (d *Dequeuer) Worker() string { return d.worker }

// Describe makes each Housekeep also write the worker's record (Workers
// reads it) from what record returns then (its Heartbeat is set by
// Housekeep). Call it before the first Housekeep.
func (d *Dequeuer) Describe(record func() WorkerInfo) { d.record = record }

// Claim waits up to block for a pending task and moves its ID to the
// worker's claim list; "" when none came. The block is added to the
// client's read timeout by go-redis, so any block is safe.
func (d *Dequeuer) Claim(ctx context.Context, block time.Duration) (string, error) {
	id, err := d.rdb.BLMove(ctx, d.keys.Pending(), d.keys.Claim(d.worker), "RIGHT", "LEFT", block).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return id, err
}

// Paused reports whether asynq's Inspector has paused the queue.
func (d *Dequeuer) Paused(ctx context.Context) (bool, error) {
	n, err := d.rdb.Exists(ctx, d.keys.Paused()).Result()
	return n == 1, err
}

// TakeOutcome is what Take did with a claimed ID.
type TakeOutcome int

// The outcomes of Take.
const (
	// Taken: the task is active under the worker's lease.
	Taken TakeOutcome = iota
	// TakePaused: the queue is paused; the ID is back in pending.
	TakePaused
	// TakeGone: the ID was no longer in the claim list (a sweep handed
	// it back).
	TakeGone
	// TakeMissing: the task's record is gone (deleted); the ID only left
	// the claim list.
	TakeMissing
	// TakeEmpty: TakeNext found no pending task.
	TakeEmpty
	// TakeMalformed: the task is active under the worker's lease but its
	// message is not one this package reads (the error says why); it is
	// left for an operator (asynqmon shows it active).
	TakeMalformed
)

// Take makes the claimed task id active under the worker's lease (until
// now + AsynqLeaseDuration) and returns its message, as asynq's dequeue
// does; see TakeOutcome for the other outcomes (the message is nil then).
func (d *Dequeuer) Take(ctx context.Context, id string, now time.Time) (*Message, TakeOutcome, error) {
	v, err := takeScript().Run(ctx, d.rdb,
		[]string{d.keys.Claim(d.worker), d.keys.Active(), d.keys.Lease(), d.keys.Paused(), d.keys.Pending()},
		id, d.keys.Task(""), now.Add(AsynqLeaseDuration).Unix()).Slice()
	if err != nil {
		return nil, 0, err
	}
	m, out, err := takeReply(v, "take")
	if out == TakeMalformed {
		err = fmt.Errorf("task %s: %w", id, err)
	}
	return m, out, err
}

// TakeNext takes the oldest pending task in one call, as asynq's dequeue
// does (take_next.lua): for a worker that found work at its last look,
// where Claim and Take would cost two round trips. TakeEmpty when none is
// pending, TakePaused on a paused queue (nothing moves).
func (d *Dequeuer) TakeNext(ctx context.Context, now time.Time) (*Message, TakeOutcome, error) {
	v, err := takeNextScript().Run(ctx, d.rdb,
		[]string{d.keys.Pending(), d.keys.Paused(), d.keys.Active(), d.keys.Lease()},
		d.keys.Task(""), now.Add(AsynqLeaseDuration).Unix()).Slice()
	if err != nil {
		return nil, 0, err
	}
	return takeReply(v, "take_next")
}

// takeReply reads the reply of take.lua or take_next.lua.
func takeReply(v []any, script string) (*Message, TakeOutcome, error) {
	if len(v) == 0 {
		return nil, 0, fmt.Errorf("tasks: %s answered %v", script, v)
	}
	switch v[0] {
	case "paused":
		return nil, TakePaused, nil
	case "gone":
		return nil, TakeGone, nil
	case "missing":
		return nil, TakeMissing, nil
	case "empty":
		return nil, TakeEmpty, nil
	case "ok":
		s, ok := v[1].(string)
		if !ok || len(v) != 2 {
			return nil, 0, fmt.Errorf("tasks: %s answered %v", script, v)
		}
		m, err := ParseMessage([]byte(s))
		if err != nil {
			return nil, TakeMalformed, err
		}
		return m, Taken, nil
	}
	return nil, 0, fmt.Errorf("tasks: %s answered %v", script, v)
}

// notFound maps asynq's "NOT FOUND" reply to ErrNotActive.
func notFound(err error) error {
	if err != nil && strings.Contains(err.Error(), "NOT FOUND") {
		return fmt.Errorf("%w: %w", ErrNotActive, err)
	}
	return err
}

// Done acknowledges a task whose handler succeeded, as asynq does: the
// record is deleted, or kept as completed for the message's retention; the
// processed counters count it.
func (d *Dequeuer) Done(ctx context.Context, m *Message, now time.Time) error {
	a := d.DoneArgs(m, now)
	keys := []string{a.Active, a.Lease, a.Task, a.Day, a.Total, a.Completed}
	if a.Unique != "" {
		keys = append(keys, a.Unique)
	}
	return notFound(doneScript().Run(ctx, d.rdb, keys, a.ID, a.StatsExpiry, a.KeepUntil, a.Msg).Err())
}

// DoneArgs are the keys and arguments of the Lua function task_done
// (lua/task_done.lua) for one task: what Done sends, and what a state
// script that acknowledges the task with its own write sends
// (retrystate's complete.lua).
type DoneArgs struct {
	// The keys: asynq:{q}:active, asynq:{q}:lease, the task's record, the
	// processed counters of the day and in all, asynq:{q}:completed, and
	// the message's uniqueness lock ("" for none).
	Active, Lease, Task, Day, Total, Completed, Unique string
	// ID is the task's; StatsExpiry (Unix s) the day counter's expiry;
	// KeepUntil (Unix s, as a decimal) the completed record's, "0" for a
	// message without a retention (the record is deleted); Msg the message
	// with its completion time (retention only).
	ID          string
	StatsExpiry int64
	KeepUntil   string
	Msg         string
}

// DoneArgs returns what acknowledges m as done at now (see Done).
func (d *Dequeuer) DoneArgs(m *Message, now time.Time) DoneArgs {
	a := DoneArgs{Active: d.keys.Active(), Lease: d.keys.Lease(), Task: d.keys.Task(m.ID), Day: d.keys.ProcessedOn(now),
		Total: d.keys.Processed(), Completed: d.keys.Completed(), Unique: m.UniqueKey,
		ID: m.ID, StatsExpiry: now.Add(statsTTL).Unix(), KeepUntil: "0"}
	if m.Retention > 0 {
		c := *m
		c.CompletedAt = now.Unix()
		a.KeepUntil, a.Msg = strconv.FormatInt(now.Unix()+m.Retention, 10), string(c.Encode())
	}
	return a
}

// Retry moves a task whose handler failed to asynq's retry set, due at
// retryAt (asynq's whole second, and Cairn's timers index at the
// millisecond), with errMsg; a failure (isFailure) counts as a retry and
// in the failed counters, as in asynq.
func (d *Dequeuer) Retry(ctx context.Context, m *Message, retryAt time.Time, errMsg string, isFailure bool,
	now time.Time) error {
	c := *m
	if isFailure {
		c.Retried++
	}
	c.ErrorMsg, c.LastFailedAt = errMsg, now.Unix()
	failure := "0"
	if isFailure {
		failure = "1"
	}
	return notFound(retryScript().Run(ctx, d.rdb,
		[]string{d.keys.Task(m.ID), d.keys.Active(), d.keys.Lease(), d.keys.Retry(), d.keys.ProcessedOn(now),
			d.keys.FailedOn(now), d.keys.Processed(), d.keys.Failed(), d.keys.Timers()},
		m.ID, c.Encode(), retryAt.Unix(), retryAt.UnixMilli(), now.Add(statsTTL).Unix(), failure).Err())
}

// Archive moves a task whose retries are exhausted (or whose handler asked
// for no retry) to asynq's archive, with errMsg, as asynq does.
func (d *Dequeuer) Archive(ctx context.Context, m *Message, errMsg string, now time.Time) error {
	c := *m
	c.ErrorMsg, c.LastFailedAt = errMsg, now.Unix()
	return notFound(archiveScript().Run(ctx, d.rdb,
		[]string{d.keys.Task(m.ID), d.keys.Active(), d.keys.Lease(), d.keys.Archived(), d.keys.ProcessedOn(now),
			d.keys.FailedOn(now), d.keys.Processed(), d.keys.Failed()},
		m.ID, c.Encode(), now.Unix(), now.AddDate(0, 0, -archivedExpiration).Unix(), maxArchiveSize,
		now.Add(statsTTL).Unix(), d.keys.Task("")).Err())
}

// Requeue hands a running task back to the right end of pending, as a
// shutting-down asynq server does.
func (d *Dequeuer) Requeue(ctx context.Context, id string) error {
	return notFound(requeueScript().Run(ctx, d.rdb,
		[]string{d.keys.Active(), d.keys.Lease(), d.keys.Pending(), d.keys.Task(id)}, id).Err())
}

// ExtendLeases extends the leases of the worker's running tasks ids to now
// + AsynqLeaseDuration in one call, as asynq's heartbeat does (a task
// no longer in the lease set is not added back).
func (d *Dequeuer) ExtendLeases(ctx context.Context, ids []string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	score := float64(now.Add(AsynqLeaseDuration).Unix())
	zs := make([]redis.Z, len(ids))
	for i, id := range ids {
		zs[i] = redis.Z{Score: score, Member: id}
	}
	return d.rdb.ZAddXX(ctx, d.keys.Lease(), zs...).Err()
}

// Housekept is what one Housekeep did.
type Housekept struct {
	// HandedBack is the number of claimed IDs of dead workers put back in
	// pending; Forwarded the due scheduled and retry tasks moved to
	// pending; Deleted the completed tasks past their retention deleted.
	HandedBack, Forwarded, Deleted int
	// Expired are the messages of active tasks whose lease ended
	// LeaseRecoveryDelay ago or more, for the caller to retry or archive
	// as asynq's recoverer does (Retry, Archive).
	Expired []*Message
}

// Housekeep renews the worker's heartbeat until now + ttl (an empty worker
// ID renews none) and does what asynq's forwarder, janitor and recoverer
// would on the queue (see above), in one call.
func (d *Dequeuer) Housekeep(ctx context.Context, now time.Time, ttl time.Duration) (Housekept, error) {
	args := []any{d.worker, now.UnixMilli(), now.Add(ttl).UnixMilli(), now.Unix(), now.Add(-LeaseRecoveryDelay).Unix(),
		d.keys.Task(""), d.keys.Claim(""), d.keys.prefix + "g:", d.keys.WorkerRecord(""), ttl.Milliseconds()}
	if d.record != nil && d.worker != "" {
		info := d.record()
		info.Heartbeat = now
		args = append(args, info.fields()...)
	}
	v, err := housekeepScript().Run(ctx, d.rdb,
		[]string{d.keys.Fetchers(), d.keys.Pending(), d.keys.Scheduled(), d.keys.Retry(), d.keys.Completed(),
			d.keys.Lease()},
		args...).Slice()
	if err != nil {
		return Housekept{}, err
	}
	if len(v) < 3 {
		return Housekept{}, fmt.Errorf("tasks: housekeep answered %v", v)
	}
	var h Housekept
	for i, p := range []*int{&h.HandedBack, &h.Forwarded, &h.Deleted} {
		n, ok := v[i].(int64)
		if !ok {
			return Housekept{}, fmt.Errorf("tasks: housekeep answered %v", v)
		}
		*p = int(n)
	}
	for _, x := range v[3:] {
		s, _ := x.(string)
		m, err := ParseMessage([]byte(s))
		if err != nil {
			continue // not a message Cairn can write back; asynq's recoverer may
		}
		h.Expired = append(h.Expired, m)
	}
	return h, nil
}

// Leave hands the IDs left in the worker's claim list back to pending,
// ends its heartbeat and deletes its record: a clean exit.
func (d *Dequeuer) Leave(ctx context.Context) error {
	return leaveScript().Run(ctx, d.rdb,
		[]string{d.keys.Fetchers(), d.keys.Claim(d.worker), d.keys.Pending(), d.keys.WorkerRecord(d.worker)},
		d.worker, d.keys.Task("")).Err()
}
