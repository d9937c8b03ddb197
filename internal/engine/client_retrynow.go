package engine

import (
	"context"
	"fmt"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
)

// ActionRetryNow is the action of RetryNow, as recorded in the journal
// (retry_now) and, for an admin's action on another subject's run, in the
// audit stream.
const ActionRetryNow = retrystate.ActionRetryNow

// RetryNow makes the scheduled retry of step, which a running run waits
// out a backoff for, due now: the attempt begins as soon as a worker takes
// its task, with the attempt number and budget it had. Its one task is
// moved to the queue's pending list (and the run's due time updated) in
// one script, so no second attempt is made; the journal records
// retry_now with opts.Actor and the due time the retry had. It is
// RetryStep's counterpart for a run that has not failed: RetryStep starts
// a failed step again with a fresh budget.
//
// It returns the run as it left it, and ErrActionRefused, saying why, when
// step is not the run's current step or that step does not wait out a
// retry's backoff (it runs, it is due already, it snoozes or waits for a
// circuit breaker, the run ended): nothing is written then.
func (c *Client) RetryNow(ctx context.Context, id, step string, opts *ActionOptions) (*core.Run, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if step == "" {
		return nil, fmt.Errorf("%w: no step named", core.ErrActionRefused)
	}
	who := actor(opts)
	res, err := c.store.RetryNow(ctx, retrystate.RetryNowParams{RunID: id, Step: step, Actor: who,
		Now: c.cfg.Clock.Now()})
	if err != nil {
		return nil, mapStoreError(id, err)
	}
	log := c.log.With(core.AttrRunID, id, core.AttrActor, who, "action", ActionRetryNow, core.AttrStep, res.Name,
		core.AttrAttempt, res.Attempt)
	if res.TaskState == "" {
		log.Warn("operator action applied; the retry's task was missing, the reconciler writes it",
			"was_due", res.DueAt)
	} else {
		log.Info("operator action applied", "was_due", res.DueAt, "task_state", res.TaskState)
	}
	return c.Get(ctx, id)
}
