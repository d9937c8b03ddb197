package retrystate

import "errors"

// Errors returned by Store.
var (
	// ErrRunNotFound: no run has the ID (never created, or expired after
	// its retention).
	ErrRunNotFound = errors.New("run not found")
	// ErrUnknownWorkflow: no worker has registered a workflow of that name.
	ErrUnknownWorkflow = errors.New("unknown workflow")
	// ErrRunIDCollision is returned by CreateRun when a run with the new
	// run's ID exists already; nothing was written. Run IDs carry 80 random
	// bits, so it means the same ID was created before: a create whose
	// reply was lost, repeated (workflow's outbox relies on it).
	ErrRunIDCollision = errors.New("run ID collision")
	// ErrBadCursor is returned by ListRuns for a cursor it did not make.
	ErrBadCursor = errors.New("malformed cursor")
	// ErrUnexpectedReply: a script replied with something its decoder
	// (reply.go) does not know: an unknown outcome, a wrong number of
	// elements, or a malformed element. A script and its decoder disagree.
	// It is also wrapped for a Redis reply of a type the command does not
	// return (a sorted set member that is not a string).
	ErrUnexpectedReply = errors.New("retrystate: unexpected script reply")
)

// errUnknownOutcome is wrapped (with ErrUnexpectedReply) by the error of a
// reply whose outcome word the decoder does not know.
var errUnknownOutcome = errors.New("unknown outcome")
