package workflowtest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cairnhq/cairn/workflow"
)

// injKey names the attempts an injected body replaces: workflow "" for
// every workflow with the step, attempt 0 for every attempt.
type injKey struct {
	workflow, step string
	attempt        int
}

// FailStep makes attempt number attempt (from 1) of a step fail with err,
// instead of running the step's body: workflow.Transient(err) for a failure
// that is retried, workflow.Permanent(err) for one that fails the run at
// once, a plain error for one classified by the step's policy (see
// workflow.Classify), workflow.RetryAfter, workflow.Snooze and workflow.Goto
// as a body would return them.
//
// step is a step's name, "compensate:<step>" for its compensation, and
// either may be qualified by its workflow ("order/charge") when several
// registered workflows have the step. It panics when no registered workflow
// has a body (or compensation) by that name, when attempt is less than 1,
// or when err is nil (OnAttempt makes an attempt succeed).
//
// An injection applies each time the attempt runs: after a crash or a
// snooze, a step runs the same attempt again.
func (e *Env) FailStep(step string, attempt int, err error) {
	if err == nil {
		panic("workflowtest: FailStep with a nil error (use OnAttempt to make an attempt succeed)")
	}
	e.OnAttempt(step, attempt, func(context.Context, *workflow.StepContext) (any, error) { return nil, err })
}

// OnAttempt runs fn instead of the body of attempt number attempt (from 1)
// of a step: what fn returns is what the attempt returns. step is named as
// for FailStep. It panics when no registered workflow has the step or when
// attempt is less than 1. A later injection for the same attempt replaces
// this one.
func (e *Env) OnAttempt(step string, attempt int, fn workflow.StepFunc) {
	if attempt < 1 {
		panic(fmt.Sprintf("workflowtest: attempt %d of step %q: attempts count from 1", attempt, step))
	}
	e.inject(step, attempt, fn)
}

// OnStep runs fn instead of the body of a step at every attempt that has no
// injection of its own (OnAttempt, FailStep): a stub for a step that calls
// a real service. step is named as for FailStep. It panics when no
// registered workflow has the step.
func (e *Env) OnStep(step string, fn workflow.StepFunc) {
	e.inject(step, 0, fn)
}

// ClearInjections removes every injected body: the steps run their own
// again.
func (e *Env) ClearInjections() {
	e.injMu.Lock()
	defer e.injMu.Unlock()
	clear(e.inj)
}

func (e *Env) inject(step string, attempt int, fn workflow.StepFunc) {
	if fn == nil {
		panic(fmt.Sprintf("workflowtest: nil step function for step %q", step))
	}
	wf, name, qualified := strings.Cut(step, "/")
	if !qualified {
		wf, name = "", step
	}
	e.injMu.Lock()
	defer e.injMu.Unlock()
	found := false
	for w, names := range e.steps {
		if (wf == "" || wf == w) && names[name] {
			found = true
			break
		}
	}
	if !found {
		panic(fmt.Sprintf("workflowtest: no registered workflow has a step body named %q (an await or a sleep has none; a compensation is \"%s<step>\")",
			step, workflow.CompensationPrefix))
	}
	e.inj[injKey{workflow: wf, step: name, attempt: attempt}] = fn
}

// injected returns the body injected for an attempt, or nil: the most
// specific injection wins (this attempt before every attempt, the qualified
// name before the bare one).
func (e *Env) injected(sc *workflow.StepContext) workflow.StepFunc {
	e.injMu.Lock()
	defer e.injMu.Unlock()
	for _, k := range []injKey{
		{sc.Workflow, sc.Step, sc.Attempt}, {"", sc.Step, sc.Attempt},
		{sc.Workflow, sc.Step, 0}, {"", sc.Step, 0},
	} {
		if fn := e.inj[k]; fn != nil {
			return fn
		}
	}
	return nil
}

// wrapDefinition returns d with each step body and compensation wrapped by
// wrap.
func (e *Env) wrapDefinition(d workflow.Definition) workflow.Definition {
	steps := make([]workflow.Step, len(d.Steps))
	for i, s := range d.Steps {
		if s.Run != nil {
			s.Run = e.wrap(s.Run)
		}
		if s.Compensate != nil {
			s.Compensate = e.wrap(s.Compensate)
		}
		steps[i] = s
	}
	d.Steps = steps
	return d
}

// wrap returns a body that runs the injected body of the attempt if there is
// one, else fn, under a context whose deadline is on the wall clock.
func (e *Env) wrap(fn workflow.StepFunc) workflow.StepFunc {
	return func(ctx context.Context, sc *workflow.StepContext) (any, error) {
		ctx, cancel := e.stepContext(ctx)
		defer cancel()
		if inj := e.injected(sc); inj != nil {
			return inj(ctx, sc)
		}
		return fn(ctx, sc)
	}
}

// stepContext returns the context a step body runs under. The engine's
// context for the body has a deadline (the step timeout, the run's
// deadline) computed on the fake clock, which the context package counts on
// the wall clock, where it may have passed long ago. The body gets the same
// values and cancellation, but the deadline as the time left by the fake
// clock, counted on the wall clock from now.
func (e *Env) stepContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	stop := context.AfterFunc(parent, func() {
		if cause := context.Cause(parent); !errors.Is(cause, context.DeadlineExceeded) {
			cancel(cause)
		}
	})
	cancelTimeout := context.CancelFunc(func() {})
	if d, ok := parent.Deadline(); ok {
		ctx, cancelTimeout = context.WithTimeout(ctx, d.Sub(e.clock.Now()))
	}
	return ctx, func() {
		stop()
		cancelTimeout()
		cancel(nil)
	}
}
