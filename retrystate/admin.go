package retrystate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// auditMaxLen is the approximate number of entries the audit stream keeps.
const auditMaxLen = 10000

// AuditEntry is one entry of the queue's audit stream: an administrator's
// action.
type AuditEntry struct {
	ID       string // stream entry ID; "" when appending
	At       time.Time
	Actor    string
	Action   string
	RunID    string
	Workflow string
	Owner    string // the owner of the run acted on
	Step     string
	Detail   string
}

// AppendAudit appends an entry to the audit stream (trimmed to about
// auditMaxLen entries) and returns its ID.
func (s *Store) AppendAudit(ctx context.Context, e AuditEntry) (string, error) {
	return s.rdb.XAdd(ctx, &redis.XAddArgs{
		Stream: s.keys.audit(), MaxLen: auditMaxLen, Approx: true,
		Values: []any{"at", ms(e.At), "actor", e.Actor, "action", e.Action, "run", e.RunID,
			"workflow", e.Workflow, "owner", e.Owner, "step", e.Step, "detail", e.Detail},
	}).Result()
}

// Audit returns up to count audit entries after the stream ID after ("" for
// the oldest retained), oldest first.
func (s *Store) Audit(ctx context.Context, after string, count int64) ([]AuditEntry, error) {
	xs, err := s.streamAfter(ctx, s.keys.audit(), after, count)
	if err != nil {
		return nil, err
	}
	out := make([]AuditEntry, 0, len(xs))
	for _, x := range xs {
		_, at, f := streamFields(x.Values)
		out = append(out, AuditEntry{ID: x.ID, At: at, Actor: f["actor"], Action: f["action"], RunID: f["run"],
			Workflow: f["workflow"], Owner: f["owner"], Step: f["step"], Detail: f["detail"]})
	}
	return out, nil
}

// WaitNotifications returns up to count notifications after the stream ID
// after, waiting up to block for the first one when there is none yet
// (block <= 0: no wait). With after "" it starts after the newest
// notification at the time of the call. It returns the ID to pass as after
// next time: the last notification's, or the starting point when none came.
// A wait ends early when ctx is done.
func (s *Store) WaitNotifications(ctx context.Context, after string, count int64, block time.Duration) ([]Notification, string, error) {
	if after == "" {
		last, err := s.rdb.XRevRangeN(ctx, s.keys.notifications(), "+", "-", 1).Result()
		if err != nil {
			return nil, "", err
		}
		after = "0-0"
		if len(last) == 1 {
			after = last[0].ID
		}
	}
	if block <= 0 {
		ns, err := s.Notifications(ctx, after, count)
		if err != nil {
			return nil, after, err
		}
		if len(ns) > 0 {
			return ns, ns[len(ns)-1].ID, nil
		}
		return nil, after, nil
	}
	// A block below 1ms would be sent as 0, which is "forever".
	block = max(block, time.Millisecond)
	streams, err := s.rdb.XRead(ctx, &redis.XReadArgs{
		Streams: []string{s.keys.notifications(), after}, Count: count, Block: block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, after, nil
	}
	if err != nil {
		return nil, after, err
	}
	var out []Notification
	for _, st := range streams {
		for _, x := range st.Messages {
			out = append(out, notificationOf(x))
		}
	}
	if len(out) > 0 {
		after = out[len(out)-1].ID
	}
	return out, after, nil
}

// AttentionRuns returns a page of the runs needing an operator, most recent
// first, without their steps, and the cursor of the next page.
func (s *Store) AttentionRuns(ctx context.Context, cursor string, limit int) ([]*Run, string, error) {
	p, err := s.scanRuns(ctx, s.keys.attention(), ListQuery{Cursor: cursor, Limit: limit})
	return p.Runs, p.Next, err
}

// listFiltered is ListPage with a filter or a creation range (see
// ListQuery).
func (s *Store) listFiltered(ctx context.Context, q ListQuery) (Page, error) {
	idx := s.keys.all()
	if q.Status != "" {
		idx = s.keys.byStatus(q.Status)
	}
	return s.scanRuns(ctx, idx, q)
}

// Bounds of a filtered scan: at least scanMin index entries are examined for
// one page, or scanPerRow per row asked for, whichever is more.
const (
	scanMin    = 1000
	scanPerRow = 10
)

// scanRuns pages through index idx, newest (highest score) first, within
// q's creation range, from q.Cursor ("<score>:<run ID>" of the last entry
// of the page before), and returns up to q.Limit runs that q's filters
// keep (an empty filter keeps every run). A filtered scan is bounded: once
// it has examined its budget of index entries (or read searchInputBytes of
// inputs) it returns what it has, possibly fewer than Limit runs or none,
// with a cursor just after the last entry examined (boundCursor: it does
// not name that run), so that the next page goes on from there, and
// Limited set. "" as the next cursor means the range is exhausted.
//
// The ID prefix is matched on the index's entries; the owner and workflow
// are read for every other candidate, and the input only for those whose
// owner and workflow matched: a search never reads another owner's input
// for a caller scoped to an owner, and an input filter is never evaluated
// on it.
func (s *Store) scanRuns(ctx context.Context, idx string, q ListQuery) (Page, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	filtered := q.search()
	readHeads := q.Owner != "" || q.Workflow != ""
	budget := q.Budget
	if budget <= 0 {
		budget = max(scanMin, scanPerRow*limit)
		if q.IDPrefix != "" || q.Input != nil {
			budget = SearchBudget
		}
	}
	batch := int64(limit + 1)
	if filtered {
		batch = max(batch, 200)
	}
	maxScore, afterID := int64(math.MaxInt64), ""
	if q.Cursor != "" {
		score, id, ok := splitCursor(q.Cursor)
		if !ok {
			return Page{}, ErrBadCursor
		}
		maxScore, afterID = score, id
	}
	if q.CreatedTo != 0 && q.CreatedTo-1 < maxScore {
		maxScore, afterID = q.CreatedTo-1, ""
	}
	minScore := "-inf"
	if q.CreatedFrom != 0 {
		minScore = strconv.FormatInt(q.CreatedFrom, 10)
	}
	maxArg := "+inf"
	if maxScore != math.MaxInt64 {
		maxArg = strconv.FormatInt(maxScore, 10)
	}
	var (
		picked    []indexEntry
		last      indexEntry
		scanned   int
		inputRead int
		exhausted bool
	)
	for offset := int64(0); !filtered || scanned < budget; {
		page, err := s.rdb.ZRevRangeByScoreWithScores(ctx, idx, &redis.ZRangeBy{
			Max: maxArg, Min: minScore, Offset: offset, Count: batch,
		}).Result()
		if err != nil {
			return Page{}, err
		}
		entries, err := indexEntries(page)
		if err != nil {
			return Page{}, err
		}
		offset += int64(len(page))
		cands := entries[:0:0]
		for _, z := range entries {
			if afterID != "" && int64(z.Score) == maxScore && z.ID >= afterID {
				continue // at or before the cursor
			}
			cands = append(cands, z)
		}
		// The candidates this batch may examine: the budget's rest.
		cut := false
		if filtered && len(cands) > budget-scanned {
			cands, cut = cands[:budget-scanned], true
		}
		keep, err := s.filterEntries(ctx, cands, q, readHeads, &inputRead)
		if err != nil {
			return Page{}, err
		}
		stopped := false
		for i, z := range cands {
			if len(picked) > limit {
				stopped = true
				break
			}
			if keep[i] < 0 {
				stopped = true // the bound on inputs read
				break
			}
			scanned++
			last = z
			if keep[i] > 0 {
				picked = append(picked, z)
			}
		}
		if stopped || cut || len(picked) > limit {
			break
		}
		if int64(len(page)) < batch {
			exhausted = true
			break
		}
	}
	out := Page{}
	if filtered {
		out.Scanned = scanned
	}
	switch {
	case len(picked) > limit:
		out.Next = cursorOf(picked[limit-1])
		picked = picked[:limit]
	case !exhausted && scanned > 0:
		// The scan's bound ended the page: go on from the last entry
		// examined, which may be another owner's run.
		next, err := s.boundCursor(ctx, idx, last)
		if err != nil {
			return Page{}, err
		}
		out.Next, out.Limited = next, true
	}
	runs, err := s.runHeads(ctx, picked)
	out.Runs = runs
	return out, err
}

// boundCursor is the cursor that goes on after entry last of index idx
// without naming it, since it may be another owner's run: its score and
// the shortest start of its ID that sorts after the next entry's ID at
// the same score ("0", below every run ID, when there is none), so that
// the next page skips what this one examined and nothing else. The
// score tells only that some run was created at that millisecond; the
// start of an ID, its creation time and a character or two of its 80
// random bits.
func (s *Store) boundCursor(ctx context.Context, idx string, last indexEntry) (string, error) {
	score := int64(last.Score)
	rank, err := s.rdb.ZRevRank(ctx, idx, last.ID).Result()
	if errors.Is(err, redis.Nil) {
		return fmt.Sprintf("%d:%s", score, last.ID), nil // gone meanwhile: its own ID still sorts right
	}
	if err != nil {
		return "", err
	}
	after, err := s.rdb.ZRevRangeWithScores(ctx, idx, rank+1, rank+1).Result()
	if err != nil {
		return "", err
	}
	sep := "0"
	if len(after) == 1 && int64(after[0].Score) == score {
		next, _ := after[0].Member.(string)
		k := 0
		for k < len(next) && k < len(last.ID) && next[k] == last.ID[k] {
			k++
		}
		sep = last.ID[:min(k+1, len(last.ID))]
	}
	return fmt.Sprintf("%d:%s", score, sep), nil
}

// filterEntries tells, for each candidate of a scan, whether q's filters
// keep it (1), drop it (0), or whether the page's bound on inputs read
// stopped before it (-1). inputRead counts the bytes of input read.
func (s *Store) filterEntries(ctx context.Context, cands []indexEntry, q ListQuery, readHeads bool,
	inputRead *int) ([]int8, error) {
	keep := make([]int8, len(cands))
	var rest []int // indexes of the candidates still to check, in order
	for i, z := range cands {
		if q.IDPrefix == "" || strings.HasPrefix(z.ID, q.IDPrefix) {
			keep[i] = 1
			rest = append(rest, i)
		}
	}
	if readHeads && len(rest) > 0 {
		pipe := s.rdb.Pipeline()
		heads := make([]*redis.SliceCmd, len(rest))
		for j, i := range rest {
			heads[j] = pipe.HMGet(ctx, s.keys.run(cands[i].ID), "owner", "workflow")
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		kept := rest[:0]
		for j, i := range rest {
			v := heads[j].Val()
			o, _ := v[0].(string)
			w, _ := v[1].(string)
			if (q.Owner != "" && o != q.Owner) || (q.Workflow != "" && w != q.Workflow) {
				keep[i] = 0
				continue
			}
			kept = append(kept, i)
		}
		rest = kept
	}
	if q.Input == nil || len(rest) == 0 {
		return keep, nil
	}
	// The inputs, inputBatch at a time: each up to the client's
	// MaxInputBytes, they are read no further than the page's bound.
	for start := 0; start < len(rest); start += inputBatch {
		chunk := rest[start:min(start+inputBatch, len(rest))]
		if *inputRead > cmp.Or(q.InputBytes, searchInputBytes) {
			// Past the bound: these candidates and the rest are left for
			// the next page.
			for _, i := range rest[start:] {
				keep[i] = -1
			}
			break
		}
		pipe := s.rdb.Pipeline()
		inputs := make([]*redis.StringCmd, len(chunk))
		for j, i := range chunk {
			inputs[j] = pipe.HGet(ctx, s.keys.run(cands[i].ID), "input")
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		for j, i := range chunk {
			in := inputs[j].Val()
			*inputRead += len(in)
			if !q.Input([]byte(in)) {
				keep[i] = 0
			}
		}
	}
	return keep, nil
}

// inputBatch is the number of inputs a search reads in one round trip.
const inputBatch = 50

func cursorOf(z indexEntry) string { return fmt.Sprintf("%d:%s", int64(z.Score), z.ID) }

// indexEntry is an entry of a sorted-set index of runs: a run ID and its
// score.
type indexEntry struct {
	ID    string
	Score float64
}

// indexEntries returns the entries of a sorted set as go-redis read them,
// members as strings.
func indexEntries(zs []redis.Z) ([]indexEntry, error) {
	out := make([]indexEntry, len(zs))
	for i, z := range zs {
		id, ok := z.Member.(string)
		if !ok {
			return nil, fmt.Errorf("%w: a sorted set member of type %T", ErrUnexpectedReply, z.Member)
		}
		out[i] = indexEntry{ID: id, Score: z.Score}
	}
	return out, nil
}

// runHeads reads the runs of index entries, without their steps, skipping
// runs that have expired.
func (s *Store) runHeads(ctx context.Context, ids []indexEntry) ([]*Run, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, z := range ids {
		cmds[i] = pipe.HMGet(ctx, s.keys.run(z.ID), runFields...)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	heads := make([]map[string]string, len(ids))
	for i, c := range cmds {
		h := make(map[string]string, len(runFields))
		for j, v := range c.Val() {
			if v, ok := v.(string); ok {
				h[runFields[j]] = v
			}
		}
		heads[i] = h
	}
	if err := s.fillCompactHeads(ctx, heads); err != nil {
		return nil, err
	}
	runs := make([]*Run, 0, len(ids))
	for i, z := range ids {
		h := heads[i]
		if h["status"] == "" { // expired; its index entries are trimmed by the reconciler
			continue
		}
		runs = append(runs, parseRun(z.ID, h))
	}
	return runs, nil
}
