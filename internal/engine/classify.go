package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/internal/core"
)

// The engine's own errors, which end a step's execution; never returned to
// callers.
var (
	// errRunStopped: the run is no longer running (cancelled or failed).
	errRunStopped = errors.New("run is no longer running (cancelled or failed)")
	// errFenceLost: another delivery or a repair took the step over.
	errFenceLost = errors.New("attempt lost its fence")
	// errUnrenewable: the fence could not be renewed before it expired
	// (Redis unreachable); the worker stops the step and hands the attempt
	// back (release).
	errUnrenewable = errors.New("attempt's fence could not be renewed before it expired")
	// errRenewTooSlow: a renewal did not answer before the fence it renews
	// expired.
	errRenewTooSlow = errors.New("no answer from Redis before the fence expired")
)

// classification is how the engine records a failed attempt: the outcome
// of classify.
type classification struct {
	// err is the error as recorded: the step's error, marked Permanent
	// (with a message saying why) when its code is non-retryable.
	err error
	// class is ClassPermanent or ClassTransient.
	class string
	// code is the code attached with WithCode, or "".
	code string
	// retryAfter is the delay asked for with RetryAfter, when hasRetryAfter.
	retryAfter    time.Duration
	hasRetryAfter bool
	// message is err's message as stored with the attempt (at most 4096
	// bytes and an ellipsis).
	message string
}

// classify decides, under the step's effective policy, what a step error
// is: an error whose code is listed in NonRetryableCodes (and not
// permanent already) becomes permanent; then Classify with the policy's
// UnknownErrors; the code; the delay asked for with RetryAfter.
func classify(err error, pol core.Policy) classification {
	if !core.IsPermanent(err) && pol.NonRetryable(err) {
		err = core.Permanent(fmt.Errorf("error code %q is non-retryable: %w", core.Code(err), err))
	}
	c := classification{err: err, class: core.Classify(err, pol.UnknownErrors), code: core.Code(err),
		message: core.Truncate(err.Error(), 4096)}
	c.retryAfter, c.hasRetryAfter = core.RetryDelayOf(err)
	return c
}

// delay is the delay before the retry of the failed attempt that was the
// used'th of its budget: the one asked for with RetryAfter, else the
// policy's backoff with jitter from rnd. (rnd is drawn from either way, as
// it always was.)
func (c classification) delay(pol core.Policy, used int, rnd func() float64) time.Duration {
	d := pol.Delay(used, rnd)
	if c.hasRetryAfter {
		return c.retryAfter
	}
	return d
}
