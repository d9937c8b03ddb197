package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
)

// Signal sends the signal name with payload to a run. payload is any value
// that marshals to JSON; a json.RawMessage or []byte must hold valid JSON
// (empty: null) that CheckJSON accepts; at most MaxSignalPayload bytes. When the run's current step
// awaits the signal and waits, the step succeeds with the payload as its
// output and the run goes on; when the current or a later step awaits it,
// it is kept until the run reaches that step.
//
// It returns ErrInvalidRunID, or ErrInvalidInput for a bad name, payload or
// ID; ErrRunNotFound for an unknown run; ErrRunFinished for a run that has
// ended; ErrActionRefused when no step of the run awaits the signal from
// its current step on; ErrMailboxFull when the run keeps MaxPendingSignals
// signals already. In each of these cases nothing is written.
//
// With an outbox (ClientConfig.Outbox), a signal without an ID gets one
// ("ob_" and 24 hex digits) before it is sent, and a signal that cannot
// reach Redis, or that comes while earlier entries are queued, is queued:
// SignalOutbox, or ErrOutboxFull.
func (c *Client) Signal(ctx context.Context, runID, name string, payload any, opts *core.SignalOptions) (*core.SignalResult, error) {
	if opts == nil {
		opts = &core.SignalOptions{}
	}
	if err := checkID(runID); err != nil {
		return nil, err
	}
	if !core.StepNameRE.MatchString(name) {
		return nil, fmt.Errorf("%w: signal name %q must be 1-64 letters, digits, '.' or '_'", core.ErrInvalidInput, name)
	}
	if len(opts.ID) > core.MaxSignalID {
		return nil, fmt.Errorf("%w: signal ID longer than %d bytes", core.ErrInvalidInput, core.MaxSignalID)
	}
	raw, err := encodeSignalPayload(payload)
	if err != nil {
		return nil, err
	}
	id, who := opts.ID, opts.Actor
	if who == "" {
		who = "client"
	}
	if c.ob != nil && id == "" {
		// A signal whose reply is lost and that is then queued must not be
		// applied twice.
		id = newSignalID()
	}
	if c.ob != nil && c.ob.backlog() {
		return c.queueSignal(runID, name, raw, id, who, nil)
	}
	out, err := c.signal(ctx, runID, name, raw, id, who)
	if out == nil && err != nil && c.shouldQueue(ctx, err) {
		return c.queueSignal(runID, name, raw, id, who, err)
	}
	c.tracing.signalReceived(ctx, func(ctx context.Context) (string, string, error) {
		return c.store.RunTrace(ctx, runID)
	}, runID, name, out, err)
	return out, err
}

// signal sends a checked signal (Signal, and the outbox's flush of a queued
// one). A non-nil result means the signal was applied, even with an error.
func (c *Client) signal(ctx context.Context, runID, name string, raw json.RawMessage, id, who string) (*core.SignalResult, error) {
	res, err := c.store.Signal(ctx, retrystate.SignalParams{RunID: runID, Name: name, Payload: string(raw), ID: id,
		Retention: c.cfg.Retention, Now: c.cfg.Clock.Now()})
	if err != nil {
		return nil, mapStoreError(runID, err)
	}
	log := c.log.With(core.AttrRunID, runID, "signal", name, core.AttrActor, who)
	switch res.Outcome {
	case retrystate.OutcomeDuplicate:
		log.Info("signal received before (same ID); nothing done")
		return &core.SignalResult{Outcome: core.SignalDuplicate}, nil
	case retrystate.OutcomeQueued:
		log.Info("signal kept for a later await", "pending", res.Pending)
		return &core.SignalResult{Outcome: core.SignalQueued, Pending: res.Pending}, nil
	default:
		// OutcomeDelivered or OutcomeRunSucceeded, below.
	}
	// OutcomeDelivered or OutcomeRunSucceeded: the await succeeded. Its
	// wake-up task is stale now (a delivery of it would be acknowledged).
	c.disp.Stop(log, res.Task, core.StepWaiting)
	out := &core.SignalResult{Outcome: core.SignalDelivered, Step: res.Step}
	if res.Outcome == retrystate.OutcomeRunSucceeded {
		log.Info("signal completed the run's last step; run succeeded", core.AttrStep, res.Step)
		out.RunSucceeded = true
		if wf, err := c.store.RunWorkflow(ctx, runID); err == nil {
			c.cfg.Observer.RunFinished(ctx, runID, wf, core.StatusSucceeded, "")
		}
		return out, nil
	}
	log.Info("signal completed the waiting step", core.AttrStep, res.Step, "next_step", res.Dispatch.Name)
	if err := c.disp.Enqueue(ctx, runID, res.Workflow, *res.Dispatch); err != nil {
		return out, fmt.Errorf("signal delivered to run %s, but its next step's task was not enqueued (the reconciler will enqueue it): %w",
			runID, err)
	}
	return out, nil
}

// encodeSignalPayload checks and compacts a signal's payload.
func encodeSignalPayload(payload any) (json.RawMessage, error) {
	var raw []byte
	switch v := payload.(type) {
	case nil:
		raw = nil
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%w: signal payload: %v", core.ErrInvalidInput, err) //nolint:errorlint // the sentinel is the error's identity; the cause is only its text
		}
		raw = b
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return json.RawMessage("null"), nil
	}
	if len(trimmed) > core.MaxSignalPayload {
		return nil, fmt.Errorf("%w: signal payload of %d bytes, more than the limit of %d", core.ErrInvalidInput, len(trimmed), core.MaxSignalPayload)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, trimmed); err != nil {
		return nil, fmt.Errorf("%w: signal payload is not valid JSON: %v", core.ErrInvalidInput, err) //nolint:errorlint // as above
	}
	if err := core.CheckJSON(raw); err != nil {
		return nil, fmt.Errorf("%w: signal payload: %w", core.ErrInvalidInput, err)
	}
	return compact.Bytes(), nil
}
