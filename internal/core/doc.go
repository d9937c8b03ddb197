// Package core holds what Cairn's runtime and its public API share: the
// definitions of workflows (Definition, Step, Policy, CircuitBreaker,
// Ordering, Await, Sleep, compensations and groups), the errors a step
// returns and how they are classified, the state of runs as clients read
// it (Run, StepState, Event, statuses, codes), StepContext, Observer,
// Clock and run IDs.
//
// It sits below internal/engine (the attempt runtime and the client) and
// above retrystate; package workflow re-exports its names by alias
// (workflow/facade.go). A few exported names are for the runtime only
// (Snapshot, LineLogger, RunFromRecord, ...): workflow/facade_skip.txt
// lists them, and the facade leaves them out. A method of a type the
// facade re-exports is public, so what only the runtime may do with such a
// type is a function here (Resolve, SetStepRuntime, EffectiveOrdering).
package core
