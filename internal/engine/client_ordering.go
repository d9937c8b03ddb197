package engine

import (
	"context"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
)

// KeyLine names a line of an ordering key: Key in the line of Owner's runs,
// or in the key's shared line when Shared or when Owner is ""
// (StartOptions.SharedOrdering).
type KeyLine struct {
	Key    string
	Owner  string
	Shared bool
}

// shared reports whether l is a key's shared line.
func (l KeyLine) shared() bool { return l.Shared || l.Owner == "" }

// KeyRuns is the line of an ordering key: its active runs (admitted, oldest
// first; a failed run that blocks the key is one of them) and its waiting
// runs in the order they will start.
type KeyRuns struct {
	Key string `json:"ordering_key"`
	// Owner is the owner whose line this is; "" with Shared for a key's
	// shared line.
	Owner   string      `json:"owner,omitempty"`
	Shared  bool        `json:"shared"`
	Active  []*core.Run `json:"active"`
	Waiting []*core.Run `json:"waiting"`
	// WaitingTotal counts the whole line, which Waiting may cut short.
	WaitingTotal int64 `json:"waiting_total"`
}

// OrderingKey returns the line of an ordering key: at most limit waiting
// runs (default and maximum 1000). Runs are read without their steps.
func (c *Client) OrderingKey(ctx context.Context, line KeyLine, limit int) (*KeyRuns, error) {
	if err := core.CheckOrderingKey(line.Key); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	shared := line.shared()
	owner := line.Owner
	if shared {
		owner = ""
	}
	gate, err := c.store.Gate(ctx, retrystate.KeyGate(retrystate.StoredOrderingKey(owner, line.Key, shared)), limit)
	if err != nil {
		return nil, err
	}
	out := &KeyRuns{Key: line.Key, Owner: owner, Shared: shared, Active: []*core.Run{}, Waiting: []*core.Run{},
		WaitingTotal: gate.WaitingTotal}
	heads := func(ids []string, into *[]*core.Run, positions bool) error {
		recs, err := c.store.RunHeads(ctx, ids)
		if err != nil {
			return err
		}
		pos := make(map[string]int, len(ids))
		for i, id := range ids {
			pos[id] = i + 1
		}
		for _, rec := range recs {
			r := core.RunFromRecord(rec)
			if positions {
				r.WaitingFor = &core.WaitingFor{OrderingKey: line.Key, Shared: shared, Position: pos[rec.ID]}
			}
			*into = append(*into, r)
		}
		return nil
	}
	if err := heads(gate.Admitted, &out.Active, false); err != nil {
		return nil, err
	}
	if err := heads(gate.Waiting, &out.Waiting, true); err != nil {
		return nil, err
	}
	return out, nil
}
