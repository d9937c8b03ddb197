package retrystate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Admission gates (lua/lib/gates.lua) hold back runs that would exceed a
// limit: an ordering key's concurrency (runs with the same key, in a queue,
// start in start order, at most that many at once) and a workflow's
// max_running. A gate is a line of waiting runs and the set of runs it
// admitted. A run passes its gates in one order (key, then workflow), and
// the scripts that free a slot (a run ends, fails, is cancelled) admit the
// next runs and write their tasks in the same execution.

// Gate kinds, the prefix of a gate's name.
const (
	gateKey      = "k:"
	gateWorkflow = "w:"
)

// KeyGate names the gate of an ordering key as stored in a run
// (StoredOrderingKey).
func KeyGate(stored string) string { return gateKey + stored }

// Ordering keys are scoped by owner, as idempotency keys are: the line of a
// key is that of its owner's runs with the key, so that no owner can delay,
// block or observe another's runs by naming the same key. The shared line
// of a key, which runs of every owner join, is for trusted callers (an admin
// of the API, a Go client that says so: StartOptions.SharedOrdering); a run
// without an owner is always in it.
//
// The scripts know a key only by the string a run stores in its ord_key
// field, and name its gate "k:" and that string: a shared key as it is, an
// owner's key behind orderingScopeMark, the owner's length and the owner.
// A key may not hold control characters (workflow.CheckOrderingKey), so no
// shared key can be mistaken for an owner's; the owner's length makes the
// name unambiguous whatever the owner holds. Lines of shared keys keep the
// names they had before keys were scoped, so runs started before then stay
// in their lines.
const orderingScopeMark = "\x1f"

// StoredOrderingKey returns what a run stores of its ordering key
// (its ord_key field; "" for none): key as it is for the shared line
// (shared, or no owner), else scoped by owner.
func StoredOrderingKey(owner, key string, shared bool) string {
	if key == "" || shared || owner == "" {
		return key
	}
	return orderingScopeMark + strconv.Itoa(len(owner)) + ":" + owner + ":" + key
}

// SplitOrderingKey parses a stored ordering key (StoredOrderingKey): the key
// and its owner, or shared for a key of the shared line (owner "").
func SplitOrderingKey(stored string) (key, owner string, shared bool) {
	rest, ok := strings.CutPrefix(stored, orderingScopeMark)
	if !ok {
		return stored, "", true
	}
	n, rest, ok := strings.Cut(rest, ":")
	l, err := strconv.Atoi(n)
	if !ok || err != nil || l < 0 || l >= len(rest) || rest[l] != ':' {
		return stored, "", true // not written by StoredOrderingKey: taken as it is
	}
	return rest[l+1:], rest[:l], false
}

// WorkflowGate names the gate of a workflow's max_running.
func WorkflowGate(workflow string) string { return gateWorkflow + workflow }

// maxHeldBy bounds Run.HeldBy.
const maxHeldBy = 10

// waitGate is the gate whose line the run waits in.
func (r *Run) waitGate() string {
	if r.Waiting == WaitWorkflowLimit {
		return WorkflowGate(r.Workflow)
	}
	return KeyGate(StoredOrderingKey(r.Owner, r.OrderingKey, r.OrderingShared))
}

// GateLine is the state of one gate: the runs it admitted (oldest first)
// and the runs waiting in its line (in the order they will be admitted).
type GateLine struct {
	Admitted []string
	Waiting  []string
	// WaitingTotal counts the whole line; Waiting holds at most the limit
	// asked for.
	WaitingTotal int64
}

// Gate reads gate g's admitted runs and the first limit runs of its line.
func (s *Store) Gate(ctx context.Context, g string, limit int) (GateLine, error) {
	if limit <= 0 {
		limit = 1000
	}
	pipe := s.rdb.Pipeline()
	adm := pipe.ZRange(ctx, s.keys.gateAdmitted(g), 0, -1)
	wait := pipe.ZRange(ctx, s.keys.gateWait(g), 0, int64(limit-1))
	total := pipe.ZCard(ctx, s.keys.gateWait(g))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return GateLine{}, fmt.Errorf("read gate: %w", err)
	}
	return GateLine{Admitted: adm.Val(), Waiting: wait.Val(), WaitingTotal: total.Val()}, nil
}

// GateRepair is what RepairGates did.
type GateRepair struct {
	Gates   int // gates examined
	Dropped int // admitted runs that held no slot any more (ended, gone)
	Started int // waiting runs admitted and started
}

// RepairGates repairs up to limit gates in use (idx:gates): each admitted
// run that no longer holds its slot is dropped, then waiting runs are
// admitted while the gate has free slots (gate.lua). The scripts keep gates
// right as they go; this repairs what they cannot, such as a run's hash
// deleted by hand.
func (s *Store) RepairGates(ctx context.Context, now time.Time, limit int) (GateRepair, error) {
	if limit <= 0 {
		limit = 1000
	}
	gates, err := s.rdb.ZRange(ctx, s.keys.gates(), 0, int64(limit-1)).Result()
	if err != nil {
		return GateRepair{}, fmt.Errorf("read gates: %w", err)
	}
	var rep GateRepair
	for _, g := range gates {
		res, err := s.run(ctx, s.scripts.gate, gateLua{Line: s.keys.gateWait(g), Prefix: s.keys.prefix, Now: ms(now),
			Gate: g})
		if err != nil {
			return rep, fmt.Errorf("repair gate: %w", err)
		}
		dropped, started, err := decodeGate(res)
		if err != nil {
			return rep, err
		}
		rep.Gates++
		rep.Dropped += dropped
		rep.Started += started
	}
	return rep, nil
}

// RunHeads reads runs by ID without their steps, in order, leaving out the
// runs that no longer exist.
func (s *Store) RunHeads(ctx context.Context, ids []string) ([]*Run, error) {
	es := make([]indexEntry, len(ids))
	for i, id := range ids {
		es[i] = indexEntry{ID: id}
	}
	runs, err := s.runHeads(ctx, es)
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	return runs, nil
}
