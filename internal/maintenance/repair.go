package maintenance

import (
	"context"
	"log/slog"
	"sync"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
)

// each runs fn for every run with at most Concurrency in flight and sums
// their reports. A failed repair is logged; the next pass tries again.
func (r *Reconciler) each(ctx context.Context, runs []retrystate.Due, fn func(context.Context, string) (Report, error)) Report {
	var (
		mu    sync.Mutex
		total Report
		wg    sync.WaitGroup
		sem   = make(chan struct{}, r.cfg.Concurrency)
		seen  = make(map[string]bool, len(runs))
	)
	for _, d := range runs {
		if seen[d.RunID] || ctx.Err() != nil {
			continue
		}
		seen[d.RunID] = true
		sem <- struct{}{}
		wg.Add(1)
		go func(id string) {
			defer func() { <-sem; wg.Done() }()
			rep, err := fn(ctx, id)
			if err != nil {
				if ctx.Err() == nil {
					r.log.Warn("repair failed; the next pass retries it", core.AttrRunID, id, core.AttrError, err)
				}
				return
			}
			mu.Lock()
			total.merge(rep)
			mu.Unlock()
		}(d.RunID)
	}
	wg.Wait()
	return total
}

func (r *Reconciler) runLog(id string, d *retrystate.Dispatch) *slog.Logger {
	l := r.log.With(core.AttrRunID, id)
	if d != nil {
		l = l.With(core.AttrStep, d.Name, core.AttrAttempt, d.Attempt)
	}
	return l
}

// outcome logs a repair's outcome, enqueues its dispatch, and reports it.
func (r *Reconciler) outcome(ctx context.Context, id string, rp retrystate.Result) (Report, error) {
	var rep Report
	log := r.runLog(id, rp.Dispatch)
	switch rp.Outcome {
	case retrystate.OutcomeDispatch:
		if !rp.Enqueued {
			if err := r.deps.Persist(ctx, log, "enqueue repaired task", func(ctx context.Context) error {
				return r.call(ctx, func(ctx context.Context) error {
					return r.deps.Tasks.Enqueue(ctx, id, rp.Workflow, *rp.Dispatch)
				})
			}); err != nil {
				return rep, err
			}
		}
		log.Warn("repaired run", "repair", rp.Kind, "crashes", rp.Crashes, core.AttrDueAt, rp.Dispatch.DueAt)
		rep.add(rp.Kind, 1)
		r.cfg.Observer.Repair(rp.Kind)
	case retrystate.OutcomeRunFailed:
		if _, ended := core.FinalStatus(rp.Then); ended {
			log.Error("run failed during repair", "repair", rp.Kind, core.AttrCode, rp.Code, core.AttrReason, rp.Reason, "then", rp.Then)
		} else {
			log.Warn("run's step failed during repair; the run goes on", "repair", rp.Kind, core.AttrCode, rp.Code,
				core.AttrReason, rp.Reason, "then", rp.Then)
		}
		rep.add(rp.Kind, 1)
		rep.Failed++
		r.deps.Tasks.Stop(log, rp.Task, rp.StepStatus)
		r.observeFailed(ctx, id, rp)
	case retrystate.OutcomeAttention:
		log.Error("run needs attention: repaired automatically too often", core.AttrReason, rp.Reason)
		rep.Attention++
		r.cfg.Observer.Repair("needs_attention")
	default:
		// OutcomeNoop, the only other outcome the redispatch, timeout and
		// repair scripts reply with (but a check's, which checkPage reads
		// first): nothing was repaired, nothing to report.
	}
	return rep, nil
}

// observeFailed tells the observer of a repair that failed a step for good
// and, when that ended the run, of the run's end (reading the run's
// workflow name only when an observer listens).
func (r *Reconciler) observeFailed(ctx context.Context, id string, rp retrystate.Result) {
	r.cfg.Observer.Repair(rp.Kind)
	st, ended := core.FinalStatus(rp.Then)
	if _, nop := r.cfg.Observer.(core.NopObserver); nop || !ended {
		return
	}
	wf, err := r.deps.Store.RunWorkflow(ctx, id)
	if err != nil {
		r.log.Debug("cannot read the workflow of a failed run for metrics", core.AttrRunID, id, core.AttrError, err)
	}
	code := rp.Code
	if st == core.StatusSucceeded {
		code = ""
	}
	r.cfg.Observer.RunFinished(ctx, id, wf, st, code)
}
