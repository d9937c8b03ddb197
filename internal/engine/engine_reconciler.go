package engine

import "github.com/cairnhq/cairn/internal/maintenance"

// NewReconciler returns a reconciler for the engine's queue and state.
func (e *Engine) NewReconciler(cfg maintenance.ReconcilerConfig) *maintenance.Reconciler {
	if cfg.Observer == nil {
		cfg.Observer = e.cfg.Observer
	}
	return maintenance.New(maintenance.Deps{Store: e.store, Tasks: e.disp, Clock: e.clock, Retention: e.retention,
		Persist: e.persist}, cfg, e.log)
}
