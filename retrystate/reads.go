package retrystate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Reads of runs, their journals and the notification stream.

// Run returns a run with its steps, read at one instant, or ErrRunNotFound.
func (s *Store) Run(ctx context.Context, id string) (*Run, error) {
	// One command: the run and its steps are one hash, read at one instant.
	h, err := s.rdb.HGetAll(ctx, s.keys.run(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("read run: %w", err)
	}
	if len(h) == 0 {
		return nil, ErrRunNotFound
	}
	if err := s.fillCompact(ctx, id, h); err != nil {
		return nil, fmt.Errorf("read run: %w", err)
	}
	r := recordFromHash(id, h)
	if r.Waiting != "" {
		g := r.waitGate()
		pipe := s.rdb.Pipeline()
		rank := pipe.ZRank(ctx, s.keys.gateWait(g), id)
		var held *redis.StringSliceCmd
		if r.Waiting == WaitOrderingKey {
			held = pipe.ZRange(ctx, s.keys.gateAdmitted(g), 0, maxHeldBy-1)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("read run: %w", err)
		}
		if pos, err := rank.Result(); err == nil {
			r.Position = int(pos) + 1
		}
		if held != nil {
			r.HeldBy = held.Val()
		}
	}
	return r, nil
}

// ListQuery selects runs, newest first.
type ListQuery struct {
	Status RunStatus // "" for every status
	Limit  int       // default 50, at most 1000
	Cursor string    // from the previous page; "" for the first
	// Owner and Workflow, when set, keep only the runs of that owner and
	// workflow. A filtered listing examines a bounded number of index
	// entries per page (see scanRuns): a page may then hold fewer than
	// Limit runs, or none, with a next cursor to go on from.
	Owner    string
	Workflow string
	// IDPrefix, when set, keeps the runs whose ID starts with it; a whole
	// run ID reads that run alone. The prefix is matched on the index's
	// entries, without reading the runs.
	IDPrefix string
	// CreatedFrom and CreatedTo (Unix ms; 0 for no bound) keep the runs
	// created in [CreatedFrom, CreatedTo): a range of the index's scores,
	// which the scan does not go beyond.
	CreatedFrom, CreatedTo int64
	// Input, when set, keeps the runs whose input (JSON) it accepts; the
	// scan reads each candidate's input (after its owner and workflow
	// matched).
	Input func(input []byte) bool
	// Budget bounds the index entries one page examines when a filter
	// other than Status and the creation range is set; 0 for the default:
	// SearchBudget with IDPrefix or Input, else the greater of 1,000 and 10
	// per run of Limit.
	Budget int
	// InputBytes bounds the bytes of input one page reads, checked every
	// 50 inputs; 0 for the default, 64 MiB.
	InputBytes int
}

// runIDLen is the length of a run ID (core.RunIDLen).
const runIDLen = 26

// SearchBudget is the default bound of a search (ListQuery.IDPrefix or
// Input): the index entries one page examines, newest first.
const SearchBudget = 10000

// searchInputBytes bounds the bytes of input one page reads: once past
// it, the page ends as it does at its Budget.
const searchInputBytes = 64 << 20

// Page is a page of a listing.
type Page struct {
	Runs []*Run // without their steps
	// Next is the cursor of the next page ("" after the last).
	Next string
	// Scanned is the number of index entries the page examined (0 when
	// it needed no filter).
	Scanned int
	// Limited: the scan's bound ended the page before it held Limit runs
	// or reached the end of the index; Next goes on from where it stopped.
	Limited bool
}

func (q ListQuery) search() bool {
	return q.Owner != "" || q.Workflow != "" || q.IDPrefix != "" || q.Input != nil
}

// ListRuns returns a page of runs (without their steps) and the cursor of
// the next page ("" after the last).
func (s *Store) ListRuns(ctx context.Context, q ListQuery) ([]*Run, string, error) {
	p, err := s.ListPage(ctx, q)
	return p.Runs, p.Next, err
}

// ListPage returns a page of runs as ListRuns does, and whether the
// scan's bound ended it.
func (s *Store) ListPage(ctx context.Context, q ListQuery) (Page, error) {
	if q.CreatedFrom < 0 || q.CreatedTo < 0 || (q.CreatedTo != 0 && q.CreatedTo <= q.CreatedFrom) {
		return Page{}, ErrBadRange
	}
	if len(q.IDPrefix) == runIDLen {
		return s.listOne(ctx, q)
	}
	if q.search() || q.CreatedFrom != 0 || q.CreatedTo != 0 {
		return s.listFiltered(ctx, q)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	idx := s.keys.all()
	if q.Status != "" {
		idx = s.keys.byStatus(q.Status)
	}
	// The cursor is "<created ms>:<run ID>" of the last run of the previous
	// page. Runs created in the same millisecond sort by ID, descending.
	maxScore, afterID := "+inf", ""
	if q.Cursor != "" {
		score, id, ok := splitCursor(q.Cursor)
		if !ok {
			return Page{}, ErrBadCursor
		}
		maxScore, afterID = strconv.FormatInt(score, 10), id
	}
	var ids []indexEntry
	for offset := int64(0); len(ids) < limit+1; {
		page, err := s.rdb.ZRevRangeByScoreWithScores(ctx, idx, &redis.ZRangeBy{
			Max: maxScore, Min: "-inf", Offset: offset, Count: int64(limit + 1),
		}).Result()
		if err != nil {
			return Page{}, err
		}
		entries, err := indexEntries(page)
		if err != nil {
			return Page{}, err
		}
		for _, z := range entries {
			if afterID != "" && strconv.FormatInt(int64(z.Score), 10) == maxScore && z.ID >= afterID {
				continue
			}
			ids = append(ids, z)
		}
		if len(page) < limit+1 {
			break
		}
		offset += int64(len(page))
	}
	next := ""
	if len(ids) > limit {
		last := ids[limit-1]
		next = fmt.Sprintf("%d:%s", int64(last.Score), last.ID)
		ids = ids[:limit]
	}
	runs, err := s.runHeads(ctx, ids)
	if err != nil {
		return Page{}, err
	}
	return Page{Runs: runs, Next: next}, nil
}

// listOne is ListPage for a whole run ID: that run, when every filter
// keeps it. A cursor past it (its page was read) gives none.
func (s *Store) listOne(ctx context.Context, q ListQuery) (Page, error) {
	if q.Cursor != "" {
		if _, _, ok := splitCursor(q.Cursor); !ok {
			return Page{}, ErrBadCursor
		}
		return Page{}, nil
	}
	runs, err := s.runHeads(ctx, []indexEntry{{ID: q.IDPrefix}})
	if err != nil || len(runs) == 0 {
		return Page{}, err
	}
	r := runs[0]
	created := r.CreatedAt.UnixMilli()
	if (q.Status != "" && r.Status != q.Status) || (q.Owner != "" && r.Owner != q.Owner) ||
		(q.Workflow != "" && r.Workflow != q.Workflow) || created < q.CreatedFrom ||
		(q.CreatedTo != 0 && created >= q.CreatedTo) || (q.Input != nil && !q.Input([]byte(r.Input))) {
		return Page{Scanned: 1}, nil
	}
	return Page{Runs: runs, Scanned: 1}, nil
}

func splitCursor(c string) (int64, string, bool) {
	for i := range len(c) {
		if c[i] == ':' {
			n, err := strconv.ParseInt(c[:i], 10, 64)
			if err != nil || i+1 >= len(c) {
				return 0, "", false
			}
			return n, c[i+1:], true
		}
	}
	return 0, "", false
}

// Journal returns a run's journal, oldest first, or ErrRunNotFound.
func (s *Store) Journal(ctx context.Context, id string) ([]Entry, error) {
	pipe := s.rdb.Pipeline()
	head := pipe.HMGet(ctx, s.keys.run(id), "status", "jn")
	xs := pipe.XRange(ctx, s.keys.journal(id), "-", "+")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	hv := head.Val()
	if len(hv) < 2 || hv[0] == nil {
		return nil, ErrRunNotFound
	}
	// A compact run's journal starts in its hash (compact.go).
	jn, _ := hv[1].(string)
	out, err := s.movedJournal(ctx, id, jn)
	if err != nil {
		return nil, err
	}
	for _, x := range xs.Val() {
		out = append(out, parseEntry(x.ID, x.Values))
	}
	return out, nil
}

// Current is a run's status and its current step's dispatch, as Peek reads
// them.
type Current struct {
	Status         RunStatus
	NeedsAttention bool
	UpdatedAt      time.Time
	StepStatus     StepStatus
	Task           string
	FenceExpiresAt time.Time
	Dispatch       Dispatch
}

// Peek reads a run's status and current dispatch in one round trip. It
// returns ErrRunNotFound for an unknown run.
func (s *Store) Peek(ctx context.Context, runID string) (Current, error) {
	keys, _ := peekLua{Run: s.keys.run(runID)}.args()
	res, err := s.scripts.peek.Run(ctx, s.rdb, keys).Result()
	if err != nil {
		return Current{}, fmt.Errorf("peek: %w", err)
	}
	if arr, _ := res.([]any); len(arr) == 0 {
		return Current{}, ErrRunNotFound
	}
	v, err := toStrings(res)
	if err != nil {
		return Current{}, fmt.Errorf("peek: %w", err)
	}
	return decodePeek(v)
}

// CountByStatus returns the number of runs of each status, of runs
// needing attention under the key "needs_attention", and of runs waiting
// for each WaitReason under "waiting:<reason>".
func (s *Store) CountByStatus(ctx context.Context) (map[string]int64, error) {
	statuses := RunStatuses
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(statuses))
	for i, st := range statuses {
		cmds[i] = pipe.ZCard(ctx, s.keys.byStatus(st))
	}
	attention := pipe.ZCard(ctx, s.keys.attention())
	waiting := make([]*redis.IntCmd, len(waitReasons))
	for i, r := range waitReasons {
		waiting[i] = pipe.ZCard(ctx, s.keys.waiting(r))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(statuses)+1)
	for i, st := range statuses {
		out[string(st)] = cmds[i].Val()
	}
	out["needs_attention"] = attention.Val()
	for i, r := range waitReasons {
		out["waiting:"+string(r)] = waiting[i].Val()
	}
	return out, nil
}

// Notification is one entry of the queue's notification stream: a run-level
// event (run_failed, run_succeeded, run_cancelled, ...).
type Notification struct {
	ID       string // stream entry ID; pass it as after to read on
	Type     string
	At       time.Time
	RunID    string
	Workflow string
	Fields   map[string]string
}

// streamAfter reads up to count entries of a stream after the entry ID
// after ("" or "0" for the oldest retained), oldest first.
func (s *Store) streamAfter(ctx context.Context, key, after string, count int64) ([]redis.XMessage, error) {
	start := "-"
	if after != "" && after != "0" {
		if after == maxStreamID {
			return nil, nil // nothing comes after it (Redis refuses the exclusive range)
		}
		start = "(" + after
	}
	return s.rdb.XRangeN(ctx, key, start, "+", count).Result()
}

// maxStreamID is the largest stream entry ID.
const maxStreamID = "18446744073709551615-18446744073709551615"

// Notifications returns up to count notifications after the stream ID
// after ("" or "0" for the oldest retained), oldest first.
func (s *Store) Notifications(ctx context.Context, after string, count int64) ([]Notification, error) {
	xs, err := s.streamAfter(ctx, s.keys.notifications(), after, count)
	if err != nil {
		return nil, err
	}
	out := make([]Notification, 0, len(xs))
	for _, x := range xs {
		typ, at, rest := streamFields(x.Values)
		out = append(out, Notification{ID: x.ID, Type: typ, At: at, RunID: take(rest, "run"),
			Workflow: take(rest, "workflow"), Fields: rest})
	}
	return out, nil
}
