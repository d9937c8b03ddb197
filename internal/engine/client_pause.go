package engine

import (
	"context"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
)

// Pause pauses a pending or running run (or a compensating one): it begins
// no new attempt until Resume. An attempt in flight finishes and is
// checkpointed; the next dispatch of the run (its next step, a retry, a
// sleep's or an await's wake-up, a breaker's deferral) is parked when it is
// delivered, keeping its due time, and waits for the resume. The run's
// deadline still runs. Pausing a paused run changes nothing and returns it.
// It returns ErrRunFinished for a run that ended (nothing is written), and
// ErrInvalidRunID or ErrRunNotFound for a bad or unknown ID. The pause is
// journaled ("paused", with the actor) and notified (run_paused).
func (c *Client) Pause(ctx context.Context, id string, opts *ActionOptions) (*core.Run, error) {
	return c.pause(ctx, id, retrystate.ActionPause, opts)
}

// Resume resumes a paused run: a dispatch parked while it was paused is
// written again, due at its due time (now if that has passed), under a new
// task ID when asynq still holds the old one. Resuming a run that is not
// paused changes nothing and returns it. It returns ErrRunFinished for a
// run that ended. The resume is journaled ("resumed", with the actor and
// the task written) and notified (run_resumed).
func (c *Client) Resume(ctx context.Context, id string, opts *ActionOptions) (*core.Run, error) {
	return c.pause(ctx, id, retrystate.ActionResume, opts)
}

func (c *Client) pause(ctx context.Context, id, action string, opts *ActionOptions) (*core.Run, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	who := actor(opts)
	res, err := c.store.Pause(ctx, retrystate.PauseParams{RunID: id, Action: action, Actor: who, Now: c.cfg.Clock.Now()})
	if err != nil {
		return nil, mapStoreError(id, err)
	}
	log := c.log.With(core.AttrRunID, id, core.AttrActor, who, "action", action)
	switch {
	case res.Outcome == retrystate.OutcomeNoop:
		log.Info("nothing to do: the run is " + res.Reason)
	case res.TaskID != "":
		log.Info("run resumed; its parked dispatch written again", core.AttrTaskID, res.TaskID, "due_at", res.DueAt)
	case res.Outcome == retrystate.OutcomePaused:
		log.Info("run paused")
	default:
		log.Info("run resumed")
	}
	return c.Get(ctx, id)
}
