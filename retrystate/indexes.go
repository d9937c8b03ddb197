package retrystate

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Walks of the indexes the reconciler reads (idx:...), and their
// trimming.

// Due is a run ID with the time an index holds for it.
type Due struct {
	RunID string
	At    time.Time
}

func (s *Store) rangeByScore(ctx context.Context, key string, maxMS int64, limit int64) ([]Due, error) {
	upper := "+inf"
	if maxMS >= 0 {
		upper = strconv.FormatInt(maxMS, 10)
	}
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: "-inf", Max: upper, Count: limit}).Result()
	if err != nil {
		return nil, err
	}
	entries, err := indexEntries(zs)
	if err != nil {
		return nil, err
	}
	out := make([]Due, len(entries))
	for i, z := range entries {
		out[i] = Due{RunID: z.ID, At: time.UnixMilli(int64(z.Score))}
	}
	return out, nil
}

// StalledTasks returns up to limit IDs of tasks of the queue that asynq
// holds as active under a lease that expires at or before leaseBefore (whole
// seconds): with asynq's lease of LeaseDuration extended every few seconds
// by the worker holding the task, a lease that expires before now +
// LeaseDuration - d has not been extended for about d. The IDs may be any
// task of the queue's asynq queue, not only step tasks.
func (s *Store) StalledTasks(ctx context.Context, leaseBefore time.Time, limit int64) ([]string, error) {
	return s.rdb.ZRangeByScore(ctx, s.keys.asynqLease(), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(leaseBefore.Unix(), 10), Count: limit}).Result()
}

// SweepDue reports whether a sweep has anything to look at: a fence that
// expired at or before now (ExpiredFences), or, unless leaseBefore is zero,
// a task whose lease expires at or before leaseBefore (StalledTasks). One
// round trip of one read of one entry per index (both keys in the queue's
// slot): what an idle worker's sweep costs Redis, instead of taking and
// releasing the sweep lock.
func (s *Store) SweepDue(ctx context.Context, now, leaseBefore time.Time) (bool, error) {
	var fences, leases *redis.StringSliceCmd
	if _, err := s.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		fences = pipe.ZRangeByScore(ctx, s.keys.fences(), &redis.ZRangeBy{
			Min: "-inf", Max: strconv.FormatInt(ms(now), 10), Count: 1})
		if !leaseBefore.IsZero() {
			leases = pipe.ZRangeByScore(ctx, s.keys.asynqLease(), &redis.ZRangeBy{
				Min: "-inf", Max: strconv.FormatInt(leaseBefore.Unix(), 10), Count: 1})
		}
		return nil
	}); err != nil {
		return false, err
	}
	return len(fences.Val()) > 0 || (leases != nil && len(leases.Val()) > 0), nil
}

// ExpiredFences returns up to limit runs whose running attempt's fence
// expired at or before now.
func (s *Store) ExpiredFences(ctx context.Context, now time.Time, limit int64) ([]Due, error) {
	return s.rangeByScore(ctx, s.keys.fences(), ms(now), limit)
}

// DueDeadlines returns up to limit non-terminal runs whose deadline passed.
func (s *Store) DueDeadlines(ctx context.Context, now time.Time, limit int64) ([]Due, error) {
	return s.rangeByScore(ctx, s.keys.deadlines(), ms(now), limit)
}

// ScheduledRetries returns up to limit runs with a scheduled retry, by due time.
func (s *Store) ScheduledRetries(ctx context.Context, limit int64) ([]Due, error) {
	return s.rangeByScore(ctx, s.keys.scheduled(), -1, limit)
}

// IndexCursor is a position in a walk of an index by score, page by page
// (ScheduledPage, IdlePage). The zero IndexCursor is the walk's start.
//
// It holds the score of the last entry read and how many entries of that
// score were read: the next page starts at that score, past them (entries
// of one score are in the order of their members). Entries added or removed
// meanwhile may shift it: an entry of that score removed before it makes
// the walk miss one entry of that score, and an entry added behind the
// cursor is not seen until the next walk; entries are never read twice in
// a walk unless their score moved.
type IndexCursor struct {
	score   float64
	skip    int64
	started bool
}

// ScheduledPage returns the next up to limit runs of idx:scheduled (runs
// with a scheduled retry, or a waiting await or sleep) from c, by due time,
// and the cursor after them; done when the walk reached the end (the
// cursor is then the start again).
func (s *Store) ScheduledPage(ctx context.Context, c IndexCursor, limit int64) ([]Due, IndexCursor, bool, error) {
	return s.page(ctx, s.keys.scheduled(), c, -1, limit)
}

// IdlePage returns the next up to limit non-terminal runs not updated since
// before (idx:active) from c, by last update, as ScheduledPage does.
func (s *Store) IdlePage(ctx context.Context, c IndexCursor, before time.Time, limit int64) ([]Due, IndexCursor, bool, error) {
	return s.page(ctx, s.keys.active(), c, ms(before), limit)
}

// page reads the entries of key from c with a score of at most maxMS (-1:
// any), up to limit of them.
func (s *Store) page(ctx context.Context, key string, c IndexCursor, maxMS, limit int64) ([]Due, IndexCursor, bool, error) {
	lower, upper := "-inf", "+inf"
	if c.started {
		lower = strconv.FormatFloat(c.score, 'f', -1, 64)
	}
	if maxMS >= 0 {
		upper = strconv.FormatInt(maxMS, 10)
	}
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: lower, Max: upper, Offset: c.skip,
		Count: limit}).Result()
	if err != nil {
		return nil, c, false, err
	}
	entries, err := indexEntries(zs)
	if err != nil {
		return nil, c, false, err
	}
	out := make([]Due, len(entries))
	for i, z := range entries {
		out[i] = Due{RunID: z.ID, At: time.UnixMilli(int64(z.Score))}
	}
	if int64(len(entries)) < limit {
		return out, IndexCursor{}, true, nil
	}
	last := entries[len(entries)-1].Score
	if c.started && last == c.score {
		// The whole page has the cursor's score.
		return out, IndexCursor{score: last, skip: c.skip + int64(len(entries)), started: true}, false, nil
	}
	n := int64(0)
	for i := len(entries) - 1; i >= 0 && entries[i].Score == last; i-- {
		n++
	}
	return out, IndexCursor{score: last, skip: n, started: true}, false, nil
}

// CountActive returns the number of non-terminal runs.
func (s *Store) CountActive(ctx context.Context) (int64, error) {
	return s.rdb.ZCard(ctx, s.keys.active()).Result()
}

// TrimIndexes removes from the indexes up to limit runs created earlier
// than before whose records have expired. It returns how many it removed.
func (s *Store) TrimIndexes(ctx context.Context, before time.Time, limit int64) (int, error) {
	old, err := s.rangeByScore(ctx, s.keys.all(), ms(before), limit)
	if err != nil || len(old) == 0 {
		return 0, err
	}
	pipe := s.rdb.Pipeline()
	exists := make([]*redis.IntCmd, len(old))
	for i, d := range old {
		exists[i] = pipe.Exists(ctx, s.keys.run(d.RunID))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	var gone []any
	for i, e := range exists {
		if e.Val() == 0 {
			gone = append(gone, old[i].RunID)
		}
	}
	if len(gone) == 0 {
		return 0, nil
	}
	pipe = s.rdb.Pipeline()
	keys := []string{s.keys.all(), s.keys.active(), s.keys.scheduled(), s.keys.attention(), s.keys.fences(),
		s.keys.deadlines(), s.keys.paused()}
	for _, st := range RunStatuses {
		keys = append(keys, s.keys.byStatus(st))
	}
	for _, k := range keys {
		pipe.ZRem(ctx, k, gone...)
	}
	_, err = pipe.Exec(ctx)
	return len(gone), err
}
