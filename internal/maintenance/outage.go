package maintenance

import (
	"context"
	"sync"
	"time"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/internal/testsignal"
)

// Outages and locks: every call of the reconciler to Redis says whether
// Redis was there (call, reached); once it answers again after an outage,
// expired fences and stalled deliveries wait OutageGrace, so that live
// workers save what they did meanwhile. The pass and the sweep each run
// under a Redis lock (withLock), one replica at a time.

// outageConfig is the outage guard's own configuration (ReconcilerConfig).
type outageConfig struct {
	// grace is how long repairs of expired fences and stalled deliveries
	// wait once Redis answers again (OutageGrace).
	grace time.Duration
}

// outageSignals tell a test of this package that Redis was found back
// after an outage, with the grace's end, and that a lock was lost.
type outageSignals struct {
	back     testsignal.Signal[time.Time]
	lostLock testsignal.Signal[string]
}

// withLock runs fn under the named lock, extending it while fn runs.
func (r *Reconciler) withLock(ctx context.Context, name string, ttl time.Duration, fn func(context.Context) error) (bool, error) {
	if !r.running.TryLock() {
		return false, nil // this reconciler is at it already
	}
	defer r.running.Unlock()
	token := r.token
	var ok bool
	err := r.call(ctx, func(ctx context.Context) (err error) {
		ok, err = r.deps.Store.TryLock(ctx, name, token, ttl)
		return err
	})
	if err != nil || !ok {
		return false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				var held bool
				if err := r.call(ctx, func(ctx context.Context) (err error) {
					held, err = r.deps.Store.ExtendLock(ctx, name, token, ttl)
					return err
				}); err == nil && !held {
					r.log.Warn("lost the reconciler lock", "lock", name)
					r.outageSignals.lostLock.Signal(name)
					cancel()
					return
				}
			}
		}
	})
	err = fn(ctx)
	cancel()
	wg.Wait()
	if uerr := r.call(context.WithoutCancel(ctx), func(ctx context.Context) error {
		return r.deps.Store.Unlock(ctx, name, token)
	}); uerr != nil && err == nil {
		r.log.Warn("could not release the reconciler lock", core.AttrError, uerr)
	}
	return true, err
}

// slowCall is how long a call to Redis may take before the reconciler
// takes Redis for having been away while it waited (see call).
const slowCall = time.Second

// call runs fn, one call of the reconciler to Redis, and notes how it went
// (see reached): every call counts, whichever of them was waiting when
// Redis went away.
func (r *Reconciler) call(ctx context.Context, fn func(context.Context) error) error {
	asked := r.deps.Clock.Now()
	err := fn(ctx)
	r.reached(ctx, asked, err)
	return err
}

// reached records how a call to Redis asked at asked went. A call that
// failed, or answered later than slowCall, means Redis was away (a frozen
// Redis answers late: the client retries its timeouts, so no call need
// fail): attempts whose fences expired meanwhile may belong to live workers
// that could not renew them. The first prompt answer after a failure, and
// a late answer itself, start the OutageGrace.
//
// Every call counts, not only the lock's: Redis may freeze while any call
// of a sweep or pass is waiting, and the next sweep, whose calls are all
// prompt, must still hold. A freeze that begins and ends while the
// reconciler makes no call at all is not seen here; as the sweep ticker
// asks Redis every SweepInterval (an idle sweep too: its one read),
// such a freeze lasts less than SweepInterval + slowCall, too short to
// expire the fence of a live attempt (renewed every FenceTTL/3, so never
// less than 2/3 of FenceTTL from expiry) unless FenceTTL < 1.5 *
// (SweepInterval + slowCall): 2.25s with the default SweepInterval (500ms),
// under the default FenceTTL (3s).
func (r *Reconciler) reached(ctx context.Context, asked time.Time, err error) {
	if err != nil && ctx.Err() != nil {
		return // cancelled: says nothing about Redis
	}
	now := r.deps.Clock.Now()
	waited := now.Sub(asked)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err != nil:
		r.unreached = true
		return
	case waited <= slowCall && !r.unreached:
		return
	}
	r.unreached = false
	r.quietUntil = now.Add(r.outageCfg.grace)
	r.log.Info("Redis answers again; attempts whose fences expired meanwhile are not counted as crashed yet, so that live workers can save them",
		"for", r.outageCfg.grace, "call_waited", waited.Round(time.Millisecond))
	r.outageSignals.back.Signal(r.quietUntil)
}

// repairsHeld reports whether expired fences and stalled deliveries must
// wait (OutageGrace).
func (r *Reconciler) repairsHeld(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return now.Before(r.quietUntil)
}
