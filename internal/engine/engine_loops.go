package engine

import (
	"context"
	"time"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// snooze records a snooze of a running attempt (snooze.lua) and makes sure
// the next visit's task exists.
func (e *Engine) snooze(ctx context.Context, log core.Logger, p tasks.Step, token string, pol core.Policy, delay, elapsed time.Duration) error {
	// The next visit is the same attempt under the next gen; the script
	// writes its task, scheduled for its due time, with the snooze.
	visit := tasks.Step{RunID: p.RunID, Workflow: p.Workflow, Index: p.Index, Name: p.Name, Attempt: p.Attempt, Gen: p.Gen + 1}
	args := retrystate.SnoozeParams{RunID: p.RunID, Index: p.Index, Token: token, Delay: delay,
		Retention: e.cfg.Retention, TaskID: visit.ID(), Message: visit.AsynqMessage(e.cfg.Queue, pol.StepTimeout)}
	var res retrystate.SnoozeResult
	err := e.persist(ctx, log, "record snooze", func(ctx context.Context) (err error) {
		args.Now = e.cfg.Clock.Now()
		res, err = e.store.Snooze(ctx, args)
		return err
	})
	switch {
	case err != nil:
		log.Error("could not record the snooze; the attempt will run again", core.AttrError, err)
		return err
	case res.Outcome == retrystate.OutcomeFenced:
		log.Info("attempt snoozed but no longer owns its step; discarded", core.AttrReason, res.Why)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeDiscarded, elapsed)
		return nil
	case res.Outcome == retrystate.OutcomeDone && res.RunStatus != core.StatusFailed:
		log.Info("step snoozed (by an earlier try whose reply was lost)", core.AttrDelay, delay)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeSnoozed, elapsed)
		return nil
	case res.Outcome == retrystate.OutcomeDone:
		log.Error("step snoozed past the run's deadline (recorded by an earlier try whose reply was lost)", "status", res.RunStatus)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.FailedOutcome(core.CodeRunTimeout), elapsed)
		return nil
	case res.Outcome == retrystate.OutcomeRunFailed:
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.FailedOutcome(res.Code), elapsed)
		e.runFailed(ctx, log, p.RunID, p.Workflow, res.RunFailure, "step snoozed past the run's deadline")
		return nil
	}
	e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeSnoozed, elapsed)
	log.Info("step snoozed", core.AttrDelay, delay, core.AttrDueAt, res.Dispatch.DueAt, core.AttrDuration, elapsed)
	if res.Enqueued {
		e.disp.scheduled(res.Dispatch)
		return nil
	}
	next := *res.Dispatch
	if err := e.persist(ctx, log, "enqueue snoozed step", func(ctx context.Context) error {
		return e.disp.Enqueue(ctx, p.RunID, p.Workflow, next)
	}); err != nil {
		// The run is in idx:scheduled: the reconciler re-creates the task.
		log.Error("could not enqueue the snoozed step", core.AttrError, err)
		return err
	}
	return nil
}

// jump records a goto of a running attempt (goto.lua) and makes sure the
// target's task exists.
func (e *Engine) jump(ctx context.Context, log core.Logger, p tasks.Step, token, target string, elapsed time.Duration) error {
	args := retrystate.GotoParams{RunID: p.RunID, Index: p.Index, Token: token, Target: target, Retention: e.cfg.Retention}
	// (The target's attempt number is in the run's state only, so its task
	// is enqueued after the script, as a next step's task is without a
	// prediction: a crash in between leaves this task to be delivered
	// again, and begin answers "stale" with the target's dispatch.)
	var res retrystate.GotoResult
	err := e.persist(ctx, log, "record goto", func(ctx context.Context) (err error) {
		args.Now = e.cfg.Clock.Now()
		res, err = e.store.Goto(ctx, args)
		return err
	})
	switch {
	case err != nil:
		log.Error("could not record the goto; the attempt will run again", core.AttrError, err)
		return err
	case res.Outcome == retrystate.OutcomeFenced:
		log.Info("attempt asked for a goto but no longer owns its step; discarded", core.AttrReason, res.Why)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeDiscarded, elapsed)
		return nil
	case res.Outcome == retrystate.OutcomeDone && res.RunStatus != core.StatusFailed:
		log.Info("goto recorded (by an earlier try whose reply was lost)", "goto", target)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeGoto, elapsed)
		return nil
	case res.Outcome == retrystate.OutcomeDone:
		log.Error("step asked for an invalid goto (recorded by an earlier try whose reply was lost)", "status", res.RunStatus)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.FailedOutcome(core.CodeInvalidGoto), elapsed)
		return nil
	case res.Outcome == retrystate.OutcomeRunFailed:
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.FailedOutcome(res.Code), elapsed)
		e.runFailed(ctx, log, p.RunID, p.Workflow, res.RunFailure, "step asked for an invalid goto")
		return nil
	}
	e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeGoto, elapsed)
	log.Info("goto", "goto", target, "next_attempt", res.Dispatch.Attempt, core.AttrDuration, elapsed)
	if res.Enqueued {
		return nil
	}
	next := *res.Dispatch
	if err := e.persist(ctx, log, "enqueue goto target", func(ctx context.Context) error {
		return e.disp.Enqueue(ctx, p.RunID, p.Workflow, next)
	}); err != nil {
		log.Error("could not enqueue the goto's target step", core.AttrError, err)
		return err
	}
	return nil
}
