package retrystate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Bounded reads for dashboards: counts of runs by creation time and status
// from the status indexes, a capped scan of the newest runs' heads, the
// newest notifications of a time window, and the gates in use. Each one
// reads a bounded amount, whatever the queue holds.

// MaxCountBuckets bounds the buckets of one CountCreated.
const MaxCountBuckets = 500

// CountCreated counts, for each run status, the runs created in each bucket
// [edges[i], edges[i+1]) (by the index's score, the creation time in Unix
// ms): one ZCOUNT per status and bucket, in one pipeline. edges must be
// increasing, with at most MaxCountBuckets+1 of them.
func (s *Store) CountCreated(ctx context.Context, edges []time.Time) (map[RunStatus][]int64, error) {
	if len(edges) < 2 || len(edges) > MaxCountBuckets+1 {
		return nil, fmt.Errorf("count created runs: %d bucket edges, want 2 to %d", len(edges), MaxCountBuckets+1)
	}
	for i := 1; i < len(edges); i++ {
		if !edges[i-1].Before(edges[i]) {
			return nil, errors.New("count created runs: bucket edges are not increasing")
		}
	}
	pipe := s.rdb.Pipeline()
	cmds := make(map[RunStatus][]*redis.IntCmd, len(RunStatuses))
	for _, st := range RunStatuses {
		cs := make([]*redis.IntCmd, len(edges)-1)
		for i := range cs {
			cs[i] = pipe.ZCount(ctx, s.keys.byStatus(st), strconv.FormatInt(ms(edges[i]), 10),
				"("+strconv.FormatInt(ms(edges[i+1]), 10))
		}
		cmds[st] = cs
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("count created runs: %w", err)
	}
	out := make(map[RunStatus][]int64, len(cmds))
	for st, cs := range cmds {
		n := make([]int64, len(cs))
		for i, c := range cs {
			n[i] = c.Val()
		}
		out[st] = n
	}
	return out, nil
}

// RunStamp is what a scan of runs reads of each: enough to count and
// bucket them.
type RunStamp struct {
	ID        string
	CreatedAt time.Time
	Status    RunStatus
	Owner     string
	Workflow  string
}

// MaxStampScan bounds the runs one ScanStamps reads.
const MaxStampScan = 20000

// ScanStamps reads the newest runs (idx:all) created at or after since
// (zero: any time), newest first, at most limit of them (at most
// MaxStampScan): their creation time, status, owner and workflow. more
// tells whether older runs of the window were left unread. Runs that have
// expired are left out.
func (s *Store) ScanStamps(ctx context.Context, since time.Time, limit int) (stamps []RunStamp, more bool, err error) {
	if limit <= 0 || limit > MaxStampScan {
		limit = MaxStampScan
	}
	lo := "-inf"
	if !since.IsZero() {
		lo = strconv.FormatInt(ms(since), 10)
	}
	const batch = 500
	seen := make(map[string]bool)
	// Pages by offset, newest first: a run created meanwhile shifts the
	// entries down, so a page may repeat an entry of the page before
	// (skipped), and none is missed.
	for offset := int64(0); len(seen) <= limit; {
		page, err := s.rdb.ZRevRangeByScoreWithScores(ctx, s.keys.all(), &redis.ZRangeBy{
			Max: "+inf", Min: lo, Offset: offset, Count: batch,
		}).Result()
		if err != nil {
			return nil, false, fmt.Errorf("scan runs: %w", err)
		}
		entries, err := indexEntries(page)
		if err != nil {
			return nil, false, err
		}
		offset += int64(len(entries))
		fresh := entries[:0:0]
		for _, z := range entries {
			if !seen[z.ID] && len(seen) <= limit {
				seen[z.ID] = true
				fresh = append(fresh, z)
			}
		}
		if len(seen) > limit {
			fresh = fresh[:len(fresh)-1] // the one past the limit: there is more
			more = true
		}
		if err := s.stamps(ctx, fresh, &stamps); err != nil {
			return nil, false, err
		}
		if more || len(entries) < batch {
			break
		}
	}
	return stamps, more, nil
}

// stamps reads the heads of index entries zs into out, leaving out the
// runs that have expired.
func (s *Store) stamps(ctx context.Context, zs []indexEntry, out *[]RunStamp) error {
	if len(zs) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(zs))
	for i, z := range zs {
		cmds[i] = pipe.HMGet(ctx, s.keys.run(z.ID), "status", "owner", "workflow")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("scan runs: %w", err)
	}
	for i, z := range zs {
		v := cmds[i].Val()
		st, _ := v[0].(string)
		if st == "" {
			continue // expired
		}
		o, _ := v[1].(string)
		w, _ := v[2].(string)
		*out = append(*out, RunStamp{ID: z.ID, CreatedAt: time.UnixMilli(int64(z.Score)), Status: RunStatus(st),
			Owner: o, Workflow: w})
	}
	return nil
}

// MaxRecentNotifications bounds the notifications one RecentNotifications
// reads.
const MaxRecentNotifications = 50000

// RecentNotifications reads the notifications written at or after
// notBefore (by their "at" time), newest first, at most limit of them (at
// most MaxRecentNotifications). It stops at the first older entry: entries
// are appended in time order. more tells whether it stopped at limit with
// older entries left.
func (s *Store) RecentNotifications(ctx context.Context, notBefore time.Time, limit int) (ns []Notification, more bool, err error) {
	if limit <= 0 || limit > MaxRecentNotifications {
		limit = MaxRecentNotifications
	}
	const batch = 1000
	hi := "+"
	for {
		n := min(batch, limit-len(ns))
		xs, err := s.rdb.XRevRangeN(ctx, s.keys.notifications(), hi, "-", int64(n)).Result()
		if err != nil {
			return nil, false, fmt.Errorf("read notifications: %w", err)
		}
		for _, x := range xs {
			nt := notificationOf(x)
			if nt.At.Before(notBefore) {
				return ns, false, nil
			}
			ns = append(ns, nt)
		}
		if len(xs) < n {
			return ns, false, nil
		}
		if len(ns) >= limit {
			return ns, true, nil
		}
		id, ok := parseEntryID(xs[len(xs)-1].ID)
		if !ok {
			return nil, false, fmt.Errorf("%w: stream entry ID %q", ErrUnexpectedReply, xs[len(xs)-1].ID)
		}
		hi = "(" + id.String()
	}
}

// GateUsage is a gate in use: its name (KeyGate or WorkflowGate) and how
// many runs it admitted and has waiting.
type GateUsage struct {
	Gate      string
	Admitted  int64
	Waiting   int64
	ChangedAt time.Time // when it last admitted or queued a run
}

// MaxGates bounds the gates one Gates reads.
const MaxGates = 1000

// Gates reads up to limit gates in use (idx:gates; at most MaxGates), most
// recently used first, with the size of their admitted set and line, and
// the number of gates in use.
func (s *Store) Gates(ctx context.Context, limit int) ([]GateUsage, int64, error) {
	if limit <= 0 || limit > MaxGates {
		limit = MaxGates
	}
	zs, err := s.rdb.ZRevRangeWithScores(ctx, s.keys.gates(), 0, int64(limit-1)).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("read gates: %w", err)
	}
	pipe := s.rdb.Pipeline()
	total := pipe.ZCard(ctx, s.keys.gates())
	adm := make([]*redis.IntCmd, len(zs))
	wait := make([]*redis.IntCmd, len(zs))
	names := make([]string, len(zs))
	for i, z := range zs {
		g, ok := z.Member.(string)
		if !ok {
			return nil, 0, fmt.Errorf("%w: a sorted set member of type %T", ErrUnexpectedReply, z.Member)
		}
		names[i] = g
		adm[i] = pipe.ZCard(ctx, s.keys.gateAdmitted(g))
		wait[i] = pipe.ZCard(ctx, s.keys.gateWait(g))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, 0, fmt.Errorf("read gates: %w", err)
	}
	out := make([]GateUsage, 0, len(zs))
	for i, g := range names {
		if !strings.HasPrefix(g, gateKey) && !strings.HasPrefix(g, gateWorkflow) {
			continue
		}
		out = append(out, GateUsage{Gate: g, Admitted: adm[i].Val(), Waiting: wait[i].Val(),
			ChangedAt: time.UnixMilli(int64(zs[i].Score))})
	}
	return out, total.Val(), nil
}
