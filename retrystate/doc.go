// Package retrystate is Cairn's storage layer: it owns every Redis key and
// Lua script of Cairn's workflow state: run and step records (with their
// retry metadata and checkpoints), the indexes the reconciler reads, the
// per-run journal and the notification stream. It is the only package that
// builds a Cairn key or talks to Redis about runs.
//
// It is imported by Cairn's own packages (internal/engine, internal/core,
// internal/maintenance, internal/webhookdelivery, workflowtest, and tests
// and benchmarks) and makes no compatibility promise to any other importer:
// its API changes with Cairn's needs. Programs use package workflow.
//
// # Surface
//
// A Store (New) reads and writes the state of one queue.
//
// Each state operation is one Lua script, and takes one Params struct and
// returns one typed result: Op(ctx, OpParams) (OpResult, error). A result
// holds the script's Outcome and only the fields its outcomes set; its doc
// lists those outcomes, and each field's doc which outcome sets it. The
// parts several results share are Next, RunFailure and GateWait
// (outcome.go).
//
//   - A step attempt (attempt.go): Begin, Complete, Fail, Release, and Renew
//     (which answers a Renewal).
//   - A run (runs.go): CreateRun (NewRun; CreateRuns, pipelined), Cancel,
//     Operate, Restore, ExpireDeadline.
//   - Signals and timers (signals.go): Wait, Signal, Snooze, Goto.
//   - Repairs (repair.go): Redispatch, RepairTask, and CheckTasks (a Check
//     per run).
//
// Errors (errors.go): ErrRunNotFound, ErrRunIDCollision, ErrUnknownWorkflow,
// ErrBadCursor and ErrUnexpectedReply (a script and its decoder disagree),
// and the refusals an action's caller can only report, returned instead of
// an outcome: ErrRefused, ErrRunEnded and ErrMailboxFull, as a
// *RefusedError, *RunEndedError or *MailboxFullError that says why.
//
// Reads return their own types: Run, ListRuns, Journal, Peek, Notifications
// (reads.go), the walks of the indexes (indexes.go), gates, breakers,
// definitions, the audit stream and statistics.
//
// # Keys and scripts
//
// Every key of a queue carries the queue's hash tag, cairn:{queue}:..., so each
// script touches one Redis Cluster slot, next to asynq's own asynq:{queue}:...
// keys. Every state transition is one Lua script (see the lua folder; each
// begins with a KEYS/ARGV header), is fenced where a worker writes, journals
// what it did, and is given "now" by the caller: no script reads the server
// clock. A script's reply is decoded in one place (reply.go).
//
// Times are stored as Unix milliseconds.
package retrystate
