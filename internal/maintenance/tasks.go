package maintenance

import (
	"context"
	"sync"
	"time"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/internal/testsignal"
	"github.com/cairnhq/cairn/retrystate"
)

// checkPageSize is the number of runs whose tasks one pipeline checks, and
// checkPagesInFlight the pipelines a walk has sent at a time: one that
// Redis runs and the next, waiting, so that Redis never waits for the
// reconciler. Each call to Redis must answer within slowCall, or it counts
// as an outage (see reached): a page waits for the one before it, and a
// check that repairs takes Redis 50 to 80µs (BenchmarkReconcileRetries), so
// a page's answer comes within about 30ms, or ten times that on a machine
// loaded enough to slow Redis down tenfold.
// Task checks: is the task of every scheduled retry or wake-up there, and
// of every run idle for longer than Grace? A missing task is re-enqueued
// (for its due time), an archived one re-dispatched (repair.lua's check and
// repair modes, through Store.CheckTasks and Store.RepairTask). Part of every pass; each
// walk goes on, from one pass to the next, where the last stopped.

// tasksConfig is the task checks' own configuration (ReconcilerConfig).
type tasksConfig struct {
	// grace leaves a run that changed less than this long ago to the
	// engine (Grace).
	grace time.Duration
	// maxChecks bounds the runs a pass reads from each index (MaxChecks).
	maxChecks int
	// maxAutoRecoveries: past it a run needs attention (MaxAutoRecoveries).
	maxAutoRecoveries int
}

// tasksSignals tell a test of this package what a pass's task checks did.
type tasksSignals struct {
	checked testsignal.Signal[Report]
}

// checkTasks checks the tasks of the scheduled runs, then of the runs idle
// for longer than grace (but the scheduled ones, which the first walk
// checks).
func (r *Reconciler) checkTasks(ctx context.Context, now time.Time) (Report, error) {
	rep, err := r.checkIndex(ctx, "idx:scheduled", &r.scheduledAt, false,
		func(ctx context.Context, at retrystate.IndexCursor, n int64) ([]retrystate.Due, retrystate.IndexCursor, bool, error) {
			return r.deps.Store.ScheduledPage(ctx, at, n)
		})
	if err != nil {
		return rep, err
	}
	idleBefore := now.Add(-r.tasksCfg.grace)
	idle, err := r.checkIndex(ctx, "idx:active", &r.idleAt, true,
		func(ctx context.Context, at retrystate.IndexCursor, n int64) ([]retrystate.Due, retrystate.IndexCursor, bool, error) {
			return r.deps.Store.IdlePage(ctx, at, idleBefore, n)
		})
	rep.merge(idle)
	if err == nil {
		r.tasksSignals.checked.Signal(rep)
	}
	return rep, err
}

const (
	checkPageSize      = 200
	checkPagesInFlight = 2
)

// pageReader reads the next page of up to n runs of an index walk from at.
type pageReader func(ctx context.Context, at retrystate.IndexCursor, n int64) ([]retrystate.Due, retrystate.IndexCursor, bool, error)

// checkIndex makes sure that the task each run of an index walk (of the
// index named index) waits for exists in asynq, from *at on, for up to
// MaxChecks runs, and leaves *at where it stopped (the start again when it
// reached the end, or failed). The runs are read a page at a time
// (checkPageSize) and each page is checked, and repaired where it must be,
// in one pipeline of script calls (checkPage), with up to
// checkPagesInFlight pages in flight; idle: the runs come from idx:active,
// and those in idx:scheduled are left to its own walk. The error is a
// failed read of the index; a page whose checks failed ends the walk with
// a warning, as a failed repair is logged, and the pass goes on.
func (r *Reconciler) checkIndex(ctx context.Context, index string, at *retrystate.IndexCursor, idle bool, read pageReader) (Report, error) {
	var (
		mu      sync.Mutex
		total   Report
		failed  error // a page's
		wg      sync.WaitGroup
		pages   = make(chan struct{}, checkPagesInFlight)
		checked int
		readErr error
	)
	for checked < r.tasksCfg.maxChecks && ctx.Err() == nil {
		mu.Lock()
		stop := failed != nil
		mu.Unlock()
		if stop {
			break
		}
		var page []retrystate.Due
		var next retrystate.IndexCursor
		var done bool
		if readErr = r.call(ctx, func(ctx context.Context) (err error) {
			page, next, done, err = read(ctx, *at, int64(min(checkPageSize, r.tasksCfg.maxChecks-checked)))
			return err
		}); readErr != nil {
			break
		}
		*at = next
		checked += len(page)
		if len(page) > 0 {
			pages <- struct{}{}
			wg.Go(func() {
				defer func() { <-pages }()
				rep, err := r.checkPage(ctx, page, idle)
				mu.Lock()
				defer mu.Unlock()
				total.merge(rep)
				if err != nil && failed == nil {
					failed = err
				}
			})
		}
		if done {
			break
		}
	}
	wg.Wait()
	if failed != nil || readErr != nil {
		// Some runs of the walk were not checked: start again next time.
		*at = retrystate.IndexCursor{}
	}
	if failed != nil && ctx.Err() == nil {
		r.log.Warn("task checks failed; the next pass checks these runs again", "index", index, core.AttrError, failed)
	}
	return total, readErr
}

// checkPage makes sure that the task each of the runs waits for exists in
// asynq, with one script call per run, all in one pipeline
// (Store.CheckTasks): a lost task is re-created, an archived one
// re-dispatched, by the script itself. Only the runs whose step's worker
// died (an expired fence) take other calls (redispatch, one run at a time
// after the page's checks); a run written
// within Grace, whose task may still be on its way, is looked at again
// when the grace ends (Report.Recheck).
func (r *Reconciler) checkPage(ctx context.Context, page []retrystate.Due, idle bool) (Report, error) {
	ids := make([]string, len(page))
	for i, d := range page {
		ids[i] = d.RunID
	}
	if idle {
		// The scheduled ones are checked by the walk of idx:scheduled.
		if err := r.call(ctx, func(ctx context.Context) (err error) {
			ids, err = r.deps.Store.Unscheduled(ctx, ids)
			return err
		}); err != nil || len(ids) == 0 {
			return Report{}, err
		}
	}
	var checks []retrystate.Check
	if err := r.call(ctx, func(ctx context.Context) (err error) {
		checks, err = r.deps.Store.CheckTasks(ctx, ids, retrystate.CheckParams{Grace: r.tasksCfg.grace,
			MaxAuto: r.tasksCfg.maxAutoRecoveries, Now: r.deps.Clock.Now()})
		return err
	}); err != nil {
		return Report{}, err
	}
	rep := Report{Checked: len(checks)}
	var crashed []string
	for _, c := range checks {
		var got Report
		var err error
		switch {
		case c.Err != nil:
			err = c.Err
		case c.Result.Outcome == retrystate.OutcomeRecheck:
			got.Recheck = c.Result.RecheckAt
		case c.Result.Outcome == retrystate.OutcomeCrashed:
			crashed = append(crashed, c.RunID)
		default:
			got, err = r.repaired(ctx, c.RunID, c.Result.RepairResult)
		}
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("repair failed; the next pass retries it", core.AttrRunID, c.RunID, core.AttrError, err)
			}
			continue
		}
		rep.merge(got)
	}
	for _, id := range crashed {
		got, err := r.redispatch(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("repair failed; the next pass retries it", core.AttrRunID, id, core.AttrError, err)
			}
			continue
		}
		rep.merge(got)
	}
	return rep, nil
}

// repairTask gives a run's current step whose task is in trouble a task
// that will be delivered.
func (r *Reconciler) repairTask(ctx context.Context, id, task string, trouble retrystate.TaskTrouble) (Report, error) {
	if trouble == retrystate.TaskStalled && r.repairsHeld(r.deps.Clock.Now()) {
		return Report{RepairsHeld: true}, nil
	}
	var rp retrystate.RepairResult
	err := r.call(ctx, func(ctx context.Context) (err error) {
		rp, err = r.deps.Store.RepairTask(ctx, retrystate.RepairParams{RunID: id, TaskID: task, Trouble: trouble,
			MaxAuto: r.tasksCfg.maxAutoRecoveries, Now: r.deps.Clock.Now()})
		return err
	})
	if err != nil {
		return Report{}, err
	}
	return r.repaired(ctx, id, rp)
}
