package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// waitBody is what the engine registers as the body of an await or a sleep
// step, so that it has a handler: begin answers "wait" or "wake" for such a
// step, never "ok", and the body never runs.
func waitBody(context.Context, *core.StepContext) (any, error) {
	return nil, core.Permanent(errors.New("an await or sleep step has no body"))
}

// wait handles a delivery of an await or a sleep step: its first delivery
// (OutcomeWait: start waiting, or finish at once) or its wake-up
// (OutcomeWake: a sleep ends, an await times out), through wait.lua. The
// step holds no worker slot while it waits: this delivery ends at once.
func (e *Engine) wait(ctx context.Context, log core.LineLogger, p tasks.Step, taskID string, b retrystate.BeginResult) (err error) {
	var res retrystate.WaitResult
	args := retrystate.WaitParams{RunID: p.RunID, Index: p.Index, TaskID: taskID, Action: retrystate.WaitWake,
		Retention: e.cfg.Retention}
	if b.Outcome == retrystate.OutcomeWait {
		args.Action = retrystate.WaitStart
		// The script writes the wake-up's task, the next dispatch of this
		// attempt, with the state change.
		wake := tasks.Step{RunID: p.RunID, Workflow: p.Workflow, Index: p.Index, Name: p.Name, Attempt: p.Attempt,
			Gen: p.Gen + 1}
		args.WakeTaskID, args.WakeMessage = wake.ID(), wake.AsynqMessage(e.cfg.Queue, e.stepTimeout(p.Workflow, p.Index))
		if b.StepKind == retrystate.KindSleepUntil {
			until := e.sleepUntil(p.Workflow, p.Name)
			if until == nil {
				log.Error("this worker cannot compute the end of the sleep (it has no Sleep.Until for the step); asynq will deliver the task again")
				return &redeliverError{after: 30 * time.Second, why: "no Sleep.Until registered for " + p.Workflow + "/" + p.Name}
			}
			t, err := e.evalUntil(ctx, p, until)
			if err != nil {
				if !core.IsPermanent(err) {
					return err // reading the run failed: deliver again
				}
				args.UntilError = core.Truncate(err.Error(), 4096)
			} else {
				args.Until = t
			}
		}
	}
	if e.tracing != nil {
		var span trace.Span
		wake := args.Action == retrystate.WaitWake
		ctx, span = e.tracing.startWait(ctx, b.Trace, p, b.StepKind, wake)
		defer span.End()
		defer func() { waitEvent(span, b.StepKind, wake, res) }()
	}
	err = e.persist(ctx, log, "wait", func(ctx context.Context) (err error) {
		args.Now = e.cfg.Clock.Now()
		res, err = e.store.Wait(ctx, args)
		return err
	})
	if err != nil {
		log.Error("could not record the step's wait; asynq will deliver the task again", core.AttrError, err)
		return err
	}
	if args.Action == retrystate.WaitStart && p.Index == 0 && p.Attempt == 1 && res.Outcome != retrystate.OutcomeNoop {
		e.cfg.Observer.RunStarted(ctx, p.RunID, p.Workflow)
	}
	switch res.Outcome {
	case retrystate.OutcomeWaiting:
		if res.WaitReason == core.WaitSignal {
			log.Info("step waits for its signal", "until", res.Dispatch.DueAt)
		} else {
			log.Info("step sleeps", "until", res.Dispatch.DueAt)
		}
		if res.Enqueued {
			e.disp.scheduled(res.Dispatch)
			return nil
		}
		d := *res.Dispatch
		return e.persist(ctx, log, "enqueue the wake-up", func(ctx context.Context) error {
			return e.disp.Enqueue(ctx, p.RunID, p.Workflow, d)
		})
	case retrystate.OutcomeNext:
		log.Info("step done waiting", "next_step", res.Dispatch.Name)
		d := *res.Dispatch
		if err := e.persist(ctx, log, "enqueue next step", func(ctx context.Context) error {
			return e.disp.Enqueue(ctx, p.RunID, p.Workflow, d)
		}); err != nil {
			// The state names the next task; a redelivery of this one
			// (stale by now) or the reconciler creates it.
			log.Error("could not enqueue the next step", core.AttrError, err, "next_step", d.Name)
			return err
		}
		return nil
	case retrystate.OutcomeRunSucceeded:
		log.Info("step done waiting; run succeeded")
		e.cfg.Observer.RunFinished(ctx, p.RunID, p.Workflow, core.StatusSucceeded, "")
		return nil
	case retrystate.OutcomeRunFailed:
		e.runFailed(ctx, log, p.RunID, p.Workflow, res.RunFailure, "step failed")
		return nil
	case retrystate.OutcomeEarly:
		return &redeliverError{after: res.Wait, why: "wake-up not due"}
	default:
		// OutcomeNoop: another delivery or a repair moved the state on.
		log.Info("acknowledged a stale delivery of a waiting step", core.AttrReason, res.Reason)
		e.cfg.Observer.StepAttempt(ctx, p.RunID, p.Workflow, p.Name, core.OutcomeIgnored, 0)
		return nil
	}
}

// stepTimeout returns the step timeout of step index of a registered
// workflow (0 when unknown: asynq's default then applies to its task).
func (e *Engine) stepTimeout(workflow string, index int) time.Duration {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if r := e.defs[workflow]; r != nil && index < len(r.snap.Steps) {
		return r.snap.Steps[index].Policy.StepTimeout
	}
	return 0
}

// sleepUntil returns the Sleep.Until of a registered step, or nil.
func (e *Engine) sleepUntil(workflow, step string) func(*core.StepContext) (time.Time, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	r := e.defs[workflow]
	if r == nil {
		return nil
	}
	for _, s := range r.def.Steps {
		if s.Name == step && s.Sleep != nil {
			return s.Sleep.Until
		}
	}
	return nil
}

// evalUntil computes the end of a KindSleepUntil step from the run's input
// and earlier outputs. An error of the function (or a panic) is permanent;
// an error reading the run is returned as is.
func (e *Engine) evalUntil(ctx context.Context, p tasks.Step, until func(*core.StepContext) (time.Time, error)) (t time.Time, err error) {
	rec, err := e.store.Run(ctx, p.RunID)
	if err != nil {
		return time.Time{}, err
	}
	sc := &core.StepContext{RunID: p.RunID, Workflow: p.Workflow, Step: p.Name, Index: p.Index, Attempt: p.Attempt,
		IdempotencyKey: core.IdempotencyKey(p.RunID, p.Name, p.Attempt), Input: json.RawMessage(rec.Input)}
	outputs := make(map[string]json.RawMessage, p.Index)
	for i, s := range rec.Steps {
		if i < p.Index && s.Output != "" {
			outputs[s.Name] = json.RawMessage(s.Output)
		}
	}
	core.SetStepRuntime(sc, core.LineLogger{}, outputs)
	defer func() {
		if r := recover(); r != nil {
			err = core.Permanent(fmt.Errorf("Sleep.Until panicked: %v", r))
		}
	}()
	t, err = until(sc)
	switch {
	case err != nil:
		return time.Time{}, core.Permanent(err)
	case t.IsZero():
		return time.Time{}, core.Permanent(errors.New("Sleep.Until returned the zero time"))
	}
	return t, nil
}
