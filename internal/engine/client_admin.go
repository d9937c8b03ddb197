package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
)

// This file holds the Client's administrative API: restore, the audit
// stream, the runs needing attention and the blocking read of the
// notification stream that live views (the HTTP API's event stream) use.

// ActionRestore is the action of Restore, as recorded in the journal
// (run_recovered, action "restore") and in the audit stream.
const ActionRestore = retrystate.ActionRestore

// Restore reopens a finished run (succeeded, failed or cancelled) from the
// checkpoint before step fromStep: the steps before it keep their outputs
// (each must have succeeded or been skipped), fromStep and every later step
// are reset to pending with a fresh retry and crash budget, and the run
// becomes running with fromStep dispatched, as Recover does. A passed
// deadline and the iteration count start afresh. It is an administrator's
// action: besides the run's journal it is recorded in the audit stream (see
// Audit), with opts.Actor.
//
// It returns the run as the restore left it, read before fromStep's task is
// enqueued (a worker may have moved it on since), and ErrActionRefused,
// saying why, for a pending or running run, an unknown step, or a step with
// an earlier step that did not complete; a repeated restore is refused
// because the run is running again.
func (c *Client) Restore(ctx context.Context, id, fromStep string, opts *ActionOptions) (*core.Run, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if fromStep == "" {
		return nil, fmt.Errorf("%w: no step named", core.ErrActionRefused)
	}
	who := actor(opts)
	res, err := c.store.Restore(ctx, retrystate.RestoreParams{RunID: id, FromStep: fromStep, Actor: who,
		Now: c.cfg.Clock.Now()})
	if err != nil {
		return nil, mapStoreError(id, err)
	}
	return c.applied(ctx, id, ActionRestore, who, retrystate.OperateResult(res))
}

// AuditEntry is an entry of the queue's audit stream: an administrator's
// action.
type AuditEntry struct {
	// ID is the entry's stream ID (set by Redis; ignored by RecordAudit).
	ID string `json:"id"`
	// At is when it happened (RecordAudit: the client's clock).
	At time.Time `json:"at"`
	// Actor is who acted.
	Actor string `json:"actor"`
	// Action is what they did: recover, retry, skip, cancel, restore, ...
	Action   string `json:"action"`
	RunID    string `json:"run_id,omitempty"`
	Workflow string `json:"workflow,omitempty"`
	// Owner is the owner of the run acted on.
	Owner  string `json:"owner,omitempty"`
	Step   string `json:"step,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// RecordAudit appends an entry to the audit stream, which keeps about the
// last 10,000 entries, and returns it with its ID and time. Restore records
// itself; callers record the other actions they deem administrative.
func (c *Client) RecordAudit(ctx context.Context, e AuditEntry) (AuditEntry, error) {
	if e.Actor == "" || e.Action == "" {
		return AuditEntry{}, errors.New("workflow: an audit entry needs an actor and an action")
	}
	e.At = c.cfg.Clock.Now().UTC()
	id, err := c.store.AppendAudit(ctx, retrystate.AuditEntry{At: e.At, Actor: e.Actor, Action: e.Action,
		RunID: e.RunID, Workflow: e.Workflow, Owner: e.Owner, Step: e.Step, Detail: e.Detail})
	if err != nil {
		return AuditEntry{}, fmt.Errorf("record audit entry: %w", err)
	}
	e.ID = id
	return e, nil
}

// Audit returns up to limit (default 100) audit entries after the one with
// ID after ("" for the oldest retained), oldest first. Pass the last ID
// returned to read on.
func (c *Client) Audit(ctx context.Context, after string, limit int) ([]AuditEntry, error) {
	if limit <= 0 {
		limit = 100
	}
	es, err := c.store.Audit(ctx, after, int64(limit))
	if err != nil {
		return nil, err
	}
	out := make([]AuditEntry, len(es))
	for i, e := range es {
		out[i] = AuditEntry{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Action: e.Action, RunID: e.RunID,
			Workflow: e.Workflow, Owner: e.Owner, Step: e.Step, Detail: e.Detail}
	}
	return out, nil
}

// NeedingAttention returns a page of the runs that need an operator (failed
// runs, and runs repaired automatically too often), the most recent first,
// without their steps; each says why in FailureReason or AttentionReason.
// limit defaults to 50, at most 1000; pass the returned cursor to read on
// ("" after the last page).
func (c *Client) NeedingAttention(ctx context.Context, cursor string, limit int) ([]*core.Run, string, error) {
	recs, next, err := c.store.AttentionRuns(ctx, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]*core.Run, len(recs))
	for i, rec := range recs {
		out[i] = core.RunFromRecord(rec)
	}
	return out, next, nil
}

// WatchNotifications returns up to 100 notifications after the one with ID
// after, waiting up to block for the first to arrive when there is none yet
// (block <= 0: return at once). With after "" it starts after the newest
// notification at the time of the call, so WatchNotifications(ctx, "", 0)
// returns just a starting point. It returns the ID to pass as after next
// time.
//
// A waiting call holds one Redis connection for up to block: a process
// serving many watchers should have one goroutine wait and wake the others
// (as package dashboard does), rather than one waiting call per watcher.
func (c *Client) WatchNotifications(ctx context.Context, after string, block time.Duration) ([]Notification, string, error) {
	ns, next, err := c.store.WaitNotifications(ctx, after, 100, block)
	if err != nil {
		return nil, next, err
	}
	out := make([]Notification, len(ns))
	for i, n := range ns {
		out[i] = notificationFrom(n)
	}
	return out, next, nil
}

// notificationFrom converts a stored notification. The owner of the run
// moves from the fields to Owner; a due time (Unix ms) is shown as RFC 3339,
// as in the journal.
func notificationFrom(n retrystate.Notification) Notification {
	out := Notification{ID: n.ID, Type: n.Type, At: n.At.UTC(), RunID: n.RunID, Workflow: n.Workflow}
	if len(n.Fields) > 0 {
		out.Details = make(map[string]string, len(n.Fields))
		for k, v := range n.Fields {
			switch k {
			case "owner":
				out.Owner = v
				continue
			case "due_at":
				if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
					v = time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
				}
			}
			out.Details[k] = v
		}
		if len(out.Details) == 0 {
			out.Details = nil
		}
	}
	return out
}
