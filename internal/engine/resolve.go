package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
)

// The window around a prefix's creation times that FindRuns reads first.
// A run's ID takes its time from Start's clock reading, and the all-runs
// index its score from the one taken when the run is created, one Redis
// round trip later: a little after, or before if the clock stepped back.
// A run whose creation came later still (an outbox's Start, sent when Redis
// was back) is found by the full scan FindRuns falls back to.
const (
	findSlackBefore = 2 * time.Second
	findSlackAfter  = 10 * time.Second
)

// Bounds of FindRunsOptions.Limit.
const (
	defaultFindLimit = 10
	maxFindLimit     = 1000
)

// FindRunsOptions select the runs FindRuns returns.
type FindRunsOptions struct {
	// Owner, when set, finds only the runs started by that owner (see
	// StartOptions.Owner): a prefix never finds, nor tells of, another
	// owner's run.
	Owner string
	// Limit is the most runs returned: default 10, at most 1000. Ask for 2
	// to learn whether a prefix names one run.
	Limit int
}

// ValidRunIDPrefix reports whether s can begin a run ID: 1 to 26
// characters of a run ID's alphabet (lowercase Crockford base32).
func ValidRunIDPrefix(s string) bool {
	if s == "" || len(s) > core.RunIDLen {
		return false
	}
	for i := range len(s) {
		if core.CrockfordIndex[s[i]] < 0 {
			return false
		}
	}
	return true
}

// FindRuns returns the runs whose ID starts with prefix, as List returns
// them (without their steps), newest first, at most opts.Limit. It returns
// ErrInvalidRunID for a prefix that no run ID can start with, and no runs
// (and no error) when none matches. A whole run ID finds that run, if it
// exists. Runs still queued in an outbox are not in Redis yet: FindRuns
// does not find them.
//
// Run IDs begin with their creation time (NewRunID), so a prefix stands for
// a range of creation times: FindRuns reads the all-runs index over that
// range (with a few seconds either side), whose cost is that of the range,
// not of the index. Only when nothing matches there does it scan the whole
// index (ZSCAN MATCH prefix*), for a run created long after its ID (an
// outbox's Start sent later).
func (c *Client) FindRuns(ctx context.Context, prefix string, opts FindRunsOptions) ([]*core.Run, error) {
	if !ValidRunIDPrefix(prefix) {
		return nil, fmt.Errorf("%w %q: not the beginning of a run ID", core.ErrInvalidRunID, prefix)
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = defaultFindLimit
	}
	limit = min(limit, maxFindLimit)
	var recs []*retrystate.Run
	if len(prefix) == core.RunIDLen {
		rec, err := c.store.RunHead(ctx, prefix)
		switch {
		case errors.Is(err, retrystate.ErrRunNotFound):
		case err != nil:
			return nil, err
		case opts.Owner == "" || rec.Owner == opts.Owner:
			recs = append(recs, rec)
		}
	} else {
		lo, hi := prefixTimes(prefix)
		var err error
		recs, err = c.store.RunsByPrefix(ctx, prefix, lo-findSlackBefore.Milliseconds(), hi+findSlackAfter.Milliseconds(),
			opts.Owner, limit)
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 {
			if recs, err = c.store.ScanRunsByPrefix(ctx, prefix, opts.Owner, limit); err != nil {
				return nil, err
			}
			// IDs sort by creation time: newest first.
			slices.SortFunc(recs, func(a, b *retrystate.Run) int { return strings.Compare(b.ID, a.ID) })
		}
	}
	out := make([]*core.Run, len(recs))
	for i, rec := range recs {
		out[i] = core.RunFromRecord(rec)
	}
	return out, nil
}

// prefixTimes returns the creation times, in Unix ms, of the run IDs that
// start with prefix: the first 10 characters of an ID are its time, 5 bits
// a character, most significant first (NewRunID).
func prefixTimes(prefix string) (lo, hi int64) {
	n := min(len(prefix), core.RunIDTimeLen)
	for i := range n {
		lo = lo<<5 | int64(core.CrockfordIndex[prefix[i]])
	}
	free := 5 * (core.RunIDTimeLen - n) // the bits the prefix leaves open
	lo <<= free
	return lo, lo + 1<<free - 1
}
