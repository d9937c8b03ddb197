package maintenance

import (
	"context"

	"github.com/cairnhq/cairn/internal/testsignal"
	"github.com/cairnhq/cairn/retrystate"
)

// Gates: ordering keys and max_running. The scripts keep gates right as
// they go; a gate whose admitted run is gone (its record deleted by hand,
// say) frees the slot and admits its next runs here (gate.lua, through
// Store.RepairGates). Part of every pass.

// gatesSignals tell a test of this package what a pass's gate repair did.
type gatesSignals struct {
	repaired testsignal.Signal[retrystate.GateRepair]
}

// repairGates repairs the gates in use (at most 10*batch).
func (r *Reconciler) repairGates(ctx context.Context) (Report, error) {
	var gates retrystate.GateRepair
	if err := r.call(ctx, func(ctx context.Context) (err error) {
		gates, err = r.deps.Store.RepairGates(ctx, r.deps.Clock.Now(), 10*batch)
		return err
	}); err != nil {
		return Report{}, err
	}
	var rep Report
	rep.add("gate_slot_freed", gates.Dropped)
	rep.add("gate_admitted", gates.Started)
	if gates.Dropped+gates.Started > 0 {
		r.log.Warn("ordering keys or workflow limits repaired", "slots_freed", gates.Dropped,
			"runs_started", gates.Started)
		for range gates.Dropped {
			r.cfg.Observer.Repair("gate_slot_freed")
		}
		for range gates.Started {
			r.cfg.Observer.Repair("gate_admitted")
		}
	}
	r.gatesSignals.repaired.Signal(gates)
	return rep, nil
}
