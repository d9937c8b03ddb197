package engine

import (
	"context"
	"slices"
	"time"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// Inline continuation (Definition.Inline): when a step of an inline workflow
// succeeds and its next step is due at once and registered on this worker,
// the complete script begins the next step itself, under a new fence token,
// writing no asynq task for it, and this delivery runs it (complete.lua,
// inline_token). Everything a begin guards stays guarded: the script falls back
// to writing the next step's task when the step is an await or a sleep, is
// behind a circuit breaker, or would be refused by a begin (deadline,
// iteration ceiling); a cancel or a lost fence is seen by the next complete
// or the heartbeat, as for any step; a worker killed during an inline step
// leaves a running step with a fence nobody renews, which the sweep
// re-dispatches as a normal task (a crash). A chain yields back to the queue
// after MaxInlineSteps steps or MaxInlineTime, whichever comes first, and
// never starts a step that could outlive the asynq task that carries it.

const (
	// MaxInlineSteps bounds the steps one delivery runs inline, so that a
	// long run does not hold a worker slot while other runs wait.
	MaxInlineSteps = 50
	// MaxInlineTime bounds how long one delivery goes on with inline steps:
	// after it, the next step gets its own task, behind the queue.
	MaxInlineTime = 5 * time.Second
	// inlineMargin is the time an inline step must leave, after its own
	// step timeout, before the deadline of the asynq task that carries it:
	// for its checkpoint.
	inlineMargin = 30 * time.Second
)

// inlineChain is what one delivery has run inline so far.
type inlineChain struct {
	since time.Time // the delivery's first step began
	steps int       // steps run inline after the first
}

// inlineStep is a step the complete script began for this delivery to run.
type inlineStep struct {
	log     core.LineLogger
	p       tasks.Step
	token   string
	fn      core.StepFunc
	started *retrystate.Started
	begunAt time.Time
}

// inline tells whether the delivery of step p may go on with its next step,
// next, inline.
func (e *Engine) inline(ctx context.Context, p tasks.Step, next *retrystate.Dispatch, chain *inlineChain) bool {
	if chain == nil || chain.steps >= MaxInlineSteps || ctx.Err() != nil ||
		retrystate.IsCompensation(next.Index) {
		return false
	}
	e.mu.RLock()
	r := e.defs[p.Workflow]
	e.mu.RUnlock()
	if r == nil || !r.def.Inline || e.stepFunc(p.Workflow, next.Name) == nil {
		return false
	}
	now := e.cfg.Clock.Now()
	if now.Sub(chain.since) >= MaxInlineTime {
		return false
	}
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d) //nolint:forbidigo // asynq's deadline is on the wall clock, not on ours
		if next.Timeout <= 0 || left < next.Timeout+inlineMargin {
			return false
		}
	}
	return true
}

// inlineStep makes the step a complete began inline (res: OutcomeInline)
// ready to run: the attempt the script began, the run's input and the
// outputs up to the step just completed (b, output).
func (e *Engine) inlineStep(p tasks.Step, args retrystate.CompleteParams, b *retrystate.Started, output string,
	res retrystate.CompleteResult) *inlineStep {
	d := res.Dispatch
	st := res.Started
	st.Input = b.Input
	st.Earlier = append(slices.Clip(b.Earlier), retrystate.Checkpoint{Name: p.Name, Output: output})
	return e.newInlineStep(p, d.Index, d.Name, d.Attempt, args.InlineToken, st, args.Now)
}

// inlineAgain follows a complete that asked to continue inline and was
// answered "done": an earlier try of it went through, its reply lost, and
// may have begun the next step under the inline token. A begin with that
// token answers ok for an attempt it holds (begin.lua), renewing its fence;
// anything else means the script wrote the next step's task, which its own
// delivery runs.
func (e *Engine) inlineAgain(ctx context.Context, log core.Logger, p tasks.Step, args retrystate.CompleteParams,
	b *retrystate.Started) *inlineStep {
	next := b.Next
	var bg retrystate.BeginResult
	var begunAt time.Time
	err := e.retry(ctx, log, "begin inline", func(ctx context.Context) (err error) {
		begunAt = e.cfg.Clock.Now()
		bg, err = e.store.Begin(ctx, retrystate.BeginParams{RunID: p.RunID, Index: next.Index,
			TaskID: tasks.ID(p.RunID, next.Index, next.Attempt, 0), Token: args.InlineToken,
			FenceTTL: e.cfg.FenceTTL, Retention: e.cfg.Retention, Now: begunAt, Trace: e.tracing != nil})
		return err
	})
	if err != nil || bg.Outcome != retrystate.OutcomeOK {
		return nil
	}
	return e.newInlineStep(p, next.Index, next.Name, bg.Started.Attempt, args.InlineToken, bg.Started, begunAt)
}

func (e *Engine) newInlineStep(p tasks.Step, index int, name string, attempt int, token string,
	st *retrystate.Started, begunAt time.Time) *inlineStep {
	np := tasks.Step{RunID: p.RunID, Workflow: p.Workflow, Index: index, Name: name, Attempt: attempt}
	return &inlineStep{
		log: core.LineLogger{L: e.log, Attrs: []any{core.AttrRunID, np.RunID, core.AttrWorkflow, np.Workflow, core.AttrStep, np.Name,
			core.AttrAttempt, np.Attempt, core.AttrTaskID, np.ID(), "inline", true}},
		p: np, token: token, fn: e.stepFunc(p.Workflow, name), started: st, begunAt: begunAt,
	}
}
