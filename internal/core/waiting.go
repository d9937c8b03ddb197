package core

import (
	"time"

	"github.com/cairnhq/cairn/retrystate"
)

// WaitReason is what a run or step waits for while it holds no worker slot.
type WaitReason = retrystate.WaitReason

// Wait reasons.
const (
	WaitOrderingKey   = retrystate.WaitOrderingKey
	WaitWorkflowLimit = retrystate.WaitWorkflowLimit
	WaitSignal        = retrystate.WaitSignal
	WaitTimer         = retrystate.WaitTimer
)

// WaitingFor says what a waiting run or step waits for. Its JSON form is the
// waiting_for object of `enqueue status --json` and the HTTP API: for a run
// in an ordering key's line {"ordering_key": K, "position": N, "held_by":
// [run IDs]} ("shared": true in the key's shared line), for one
// waiting under its workflow's max_running {"workflow_limit": N,
// "position": M}, for a step awaiting a signal {"signal": name, "until":
// RFC 3339}, for a sleeping step {"timer": true, "until": RFC 3339}.
// Position counts from 1 (the next run to be admitted).
type WaitingFor struct {
	OrderingKey string `json:"ordering_key,omitempty"`
	// Shared: the run waits in the shared line of OrderingKey
	// (StartOptions.SharedOrdering), not in its owner's.
	Shared bool `json:"shared,omitempty"`
	// HeldBy, for a run in an ordering key's line, are the runs that hold
	// the line's slots now (at most 10, oldest first), the runs it waits
	// for: one that failed and blocks the key (Ordering.OnFailure) is
	// recovered, skipped through or cancelled to let the line go on. In an
	// owner's line they are the owner's own runs. Get fills it; the run
	// Start returns does not have it.
	HeldBy        []string   `json:"held_by,omitempty"`
	WorkflowLimit int        `json:"workflow_limit,omitempty"`
	Position      int        `json:"position,omitempty"`
	Signal        string     `json:"signal,omitempty"`
	Timer         bool       `json:"timer,omitempty"`
	Until         *time.Time `json:"until,omitempty"`
}

// Reason returns what w waits for.
func (w *WaitingFor) Reason() WaitReason {
	switch {
	case w == nil:
		return ""
	case w.OrderingKey != "":
		return WaitOrderingKey
	case w.WorkflowLimit > 0:
		return WaitWorkflowLimit
	case w.Signal != "":
		return WaitSignal
	case w.Timer:
		return WaitTimer
	}
	return ""
}
