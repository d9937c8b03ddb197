package retrystate

import (
	"context"
	"fmt"

	"github.com/cairnhq/cairn/tasks"
)

// A run that ends successfully, or is cancelled, is rewritten compact
// (lua/lib/compact_run.lua): its definition's fixed fields and every
// field holding its default go, and its journal moves into the run hash.
// This file reads such a run back as it was.

// fillCompact gives the hash h of run id, when it is compact, the fields
// compact_run dropped: those of its definition's template; a step's
// retry_state ("none"; a compensation's once it has an attempt), task (its
// attempt 1's ID), attempts_started (its attempt) and attempt_started_at
// (its started_at); the run's updated_at (its finished_at) and
// deadline_base (its created_at). Every other field it dropped held "" or
// "0", which the parsers read as they read a missing field.
func (s *Store) fillCompact(ctx context.Context, id string, h map[string]string) error {
	sha := h["def"]
	if sha == "" || h["steps"] != "" {
		return nil // not compact
	}
	t, err := s.template(ctx, sha)
	if err != nil {
		return err
	}
	if t == nil {
		return fmt.Errorf("run %s: the template of its definition (%s) is missing", id, s.keys.definition(sha))
	}
	for k, v := range t {
		if _, ok := h[k]; !ok {
			h[k] = v
		}
	}
	fill := func(k, v string) {
		if _, ok := h[k]; !ok {
			h[k] = v
		}
	}
	fill("updated_at", h["finished_at"])
	fill("deadline_base", h["created_at"])
	for i := range atoi(h["steps"]) {
		p, c := stepPrefix(i), stepPrefix(CompBase+i)
		fill(p+"retry_state", string(RetryNone))
		if h[p+"attempt"] == "1" {
			fill(p+"task", tasks.ID(id, i, 1, 0))
		}
		fill(p+"attempts_started", h[p+"attempt"])
		fill(p+"attempt_started_at", h[p+"started_at"])
		if _, ok := h[c+"retry_state"]; !ok && atoi(h[c+"attempt"]) > 0 {
			h[c+"retry_state"] = string(RetryNone)
		}
	}
	return nil
}

// fillCompactHeads fills the run fields of compact runs' heads (runHeads:
// HMGET of runFields) from their templates.
func (s *Store) fillCompactHeads(ctx context.Context, heads []map[string]string) error {
	for _, h := range heads {
		if h["def"] == "" || h["steps"] != "" {
			continue
		}
		t, err := s.template(ctx, h["def"])
		if err != nil {
			return err
		}
		for _, f := range runFields {
			if _, ok := h[f]; !ok {
				if v, ok := t[f]; ok {
					h[f] = v
				}
			}
		}
		if _, ok := h["updated_at"]; !ok {
			h["updated_at"] = h["finished_at"]
		}
	}
	return nil
}

// The journal of a compact run: the entries compact_run moved into the run
// hash (fields jn, j0, j1, ...: a DUMP of the stream), then those of its
// stream (added after: a late delivery, a restore).

// movedJournal returns the journal entries compact_run moved into run id's
// hash, whose field jn is jn ("" for none), oldest first.
func (s *Store) movedJournal(ctx context.Context, id, jn string) ([]Entry, error) {
	if atoi(jn) <= 0 {
		return nil, nil
	}
	keys, _ := journalLua{Run: s.keys.run(id), Temp: s.keys.journalTemp(id)}.args()
	res, err := s.scripts.journal.Run(ctx, s.rdb, keys).Result()
	if err != nil {
		return nil, fmt.Errorf("read the journal of run %s: %w", id, err)
	}
	return parseXRange(res)
}

// parseXRange parses the reply of XRANGE, as a script returns it.
func parseXRange(res any) ([]Entry, error) {
	xs, ok := res.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: journal: %T", ErrUnexpectedReply, res)
	}
	out := make([]Entry, 0, len(xs))
	for _, x := range xs {
		pair, ok := x.([]any)
		if !ok || len(pair) != 2 {
			return nil, fmt.Errorf("%w: journal entry %v", ErrUnexpectedReply, x)
		}
		id, _ := pair[0].(string)
		fv, ok := pair[1].([]any)
		if !ok || len(fv)%2 != 0 {
			return nil, fmt.Errorf("%w: journal entry %v", ErrUnexpectedReply, x)
		}
		values := make(map[string]any, len(fv)/2)
		for i := 0; i < len(fv); i += 2 {
			k, _ := fv[i].(string)
			values[k] = fv[i+1]
		}
		out = append(out, parseEntry(id, values))
	}
	return out, nil
}
