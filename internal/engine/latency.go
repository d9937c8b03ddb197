package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
)

// The step latencies (retrystate/latency.go): the engine counts each
// attempt's run time and wait for a worker in memory, in the fixed
// buckets, by hour, workflow and step, and a Worker adds the counts to
// Redis every LatencyFlushInterval in one pipeline (no script: a step's
// own scripts pay nothing). A worker killed loses what it counted since
// its last flush.

// maxLatencySeries bounds the (kind, workflow, step) series one flush
// carries; what comes beyond them until the flush is dropped (and logged
// once a flush).
const maxLatencySeries = 1000

// latencyKey is one counter of the recorder.
type latencyKey struct {
	hour     int64
	kind     retrystate.LatencyKind
	workflow string
	step     string
	bucket   int
}

// latencySeriesKey names a series, for the cap.
type latencySeriesKey struct {
	kind           retrystate.LatencyKind
	workflow, step string
}

// latencyRecorder counts latencies until they are flushed. Its methods are
// safe for concurrent use.
type latencyRecorder struct {
	store *retrystate.Store
	clock core.Clock
	log   *slog.Logger

	mu      sync.Mutex
	counts  map[latencyKey]int64
	series  map[latencySeriesKey]struct{}
	dropped int64
	// flushMu makes flushes one at a time (the loop's and a caller's).
	flushMu sync.Mutex
}

func newLatencyRecorder(store *retrystate.Store, clock core.Clock, log *slog.Logger) *latencyRecorder {
	return &latencyRecorder{store: store, clock: clock, log: log, counts: make(map[latencyKey]int64),
		series: make(map[latencySeriesKey]struct{})}
}

// record counts d as a latency of kind of workflow's step, in the hour
// of at. A nil recorder records nothing.
func (r *latencyRecorder) record(kind retrystate.LatencyKind, workflow, step string, d time.Duration, at time.Time) {
	if r == nil {
		return
	}
	if !retrystate.ValidLatencyName(workflow) || !retrystate.ValidLatencyName(step) {
		return
	}
	k := latencyKey{hour: retrystate.LatencyHour(at), kind: kind, workflow: workflow, step: step,
		bucket: retrystate.LatencyBucket(d)}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.add(k, 1)
}

// add adds n to k's counter, within the series cap; r.mu is held.
func (r *latencyRecorder) add(k latencyKey, n int64) {
	sk := latencySeriesKey{k.kind, k.workflow, k.step}
	if _, ok := r.series[sk]; !ok {
		if len(r.series) >= maxLatencySeries {
			r.dropped += n
			return
		}
		r.series[sk] = struct{}{}
	}
	r.counts[k] += n
}

// take empties the recorder and returns what it held.
func (r *latencyRecorder) take() (map[latencyKey]int64, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	counts, dropped := r.counts, r.dropped
	r.counts, r.dropped = make(map[latencyKey]int64, len(counts)), 0
	clear(r.series)
	return counts, dropped
}

// flush adds what the recorder counted to Redis. When that fails the
// counts are kept for the next flush (within the series cap).
func (r *latencyRecorder) flush(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	counts, dropped := r.take()
	if dropped > 0 {
		r.log.Warn("step latencies dropped: too many workflow steps in one flush", "dropped", dropped,
			"max_series", maxLatencySeries)
	}
	if len(counts) == 0 {
		return nil
	}
	out := make([]retrystate.LatencyCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, retrystate.LatencyCount{Hour: k.hour, Kind: k.kind, Workflow: k.workflow, Step: k.step,
			Bucket: k.bucket, Count: n})
	}
	if err := r.store.LatencyAdd(ctx, out); err != nil {
		r.mu.Lock()
		for k, n := range counts {
			r.add(k, n)
		}
		r.mu.Unlock()
		return err
	}
	return nil
}

// run flushes every interval until ctx ends, then once more.
func (r *latencyRecorder) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			if err := r.flush(fctx); err != nil {
				r.log.Warn("could not write the last step latencies", core.AttrError, err)
			}
			cancel()
			return
		case <-t.C:
			if err := r.flush(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("could not write step latencies; trying again at the next flush", core.AttrError, err)
			}
		}
	}
}

// FlushLatencies writes the step latencies the engine counted since its
// last flush to Redis now (a Worker, or Engine.Run, does it every
// EngineConfig.LatencyFlushInterval and when it stops). It does nothing
// when latencies are not counted.
func (e *Engine) FlushLatencies(ctx context.Context) error { return e.latency.flush(ctx) }

// latencyObserver records the run time of the attempts whose body ran,
// then tells the Observer it wraps.
type latencyObserver struct {
	core.Observer
	rec   *latencyRecorder
	clock core.Clock
}

// StepAttempt implements core.Observer.
func (o latencyObserver) StepAttempt(ctx context.Context, runID, workflow, step string, outcome core.AttemptOutcome,
	d time.Duration) {
	switch outcome {
	case core.OutcomeSucceeded, core.OutcomeFailedTransient, core.OutcomeFailedPermanent, core.OutcomeExhausted,
		core.OutcomeDiscarded, core.OutcomeSnoozed, core.OutcomeGoto:
		o.rec.record(retrystate.LatencyDuration, workflow, step, d, o.clock.Now())
	default:
		// No duration: the body did not run, or not to its end.
	}
	o.Observer.StepAttempt(ctx, runID, workflow, step, outcome, d)
}
