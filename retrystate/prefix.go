package retrystate

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// prefixPage is how many index entries one read of a prefix lookup takes.
const prefixPage = 1000

// RunsByPrefix returns the runs (without their steps) whose ID starts with
// prefix, among the runs the all-runs index has with a creation time (Unix
// ms, the index's score) from minMs to maxMs, newest first. Expired runs are
// left out, and with owner set the runs of other owners. It stops once it
// has limit runs (limit <= 0: no limit).
//
// The index is read by score range, a page at a time, and the IDs are
// matched here: the cost is that of the range, O(log N + M) for its M
// entries, whatever N the index holds. The caller turns the prefix into the
// range (run IDs begin with their creation time: see workflow.NewRunID).
func (s *Store) RunsByPrefix(ctx context.Context, prefix string, minMs, maxMs int64, owner string, limit int) ([]*Run, error) {
	var out []*Run
	maxScore := strconv.FormatInt(maxMs, 10)
	minScore := strconv.FormatInt(minMs, 10)
	for offset := int64(0); ; {
		page, err := s.rdb.ZRevRangeByScore(ctx, s.keys.all(), &redis.ZRangeBy{
			Max: maxScore, Min: minScore, Offset: offset, Count: prefixPage,
		}).Result()
		if err != nil {
			return nil, err
		}
		offset += int64(len(page))
		var ids []indexEntry
		for _, id := range page {
			if strings.HasPrefix(id, prefix) {
				ids = append(ids, indexEntry{ID: id})
			}
		}
		if out, err = s.appendVisible(ctx, out, ids, owner, limit); err != nil {
			return nil, err
		}
		if len(page) < prefixPage || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
	}
}

// ScanRunsByPrefix is RunsByPrefix over the whole all-runs index, whatever
// the runs' creation times, in no particular order: ZSCAN with MATCH
// prefix*, which reads every entry of the index (O(N), in pages of a few
// thousand, each a short command). prefix must hold no glob character (a
// run ID's alphabet has none).
func (s *Store) ScanRunsByPrefix(ctx context.Context, prefix, owner string, limit int) ([]*Run, error) {
	var out []*Run
	seen := make(map[string]bool)
	var cursor uint64
	for {
		// ZSCAN replies with members and scores, alternately.
		kv, next, err := s.rdb.ZScan(ctx, s.keys.all(), cursor, prefix+"*", 5*prefixPage).Result()
		if err != nil {
			return nil, err
		}
		var ids []indexEntry
		for i := 0; i < len(kv); i += 2 {
			if id := kv[i]; !seen[id] { // ZSCAN may return an entry twice
				seen[id] = true
				ids = append(ids, indexEntry{ID: id})
			}
		}
		if out, err = s.appendVisible(ctx, out, ids, owner, limit); err != nil {
			return nil, err
		}
		cursor = next
		if cursor == 0 || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
	}
}

// appendVisible appends to out the runs of ids that have not expired and,
// with owner set, belong to owner, up to limit runs in all. It reads the
// runs a few at a time: no more than the runs still wanted at once.
func (s *Store) appendVisible(ctx context.Context, out []*Run, ids []indexEntry, owner string, limit int) ([]*Run, error) {
	for len(ids) > 0 && (limit <= 0 || len(out) < limit) {
		n := len(ids)
		if limit > 0 {
			n = min(n, limit-len(out))
		}
		runs, err := s.runHeads(ctx, ids[:n])
		if err != nil {
			return nil, err
		}
		ids = ids[n:]
		for _, r := range runs {
			if owner == "" || r.Owner == owner {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// RunHead returns a run without its steps, or ErrRunNotFound (expired runs
// included).
func (s *Store) RunHead(ctx context.Context, id string) (*Run, error) {
	vals, err := s.rdb.HMGet(ctx, s.keys.run(id), runFields...).Result()
	if err != nil {
		return nil, err
	}
	h := make(map[string]string, len(runFields))
	for j, v := range vals {
		if v, ok := v.(string); ok && j < len(runFields) {
			h[runFields[j]] = v
		}
	}
	if h["status"] == "" {
		return nil, ErrRunNotFound
	}
	return parseRun(id, h), nil
}
