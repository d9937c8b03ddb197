package retrystate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The notification stream (keys.notifications) is written by the scripts, in
// the same atomic step as the transition it reports, so it is a durable
// outbox: a consumer group on it (one per purpose, e.g. webhook delivery)
// hands each entry to one consumer of the group, and an entry a consumer read
// but did not acknowledge before it died stays pending until another consumer
// claims it.

// CreateNotifyGroup creates the consumer group on the queue's notification
// stream, creating the stream when it does not exist. A new group starts
// after the stream's last entry ("$"): it receives the events of transitions
// made from now on, not the retained history. An existing group is left as
// it is, so events made while no consumer ran are still delivered.
func (s *Store) CreateNotifyGroup(ctx context.Context, group string) error {
	err := s.rdb.XGroupCreateMkStream(ctx, s.keys.notifications(), group, "$").Err()
	if err != nil && strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return nil
	}
	return err
}

// ReadNotifyGroup reads up to count new notifications for consumer of group,
// waiting up to block for one to arrive (block must be positive). The
// entries stay pending for the consumer until AckNotifications.
func (s *Store) ReadNotifyGroup(ctx context.Context, group, consumer string, count int64, block time.Duration) ([]Notification, error) {
	if block <= 0 {
		block = time.Millisecond // BLOCK 0 would wait forever
	}
	xs, err := s.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: group, Consumer: consumer, Streams: []string{s.keys.notifications(), ">"},
		Count: count, Block: block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Notification
	for _, st := range xs {
		for _, x := range st.Messages {
			out = append(out, notificationOf(x))
		}
	}
	return out, nil
}

// ClaimNotifications transfers to consumer up to count entries of group
// that were read (by any consumer, this one included) but not acknowledged
// for at least minIdle, from the pending-entry cursor start ("0-0" to begin).
// It returns them and the cursor to continue from ("0-0" when the scan is
// complete). An entry trimmed from the stream meanwhile comes back with an
// empty Type; acknowledge it.
func (s *Store) ClaimNotifications(ctx context.Context, group, consumer string, minIdle time.Duration, start string, count int64) ([]Notification, string, error) {
	if start == "" {
		start = "0-0"
	}
	xs, next, err := s.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream: s.keys.notifications(), Group: group, Consumer: consumer, MinIdle: minIdle, Start: start, Count: count,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, "0-0", nil
	}
	if err != nil {
		return nil, "", err
	}
	out := make([]Notification, 0, len(xs))
	for _, x := range xs {
		out = append(out, notificationOf(x))
	}
	return out, next, nil
}

// AckNotifications acknowledges entries of group: they are done.
func (s *Store) AckNotifications(ctx context.Context, group string, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	return s.rdb.XAck(ctx, s.keys.notifications(), group, ids...).Err()
}

// NotifyPending returns how many entries of group were read and not yet
// acknowledged.
func (s *Store) NotifyPending(ctx context.Context, group string) (int64, error) {
	p, err := s.rdb.XPending(ctx, s.keys.notifications(), group).Result()
	if err != nil {
		return 0, err
	}
	return p.Count, nil
}

// PruneNotifyConsumers deletes the consumers of group other than keep that
// hold no pending entries and have been idle for longer than idle: each
// worker process joins under a new name, and the group would otherwise
// collect the names of every process that ever ran. It returns how many it
// deleted.
func (s *Store) PruneNotifyConsumers(ctx context.Context, group, keep string, idle time.Duration) (int, error) {
	cs, err := s.rdb.XInfoConsumers(ctx, s.keys.notifications(), group).Result()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range cs {
		if c.Name == keep || c.Pending > 0 || c.Idle < idle {
			continue
		}
		// DELCONSUMER drops the consumer's pending entries: a consumer
		// that read one between XINFO and here would lose it. A live
		// consumer polls every few seconds, so with an idle bound of
		// minutes only consumers of dead processes are pruned.
		if err := s.rdb.XGroupDelConsumer(ctx, s.keys.notifications(), group, c.Name).Err(); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// RunWorkflow returns the workflow name of a run, or ErrRunNotFound.
func (s *Store) RunWorkflow(ctx context.Context, runID string) (string, error) {
	wf, err := s.rdb.HGet(ctx, s.keys.run(runID), "workflow").Result()
	if errors.Is(err, redis.Nil) {
		return "", ErrRunNotFound
	}
	return wf, err
}

// RunTrace returns the trace context stored with a run (NewRun.Trace): its
// workflow and trace, "" for none; ErrRunNotFound when there is no run.
func (s *Store) RunTrace(ctx context.Context, runID string) (workflow, trace string, err error) {
	v, err := s.rdb.HMGet(ctx, s.keys.run(runID), "workflow", "trace").Result()
	if err != nil {
		return "", "", err
	}
	wf, _ := v[0].(string)
	if wf == "" {
		return "", "", ErrRunNotFound
	}
	trace, _ = v[1].(string)
	return wf, trace, nil
}

func notificationOf(x redis.XMessage) Notification {
	typ, at, rest := streamFields(x.Values)
	return Notification{ID: x.ID, Type: typ, At: at, RunID: take(rest, "run"), Workflow: take(rest, "workflow"),
		Fields: rest}
}

// ResumeNotifications returns where a reader of the notification stream
// that resumes after the entry ID after ("<ms>-<seq>") should read on from,
// so as to replay at most maxEntries entries (<= 0: no bound) and none
// written before notBefore (zero: no bound): after, or the ID of a later
// entry when either bound moves it forward (the more recent of the two
// wins). skipped tells whether entries following after are passed over.
// An ID beyond the newest entry resumes after the newest, and on an empty
// stream from "0-0", so that the reader does not wait for the clock to
// reach its ID.
func (s *Store) ResumeNotifications(ctx context.Context, after string, maxEntries int64, notBefore time.Time) (start string, skipped bool, err error) {
	key := s.keys.notifications()
	from, ok := parseEntryID(after)
	if !ok {
		return "", false, fmt.Errorf("resume notifications: %q is not a stream entry ID", after)
	}
	last, err := s.rdb.XRevRangeN(ctx, key, "+", "-", 1).Result()
	if err != nil {
		return "", false, err
	}
	if len(last) == 0 {
		return "0-0", false, nil
	}
	newest, ok := parseEntryID(last[0].ID)
	if !ok {
		return "", false, fmt.Errorf("resume notifications: unexpected entry ID %q", last[0].ID)
	}
	if !from.less(newest) {
		return newest.String(), false, nil
	}
	// The entries from notBefore's millisecond on are those after the
	// last possible ID of the millisecond before.
	lower := from
	if ms := notBefore.UnixMilli(); !notBefore.IsZero() && ms > 0 {
		if floor := (entryID{uint64(ms) - 1, math.MaxUint64}); from.less(floor) {
			lower = floor
		}
	}
	if !lower.less(newest) {
		return newest.String(), true, nil // every entry following after is older than notBefore
	}
	if maxEntries > 0 {
		xs, err := s.rdb.XRevRangeN(ctx, key, "+", "("+lower.String(), maxEntries+1).Result()
		if err != nil {
			return "", false, err
		}
		if int64(len(xs)) > maxEntries {
			return xs[maxEntries].ID, true, nil
		}
	}
	if lower == from {
		return from.String(), false, nil
	}
	// Resume after the newest entry older than notBefore, if any is
	// after after.
	xs, err := s.rdb.XRevRangeN(ctx, key, lower.String(), "("+from.String(), 1).Result()
	if err != nil {
		return "", false, err
	}
	if len(xs) == 0 {
		return from.String(), false, nil
	}
	return xs[0].ID, true, nil
}

// entryID is a stream entry ID: two unsigned 64-bit integers.
type entryID struct{ ms, seq uint64 }

func parseEntryID(s string) (entryID, bool) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return entryID{}, false
	}
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	return entryID{ms, seq}, err1 == nil && err2 == nil
}

func (id entryID) String() string {
	return strconv.FormatUint(id.ms, 10) + "-" + strconv.FormatUint(id.seq, 10)
}

func (id entryID) less(o entryID) bool {
	return id.ms < o.ms || (id.ms == o.ms && id.seq < o.seq)
}
