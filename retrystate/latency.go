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

// Step latencies: how long step bodies ran (LatencyDuration) and how long
// a due attempt waited for a worker to begin it (LatencyWait), counted in
// fixed log-scale buckets per workflow, step and hour. The workers count
// in memory and add their counts with LatencyAdd every few seconds (one
// pipeline of HINCRBYs, no script): a step's own scripts pay nothing for
// them. Readers merge the hours of a window (LatencyRead).
//
// One hour's counts are one hash, keys.latency: field
// "<kind>|<workflow>|<step>|<bucket>" -> count, kind "d" or "w". It
// expires LatencyRetention after its last write, so the data is bounded by
// 2 kinds x LatencyBuckets x (workflow, step) pairs x 192 hours.

// LatencyKind is what a latency measures.
type LatencyKind string

const (
	// LatencyDuration is how long a step body ran (an attempt that ran).
	LatencyDuration LatencyKind = "d"
	// LatencyWait is how long an attempt waited from its due time (its
	// step made due by the step before, its retry's backoff ended, its run
	// started) until a worker began it.
	LatencyWait LatencyKind = "w"
)

// LatencyRetention is how long an hour's latency hash lives after its
// last write: the longest window read (7 days) and a day to spare.
const LatencyRetention = 8 * 24 * time.Hour

// Latency buckets: bucket 0 holds what took less than a millisecond;
// bucket i (1 <= i < LatencyBuckets-1) holds [2^((i-1)/4), 2^(i/4)) ms,
// four buckets an octave, each 19% wider than the one before; the last
// holds 2^30 ms (12.4 days) and more.
const (
	latencyPerOctave = 4
	latencyOctaves   = 30
	// LatencyBuckets is the number of buckets.
	LatencyBuckets = latencyPerOctave*latencyOctaves + 2
)

// MaxLatencyName bounds the length of a workflow or step name the latency
// data keeps (valid names are at most 64 bytes, a compensation's step
// "compensate:" and 64 more).
const MaxLatencyName = 128

// LatencyBucket returns the bucket of d (a negative d counts as 0).
func LatencyBucket(d time.Duration) int {
	if d < time.Millisecond {
		return 0
	}
	i := int(math.Floor(latencyPerOctave*math.Log2(float64(d)/float64(time.Millisecond)))) + 1
	i = min(i, LatencyBuckets-1)
	// Float rounding at a bound: the bounds are the authority.
	if i > 1 && d < LatencyBucketLow(i) {
		i--
	} else if i < LatencyBuckets-1 && d >= LatencyBucketLow(i+1) {
		i++
	}
	return i
}

// LatencyBucketLow is the least duration bucket i holds.
func LatencyBucketLow(i int) time.Duration {
	if i <= 0 {
		return 0
	}
	return time.Duration(math.Round(math.Exp2(float64(i-1)/latencyPerOctave) * float64(time.Millisecond)))
}

// LatencyBucketHigh is the least duration above bucket i (its exclusive
// upper bound); the last bucket has none and answers its lower bound.
func LatencyBucketHigh(i int) time.Duration {
	if i >= LatencyBuckets-1 {
		return LatencyBucketLow(LatencyBuckets - 1)
	}
	return LatencyBucketLow(i + 1)
}

// LatencyCount is count observations of kind in bucket of a workflow's
// step in an hour (Unix seconds / 3600).
type LatencyCount struct {
	Hour     int64
	Kind     LatencyKind
	Workflow string
	Step     string
	Bucket   int
	Count    int64
}

// LatencyHour is the hour of t, as LatencyCount.Hour.
func LatencyHour(t time.Time) int64 { return t.Unix() / 3600 }

// latencyField is the hash field of a series' bucket.
func latencyField(kind LatencyKind, workflow, step string, bucket int) string {
	return string(kind) + "|" + workflow + "|" + step + "|" + strconv.Itoa(bucket)
}

// ValidLatencyName reports whether name may be kept: 1 to MaxLatencyName
// bytes, no '|' (the field separator).
func ValidLatencyName(name string) bool {
	return name != "" && len(name) <= MaxLatencyName && !strings.Contains(name, "|")
}

// LatencyAdd adds counts to their hours' hashes in one pipeline (HINCRBY
// each, then PEXPIRE each hash touched by LatencyRetention). Counts of an
// invalid name or bucket are left out. A lost reply may have added them:
// retrying it may count them twice (the data is statistics).
func (s *Store) LatencyAdd(ctx context.Context, counts []LatencyCount) error {
	pipe := s.rdb.Pipeline()
	hours := make(map[int64]bool)
	for _, c := range counts {
		if c.Count <= 0 || c.Bucket < 0 || c.Bucket >= LatencyBuckets || !ValidLatencyName(c.Workflow) ||
			!ValidLatencyName(c.Step) || (c.Kind != LatencyDuration && c.Kind != LatencyWait) {
			continue
		}
		pipe.HIncrBy(ctx, s.keys.latency(c.Hour), latencyField(c.Kind, c.Workflow, c.Step, c.Bucket), c.Count)
		hours[c.Hour] = true
	}
	if len(hours) == 0 {
		return nil
	}
	for h := range hours {
		pipe.PExpire(ctx, s.keys.latency(h), LatencyRetention)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("add latencies: %w", err)
	}
	return nil
}

// LatencySeries is the merged bucket counts of one workflow's step.
type LatencySeries struct {
	Workflow, Step string
	Duration, Wait [LatencyBuckets]int64
}

// LatencyRead merges the hours from..to (inclusive, as LatencyHour) of
// the workflow's steps (every workflow's for ""), in one pipeline of
// HGETALLs. Fields it cannot read (not written by LatencyAdd) are
// skipped. The series are in no particular order.
func (s *Store) LatencyRead(ctx context.Context, from, to int64, workflow string) ([]*LatencySeries, error) {
	if to < from {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, 0, to-from+1)
	for h := from; h <= to; h++ {
		cmds = append(cmds, pipe.HGetAll(ctx, s.keys.latency(h)))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read latencies: %w", err)
	}
	type name struct{ wf, step string }
	series := make(map[name]*LatencySeries)
	for _, cmd := range cmds {
		for f, v := range cmd.Val() {
			kind, wf, step, bucket, ok := parseLatencyField(f)
			if !ok || (workflow != "" && wf != workflow) {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				continue
			}
			ls := series[name{wf, step}]
			if ls == nil {
				ls = &LatencySeries{Workflow: wf, Step: step}
				series[name{wf, step}] = ls
			}
			b := &ls.Duration
			if kind == LatencyWait {
				b = &ls.Wait
			}
			b[bucket] = satAdd(b[bucket], n)
		}
	}
	out := make([]*LatencySeries, 0, len(series))
	for _, ls := range series {
		out = append(out, ls)
	}
	return out, nil
}

// parseLatencyField reads a field latencyField wrote.
func parseLatencyField(f string) (kind LatencyKind, wf, step string, bucket int, ok bool) {
	parts := strings.Split(f, "|")
	if len(parts) != 4 {
		return "", "", "", 0, false
	}
	kind = LatencyKind(parts[0])
	if kind != LatencyDuration && kind != LatencyWait {
		return "", "", "", 0, false
	}
	bucket, err := strconv.Atoi(parts[3])
	if err != nil || bucket < 0 || bucket >= LatencyBuckets || !ValidLatencyName(parts[1]) || !ValidLatencyName(parts[2]) {
		return "", "", "", 0, false
	}
	return kind, parts[1], parts[2], bucket, true
}

// satAdd adds without overflowing.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// LatencyQuantile returns the upper bound of the bucket that holds the q
// quantile (0 < q <= 1) of counts, and the total count; 0 when there is
// none. The true quantile lies in that bucket, at most 19% below it.
func LatencyQuantile(counts *[LatencyBuckets]int64, q float64) (time.Duration, int64) {
	var total int64
	for _, n := range counts {
		total = satAdd(total, n)
	}
	if total == 0 {
		return 0, 0
	}
	rank := int64(math.Ceil(q * float64(total)))
	rank = max(1, min(rank, total))
	var seen int64
	for i, n := range counts {
		seen = satAdd(seen, n)
		if seen >= rank {
			return LatencyBucketHigh(i), total
		}
	}
	return LatencyBucketHigh(LatencyBuckets - 1), total
}
