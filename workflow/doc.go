// Package workflow is Cairn's public API: durable multi-step workflows on
// Redis, each step attempt an asynq task.
//
// A Definition is a named, ordered list of Steps with a Policy. A Worker
// (an Engine on an asynq server) executes them; a Client starts runs and
// reads and steers them from any process, without the workflow code.
//
// When a step fails with a transient error, its retry state (attempt count,
// next attempt time, last error) is persisted in Redis and the next attempt
// is scheduled with exponential backoff and jitter; a permanent error (see
// Permanent) fails the run at once. Completed steps are checkpointed: their
// outputs pass to later steps and they never run again. A run that fails
// needs attention, with a reason naming the step, its attempts and its last
// error.
//
// A step may loop (Snooze, Goto), wait for a signal or a time (Await,
// Sleep), sit behind a circuit breaker shared by every worker
// (CircuitBreaker), and say how to undo itself (Step.Compensate): with
// Definition.OnFailure FailureCompensate, a run that fails for good runs the
// compensations of its succeeded steps, last first, and ends compensated;
// step groups (Step.Group) roll back a stretch of steps together. Runs may be
// ordered by key and limited in number (StartOptions.OrderingKey,
// Definition.MaxRunning). A Client opened with an outbox (OpenClient,
// ClientConfig.Outbox) keeps starting runs and sending signals while Redis
// is unreachable: they queue in a local file and are sent in order, each
// once, when Redis answers.
//
// Execution is at least once per attempt: a step may run again after a
// worker crash, so steps should pass StepContext.IdempotencyKey downstream.
// Each attempt holds a fence, renewed while it runs, so two executions of one
// step do not overlap unless a live worker stalls for longer than the fence's
// TTL; a result from an attempt that lost its fence is always rejected.
package workflow

// The public API is that of internal/core, internal/engine and
// internal/maintenance, re-exported by facade.go; facade_skip.txt lists
// what it leaves out.
//go:generate go run ../internal/tools/facade -src ../internal/core,../internal/engine,../internal/maintenance -pkg workflow -skipfile facade_skip.txt -out facade.go
