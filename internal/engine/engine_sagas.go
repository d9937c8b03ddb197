package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
)

// This file is the engine's part of compensations and step groups (sagas;
// the state machine is in retrystate/lua/lib/fail_run.lua): what it says
// and counts when a run's failure starts compensations, and how a
// compensation's attempt runs.

// runFailed logs a run's failure (f, of an OutcomeRunFailed) and what follows it,
// and tells the observer of the run's end when it ended. what says what
// failed ("step failed", "run failed"), attrs are the line's other
// attributes.
func (e *Engine) runFailed(ctx context.Context, log core.Logger, runID, workflow string, f retrystate.RunFailure, what string, attrs ...any) {
	attrs = append(attrs, core.AttrCode, f.Code, core.AttrReason, f.Reason)
	switch f.Then {
	case retrystate.ThenFailed:
		log.Error(what+"; run failed", attrs...)
	case retrystate.ThenCompensating:
		log.Warn(what+"; the run's compensations run", attrs...)
	case retrystate.ThenCompensated:
		log.Warn(what+"; run compensated (nothing to undo)", attrs...)
	case retrystate.ThenContinued:
		log.Warn(what+"; its optional group was rolled back and the run goes on", attrs...)
	case retrystate.ThenSucceeded:
		log.Warn(what+"; its optional group was rolled back, and the run succeeded", attrs...)
	}
	if st, ended := core.FinalStatus(f.Then); ended {
		code := f.Code
		if st == core.StatusSucceeded {
			code = ""
		}
		e.cfg.Observer.RunFinished(ctx, runID, workflow, st, code)
	}
}

// compensationOf returns what a compensation's attempt undoes, for its
// StepContext.
func compensationOf(c *retrystate.CompensationOf) *core.Compensation {
	if c == nil {
		return nil
	}
	out := &core.Compensation{Step: c.Step, FailureCode: c.FailureCode, FailureReason: c.FailureReason}
	if c.Output != "" {
		out.Output = json.RawMessage(c.Output)
	}
	return out
}

// compensationGoto is the error a compensation's Goto becomes: a
// compensation runs once per saga and cannot loop the run.
func compensationGoto(target string) error {
	return core.WithCode(core.Permanent(fmt.Errorf("a compensation cannot go to step %q (Goto)", target)), core.CodeInvalidGoto)
}
