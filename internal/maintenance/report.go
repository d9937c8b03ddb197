package maintenance

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Report says what a pass or a sweep found and did.
//
//nolint:recvcheck // Total and String take a value so that a Report value is a fmt.Stringer; the unexported add and merge update one in place
type Report struct {
	// Locked is false when another replica held the lock and this call did
	// nothing, or when a sweep was Idle.
	Locked bool
	// Idle is set by a sweep that found nothing due (no expired fence, no
	// stalled delivery) in its first read, and so took no lock.
	Idle bool
	// Incomplete is the number of runs not yet finished (full passes only).
	Incomplete int64
	// Repairs counts the repairs made, by kind: crashed_attempt,
	// task_missing, retry_task_missing, task_archived, stalled_delivery,
	// deadline, trimmed (index entries of expired runs).
	Repairs map[string]int
	// Failed counts runs that failed here (deadline, crash budget).
	Failed int
	// Attention counts runs left for an operator because they were
	// repaired too often.
	Attention int
	// RepairsHeld is set when expired fences and stalled deliveries
	// were left alone because Redis has just come back from an outage
	// (OutageGrace).
	RepairsHeld bool
	// Checked is the number of runs whose task a pass checked (full
	// passes only; a scheduled run read again as idle is checked once).
	Checked int
	// Recheck, when set, is when a run this pass left alone because it
	// had just been written (its task may still have been on its way)
	// leaves its grace: Run passes again then rather than a whole
	// Interval later, so that a task lost to a crash right after the
	// write is repaired, at most a Grace late, before its due time where
	// it can be.
	Recheck time.Time
}

func (r *Report) add(kind string, n int) {
	if n == 0 {
		return
	}
	if r.Repairs == nil {
		r.Repairs = map[string]int{}
	}
	r.Repairs[kind] += n
}

func (r *Report) merge(o Report) {
	for k, n := range o.Repairs {
		r.add(k, n)
	}
	r.Failed += o.Failed
	r.Attention += o.Attention
	r.Checked += o.Checked
	r.RepairsHeld = r.RepairsHeld || o.RepairsHeld
	if !o.Recheck.IsZero() && (r.Recheck.IsZero() || o.Recheck.Before(r.Recheck)) {
		r.Recheck = o.Recheck
	}
}

// Total is the number of repairs.
func (r Report) Total() int {
	n := 0
	for _, v := range r.Repairs {
		n += v
	}
	return n
}

func (r Report) String() string {
	kinds := make([]string, 0, len(r.Repairs))
	for k, n := range r.Repairs {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(kinds)
	return fmt.Sprintf("repairs [%s], runs failed %d, left for an operator %d", strings.Join(kinds, " "), r.Failed, r.Attention)
}
