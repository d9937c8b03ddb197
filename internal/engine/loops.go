package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// SnoozeError is the error Snooze returns: a request, not a failure.
type SnoozeError struct {
	// Delay before the step runs again.
	Delay time.Duration
}

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.Delay) }

// Snooze returns the error that, returned by a step, runs the same step again after d (the
// "poll until ready" pattern): the attempt is neither failed nor counted
// against the retry budget, and keeps its attempt number and idempotency
// key. Each visit counts against max_iterations, so a poll has a ceiling.
// A negative d is 0. Wrapping keeps it a snooze (errors.As).
func Snooze(d time.Duration) error {
	return &SnoozeError{Delay: max(d, 0)}
}

// GotoError is the error Goto returns: a request, not a failure.
type GotoError struct {
	// Step is the name of the step to continue at.
	Step string
}

func (e *GotoError) Error() string { return fmt.Sprintf("goto step %q", e.Step) }

// Goto returns the error that, returned by a step, continues the run at the named step,
// which must be this step or an earlier one: the checkpoints from that step
// on are superseded (kept in the run's journal) and it runs again with a new
// attempt and a fresh retry budget. Each visit counts against
// max_iterations. A step that is not this one or an earlier one fails the
// run (invalid_goto). Wrapping keeps it a goto (errors.As).
func Goto(step string) error {
	return &GotoError{Step: step}
}

// SnoozeOf returns the delay requested with Snooze, if err is one.
func SnoozeOf(err error) (time.Duration, bool) {
	if s, ok := errors.AsType[*SnoozeError](err); ok {
		return s.Delay, true
	}
	return 0, false
}

// GotoOf returns the step requested with Goto, if err is one.
func GotoOf(err error) (string, bool) {
	if g, ok := errors.AsType[*GotoError](err); ok {
		return g.Step, true
	}
	return "", false
}

// snooze records a snooze of a running attempt (snooze.lua) and makes sure
// the next visit's task exists.
func (e *Engine) snooze(ctx context.Context, log logger, p tasks.Step, token string, pol Policy, delay, elapsed time.Duration) error {
	// The next visit is the same attempt under the next gen; the script
	// writes its task, scheduled for its due time, with the snooze.
	visit := tasks.Step{RunID: p.RunID, Workflow: p.Workflow, Index: p.Index, Name: p.Name, Attempt: p.Attempt, Gen: p.Gen + 1}
	args := retrystate.SnoozeArgs{RunID: p.RunID, Index: p.Index, Token: token, Delay: delay,
		Retention: e.cfg.Retention, TaskID: visit.ID(), Message: visit.AsynqMessage(e.cfg.Queue, pol.StepTimeout)}
	var res retrystate.Result
	err := e.persist(ctx, log, "record snooze", func(ctx context.Context) (err error) {
		args.Now = e.cfg.Clock.Now()
		res, err = e.store.Snooze(ctx, args)
		return err
	})
	switch {
	case err != nil:
		log.Error("could not record the snooze; the attempt will run again", AttrError, err)
		return err
	case res.Outcome == retrystate.OutcomeFenced:
		log.Info("attempt snoozed but no longer owns its step; discarded", AttrReason, res.Why)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, OutcomeDiscarded, elapsed)
		return nil
	case res.Outcome == retrystate.OutcomeDone && res.RunStatus != StatusFailed:
		log.Info("step snoozed (by an earlier try whose reply was lost)", AttrDelay, delay)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, OutcomeSnoozed, elapsed)
		return nil
	case res.Outcome == retrystate.OutcomeDone:
		log.Error("step snoozed past the run's deadline (recorded by an earlier try whose reply was lost)", "status", res.RunStatus)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, failedOutcome(CodeRunTimeout), elapsed)
		return nil
	case res.Outcome == retrystate.OutcomeRunFailed:
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, failedOutcome(res.Code), elapsed)
		e.runFailed(ctx, log, p.RunID, p.Workflow, res, "step snoozed past the run's deadline")
		return nil
	}
	e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, OutcomeSnoozed, elapsed)
	log.Info("step snoozed", AttrDelay, delay, AttrDueAt, res.Dispatch.DueAt, AttrDuration, elapsed)
	if res.Enqueued {
		return nil
	}
	next := *res.Dispatch
	if err := e.persist(ctx, log, "enqueue snoozed step", func(ctx context.Context) error {
		return e.disp.enqueue(ctx, p.RunID, p.Workflow, next)
	}); err != nil {
		// The run is in idx:scheduled: the reconciler re-creates the task.
		log.Error("could not enqueue the snoozed step", AttrError, err)
		return err
	}
	return nil
}

// jump records a goto of a running attempt (goto.lua) and makes sure the
// target's task exists.
func (e *Engine) jump(ctx context.Context, log logger, p tasks.Step, token, target string, elapsed time.Duration) error {
	args := retrystate.GotoArgs{RunID: p.RunID, Index: p.Index, Token: token, Target: target, Retention: e.cfg.Retention}
	// (The target's attempt number is in the run's state only, so its task
	// is enqueued after the script, as a next step's task is without a
	// prediction: a crash in between leaves this task to be delivered
	// again, and begin answers "stale" with the target's dispatch.)
	var res retrystate.Result
	err := e.persist(ctx, log, "record goto", func(ctx context.Context) (err error) {
		args.Now = e.cfg.Clock.Now()
		res, err = e.store.Goto(ctx, args)
		return err
	})
	switch {
	case err != nil:
		log.Error("could not record the goto; the attempt will run again", AttrError, err)
		return err
	case res.Outcome == retrystate.OutcomeFenced:
		log.Info("attempt asked for a goto but no longer owns its step; discarded", AttrReason, res.Why)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, OutcomeDiscarded, elapsed)
		return nil
	case res.Outcome == retrystate.OutcomeDone && res.RunStatus != StatusFailed:
		log.Info("goto recorded (by an earlier try whose reply was lost)", "goto", target)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, OutcomeGoto, elapsed)
		return nil
	case res.Outcome == retrystate.OutcomeDone:
		log.Error("step asked for an invalid goto (recorded by an earlier try whose reply was lost)", "status", res.RunStatus)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, failedOutcome(CodeInvalidGoto), elapsed)
		return nil
	case res.Outcome == retrystate.OutcomeRunFailed:
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, failedOutcome(res.Code), elapsed)
		e.runFailed(ctx, log, p.RunID, p.Workflow, res, "step asked for an invalid goto")
		return nil
	}
	e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, OutcomeGoto, elapsed)
	log.Info("goto", "goto", target, "next_attempt", res.Dispatch.Attempt, AttrDuration, elapsed)
	if res.Enqueued {
		return nil
	}
	next := *res.Dispatch
	if err := e.persist(ctx, log, "enqueue goto target", func(ctx context.Context) error {
		return e.disp.enqueue(ctx, p.RunID, p.Workflow, next)
	}); err != nil {
		log.Error("could not enqueue the goto's target step", AttrError, err)
		return err
	}
	return nil
}
