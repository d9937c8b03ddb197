// Package maintenance keeps a queue's workflow state whole: its Reconciler
// repairs what crashes, restarts, freezes and lost tasks leave behind
// (attempts whose worker died, deliveries no worker received, missing or
// archived tasks, runs past their deadline, index entries of expired
// runs), journaling, logging and notifying each repair.
//
// It sits beside internal/engine on the runtime floor: the engine makes a
// reconciler for its queue (Engine.NewReconciler) and hands it what it
// needs (Deps), so the reconciler holds no engine; package workflow
// re-exports its types (ReconcilerConfig, Reconciler, Report).
package maintenance
