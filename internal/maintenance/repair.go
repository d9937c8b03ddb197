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

// The outcomes of the repair scripts (redispatch, timeout, repair and its
// check) are reported by the functions below; OutcomeNoop, which each may
// answer, repairs nothing and reports nothing.

// redispatched reports a redispatch's outcome.
func (r *Reconciler) redispatched(ctx context.Context, id string, rp retrystate.RedispatchResult) (Report, error) {
	switch rp.Outcome {
	case retrystate.OutcomeDispatch:
		return r.dispatched(ctx, id, rp.Kind, rp.Workflow, retrystate.Next{Dispatch: rp.Dispatch}, rp.Crashes)
	case retrystate.OutcomeRunFailed:
		return r.failed(ctx, id, rp.Kind, rp.RunFailure, "", ""), nil
	case retrystate.OutcomeAttention:
		return r.attention(id, rp.Reason), nil
	default:
		return Report{}, nil
	}
}

// repaired reports a task repair's outcome (RepairTask, and a check's that
// repaired).
func (r *Reconciler) repaired(ctx context.Context, id string, rp retrystate.RepairResult) (Report, error) {
	switch rp.Outcome {
	case retrystate.OutcomeDispatch:
		return r.dispatched(ctx, id, rp.Kind, rp.Workflow, rp.Next, 0)
	case retrystate.OutcomeAttention:
		return r.attention(id, rp.Reason), nil
	default:
		return Report{}, nil
	}
}

// expired reports an expiry's outcome.
func (r *Reconciler) expired(ctx context.Context, id string, rp retrystate.ExpireResult) Report {
	if rp.Outcome == retrystate.OutcomeRunFailed {
		return r.failed(ctx, id, rp.Kind, rp.RunFailure, rp.Task, rp.StepStatus)
	}
	return Report{}
}

// dispatched logs a repair (kind) that gave run id, of workflow, a new
// dispatch, enqueues it unless the script did, and reports it.
func (r *Reconciler) dispatched(ctx context.Context, id, kind, workflow string, next retrystate.Next, crashes int) (Report, error) {
	var rep Report
	log := r.runLog(id, next.Dispatch)
	if !next.Enqueued {
		if err := r.deps.Persist(ctx, log, "enqueue repaired task", func(ctx context.Context) error {
			return r.call(ctx, func(ctx context.Context) error {
				return r.deps.Tasks.Enqueue(ctx, id, workflow, *next.Dispatch)
			})
		}); err != nil {
			return rep, err
		}
	}
	log.Warn("repaired run", "repair", kind, "crashes", crashes, core.AttrDueAt, next.Dispatch.DueAt)
	rep.add(kind, 1)
	r.cfg.Observer.Repair(kind)
	return rep, nil
}

// failed logs a repair (kind) that failed run id's step for good (f), stops
// the step's task (task, its status stepStatus; "" for none) and reports it.
func (r *Reconciler) failed(ctx context.Context, id, kind string, f retrystate.RunFailure, task string,
	stepStatus retrystate.StepStatus) Report {
	var rep Report
	log := r.runLog(id, nil)
	if _, ended := core.FinalStatus(f.Then); ended {
		log.Error("run failed during repair", "repair", kind, core.AttrCode, f.Code, core.AttrReason, f.Reason, "then", f.Then)
	} else {
		log.Warn("run's step failed during repair; the run goes on", "repair", kind, core.AttrCode, f.Code,
			core.AttrReason, f.Reason, "then", f.Then)
	}
	rep.add(kind, 1)
	rep.Failed++
	r.deps.Tasks.Stop(log, task, stepStatus)
	r.observeFailed(ctx, id, kind, f)
	return rep
}

// attention logs that run id was repaired too often and is left to an
// operator (reason), and reports it.
func (r *Reconciler) attention(id, reason string) Report {
	r.runLog(id, nil).Error("run needs attention: repaired automatically too often", core.AttrReason, reason)
	r.cfg.Observer.Repair("needs_attention")
	return Report{Attention: 1}
}

// observeFailed tells the observer of a repair (kind) that failed a step
// for good (rp) and, when that ended the run, of the run's end (reading the
// run's workflow name only when an observer listens).
func (r *Reconciler) observeFailed(ctx context.Context, id, kind string, rp retrystate.RunFailure) {
	r.cfg.Observer.Repair(kind)
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
