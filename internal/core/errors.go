package core

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/retrystate"
)

// Errors returned by Client and Engine. They are wrapped with context; test
// them with errors.Is.
var (
	// ErrUnknownWorkflow: no worker has registered a workflow of that name.
	ErrUnknownWorkflow = errors.New("unknown workflow")
	// ErrDataFormat: the queue's data in Redis is of a format this release
	// does not read (a newer release wrote it, or it awaits a migration);
	// nothing was read or written. The error says which format and what to
	// do (docs/upgrading.md). Worker.Run and Engine.Publish return it;
	// Client calls that read a definition (Start) fail with it.
	ErrDataFormat = retrystate.ErrDataFormat
	// ErrRunNotFound: no run has that ID (never started, or expired after
	// its retention).
	ErrRunNotFound = errors.New("run not found")
	// ErrBreakerNotFound: no step has used a circuit breaker of that name.
	ErrBreakerNotFound = errors.New("circuit breaker not found")
	// ErrInvalidRunID: the string cannot be a run ID.
	ErrInvalidRunID = errors.New("invalid run ID")
	// ErrInvalidInput: the run input is not valid JSON, or too large.
	ErrInvalidInput = errors.New("invalid input")
	// ErrInvalidDefinition: a workflow definition is malformed.
	ErrInvalidDefinition = errors.New("invalid workflow definition")
	// ErrRunFinished: the action needs a run that has not ended.
	ErrRunFinished = errors.New("run already finished")
	// ErrIdempotencyConflict: the idempotency key started a run of another
	// workflow.
	ErrIdempotencyConflict = errors.New("idempotency key already used by another workflow")
	// ErrInvalidStatus is returned by List for an unknown status filter.
	ErrInvalidStatus = errors.New("invalid status (want pending, running, succeeded, failed or cancelled)")
	// ErrInvalidCursor is returned by List and NeedingAttention for a
	// cursor they did not make.
	ErrInvalidCursor = retrystate.ErrBadCursor
	// ErrActionRefused is returned when an operator action does not apply
	// to the run in its current state (recover of a running run, skip of a
	// required step, ...). The error says why; nothing was changed.
	ErrActionRefused = errors.New("action refused")
	// ErrInvalidPolicy is wrapped by every policy validation error.
	ErrInvalidPolicy = errors.New("invalid policy")
)

// Error classes, as recorded in step records and journals.
const (
	ClassTransient = retrystate.ClassTransient
	ClassPermanent = retrystate.ClassPermanent
)

// PermanentError is the error Permanent returns.
type PermanentError struct{ err error }

func (e *PermanentError) Error() string { return e.err.Error() }
func (e *PermanentError) Unwrap() error { return e.err }

// Permanent marks err as permanent: the step fails at once, whatever budget
// is left, and the run fails needing attention. It returns nil for a nil err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{err}
}

type retryAfterError struct {
	err   error
	delay time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter marks err as transient and asks for the next attempt after d
// instead of the policy's backoff (for a rate limit's Retry-After, say). The
// retry budget still applies. It returns nil for a nil err.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, delay: max(d, 0)}
}

type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// Transient marks err as transient: the step is retried with the policy's
// backoff (within the budget), even under UnknownErrors: permanent (for a
// 503, say). Permanent and a code listed in NonRetryableCodes still win. It
// returns nil for a nil err.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err}
}

type codedError struct {
	err  error
	code string
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// WithCode attaches an application error code to err (say "card_declined"),
// recorded with the failed attempt. It returns nil for a nil err.
func WithCode(err error, code string) error {
	if err == nil {
		return nil
	}
	return &codedError{err: err, code: code}
}

// Code returns the code attached by WithCode, or "".
func Code(err error) string {
	if c, ok := errors.AsType[*codedError](err); ok {
		return c.code
	}
	return ""
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	_, ok := errors.AsType[*PermanentError](err)
	return ok
}

// RetryDelayOf returns the delay requested with RetryAfter, if any.
func RetryDelayOf(err error) (time.Duration, bool) {
	if r, ok := errors.AsType[*retryAfterError](err); ok {
		return r.delay, true
	}
	return 0, false
}

// IsTransient reports whether err is known to be transient: marked with
// Transient or RetryAfter, a timeout (context deadline, os deadline, a net.Error that
// timed out), a refused or reset connection, a broken pipe, or an unexpected
// EOF. Wrapping never hides any of them.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := RetryDelayOf(err); ok {
		return true
	}
	if _, ok := errors.AsType[*transientError](err); ok {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// IsRedisUnavailable reports whether err, returned by a Client or Engine
// call, says that Redis could not serve the call for now rather than that
// the call is wrong: no connection (a failed dial, a refused, reset or
// closed connection, a read or write timeout, the connection pool's
// timeout or exhaustion, no reachable Sentinel or Cluster node, a closed
// client), or a server that cannot serve yet (LOADING, BUSY, MASTERDOWN,
// TRYAGAIN, CLUSTERDOWN, READONLY and NOREPLICAS during a failover, OOM,
// the maximum number of clients). The call may succeed when tried again
// later. A deadline of the caller's own context looks the same (a command
// that got no answer in time): test ctx.Err() first to tell them apart.
func IsRedisUnavailable(err error) bool {
	switch {
	case err == nil:
		return false
	case RedisUnreachable(err), RedisBusy(err), errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolExhausted):
		return true
	}
	if rerr, ok := errors.AsType[redis.Error](err); ok {
		return strings.HasPrefix(rerr.Error(), "ERR max number of clients reached")
	}
	msg := err.Error()
	return strings.Contains(msg, "redis: all sentinels specified in configuration are unreachable") ||
		strings.Contains(msg, "redis: cluster has no nodes")
}

// Classify returns ClassPermanent or ClassTransient for a step error:
// permanent when marked with Permanent, or when it wraps asynq.SkipRetry or
// asynq.RevokeTask (as an asynq handler ends its task's retries); transient when IsTransient; otherwise
// as mode says (UnknownTransient unless set to UnknownPermanent). The engine
// first marks an error Permanent when its code (see WithCode) is listed in
// the step policy's NonRetryableCodes.
func Classify(err error, mode ErrorMode) string {
	switch {
	case IsPermanent(err), errors.Is(err, asynq.SkipRetry), errors.Is(err, asynq.RevokeTask):
		return ClassPermanent
	case IsTransient(err):
		return ClassTransient
	case mode == UnknownPermanent:
		return ClassPermanent
	default:
		return ClassTransient
	}
}
