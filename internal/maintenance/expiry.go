package maintenance

import (
	"context"
	"time"

	"github.com/cairnhq/cairn/internal/testsignal"
	"github.com/cairnhq/cairn/retrystate"
)

// Expiry: a run past its deadline fails with reason run_timeout (its
// script, timeout.lua, through Store.ExpireDeadline), and the entries that
// expired runs left in the indexes are trimmed. Part of every pass; it has
// no configuration of its own beyond the engine's Retention.

// expirySignals tell a test of this package what expiry did in a pass.
type expirySignals struct {
	expired testsignal.Signal[Report] // the deadlines' repairs
	trimmed testsignal.Signal[int]    // index entries trimmed
}

// expireDeadlines fails the runs whose deadline has passed (at most batch).
func (r *Reconciler) expireDeadlines(ctx context.Context, now time.Time) (Report, error) {
	var due []retrystate.Due
	if err := r.call(ctx, func(ctx context.Context) (err error) {
		due, err = r.deps.Store.DueDeadlines(ctx, now, batch)
		return err
	}); err != nil {
		return Report{}, err
	}
	rep := r.each(ctx, due, r.expire)
	r.expirySignals.expired.Signal(rep)
	return rep, nil
}

// trimIndexes trims the index entries of runs that expired (at most
// 10*batch).
func (r *Reconciler) trimIndexes(ctx context.Context, now time.Time) (Report, error) {
	var trimmed int
	if err := r.call(ctx, func(ctx context.Context) (err error) {
		trimmed, err = r.deps.Store.TrimIndexes(ctx, now.Add(-r.deps.Retention), 10*batch)
		return err
	}); err != nil {
		return Report{}, err
	}
	var rep Report
	rep.add("trimmed", trimmed)
	for range trimmed {
		r.cfg.Observer.Repair("trimmed")
	}
	r.expirySignals.trimmed.Signal(trimmed)
	return rep, nil
}

// expire fails run id if it is past its deadline.
func (r *Reconciler) expire(ctx context.Context, id string) (Report, error) {
	var rp retrystate.ExpireResult
	err := r.call(ctx, func(ctx context.Context) (err error) {
		rp, err = r.deps.Store.ExpireDeadline(ctx, retrystate.ExpireParams{RunID: id, Retention: r.deps.Retention,
			Now: r.deps.Clock.Now()})
		return err
	})
	if err != nil {
		return Report{}, err
	}
	return r.expired(ctx, id, rp), nil
}
