package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"
)

// Backoff says how the retry delay grows from one retry to the next.
type Backoff string

// Backoff modes. With n the number of the failed attempt within the budget
// (1 for the first), each delay is capped at MaxInterval.
const (
	// BackoffExponential waits InitialInterval * BackoffCoefficient^(n-1)
	// (the default).
	BackoffExponential Backoff = "exponential"
	// BackoffLinear waits InitialInterval * n.
	BackoffLinear Backoff = "linear"
	// BackoffFixed always waits InitialInterval.
	BackoffFixed Backoff = "fixed"
)

// Jitter says how a retry delay is randomised.
type Jitter string

// Jitter modes, with base the exponential delay for an attempt.
const (
	// JitterNone waits exactly base.
	JitterNone Jitter = "none"
	// JitterFull waits a uniform random time in [0, base].
	JitterFull Jitter = "full"
	// JitterEqual waits base/2 plus a uniform random time in [0, base/2].
	JitterEqual Jitter = "equal"
)

// ErrorMode says how an error Cairn cannot classify is treated.
type ErrorMode string

// Error modes.
const (
	// UnknownTransient retries errors that are not marked permanent (the
	// default).
	UnknownTransient ErrorMode = "transient"
	// UnknownPermanent fails fast on every error not known to be transient.
	UnknownPermanent ErrorMode = "permanent"
)

// Policy says how hard a step tries and how long it may take. It is set
// globally (the worker's defaults), per workflow and per step; the most
// specific setting of each field wins (step > workflow > global > built-in
// default). A zero field is unset and inherits.
type Policy struct {
	// MaxAttempts counts every attempt of a step, the first included; the
	// retry budget is MaxAttempts-1. Default 4.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// InitialInterval is the delay before the first retry. Default 1s.
	InitialInterval time.Duration `json:"initial_interval,omitempty"`
	// Backoff says how the delay grows: BackoffExponential,
	// BackoffLinear or BackoffFixed. Default BackoffExponential.
	Backoff Backoff `json:"backoff,omitempty"`
	// BackoffCoefficient multiplies the delay after each retry (with
	// BackoffExponential; the other modes ignore it). Default 2.
	BackoffCoefficient float64 `json:"backoff_coefficient,omitempty"`
	// MaxInterval caps the delay (before jitter). Default 30s.
	MaxInterval time.Duration `json:"max_interval,omitempty"`
	// Jitter randomises each delay. Default JitterEqual.
	Jitter Jitter `json:"jitter,omitempty"`
	// UnknownErrors classifies errors that are neither marked nor known to
	// be transient. Default UnknownTransient.
	UnknownErrors ErrorMode `json:"unknown_errors,omitempty"`
	// NonRetryableCodes lists error codes (see WithCode) that fail a step
	// at once, like errors marked with Permanent: the run fails with
	// permanent_error and the recorded error says the code is not
	// retryable. Unlike the other fields, the most specific level that sets
	// the list wins as a whole (lists are not merged): nil inherits, and an
	// empty non-nil list means "no code is non-retryable here", overriding
	// a list set at a less specific level. Default: none.
	NonRetryableCodes []string `json:"non_retryable_codes,omitempty"`
	// StepTimeout bounds one attempt; an attempt that runs out of time fails
	// transiently and is retried. Default 15m.
	StepTimeout time.Duration `json:"step_timeout,omitempty"`
	// RunTimeout bounds a whole run from its creation (or from a recovery
	// of a run past its deadline); a run past it fails with reason
	// run_timeout. A step-level value is the run's deadline while that step
	// is current, so one step may tighten (or loosen) the workflow's.
	// Default: none.
	RunTimeout time.Duration `json:"run_timeout,omitempty"`
	// MaxIterations bounds the step executions of a run, retries included;
	// the attempt that would exceed it is not started and the run fails with
	// reason max_iterations_exceeded. A step-level value is the ceiling
	// while that step is current. Default: none.
	MaxIterations int `json:"max_iterations,omitempty"`
	// MaxCrashes is how many worker crashes one step survives; the next
	// crash fails the run with reason crash_budget_exhausted. Crashes never
	// consume MaxAttempts. Default 3.
	MaxCrashes int `json:"max_crashes,omitempty"`
	// CircuitBreaker, when set, puts the step behind a circuit breaker
	// shared by every run and worker of the queue (see CircuitBreaker).
	// Taken whole from the most specific level that sets it. Default: none.
	CircuitBreaker *CircuitBreaker `json:"circuit_breaker,omitempty"`
}

// DefaultPolicy returns the built-in defaults, the last level of precedence.
func DefaultPolicy() Policy {
	return Policy{
		MaxAttempts:        4,
		InitialInterval:    time.Second,
		Backoff:            BackoffExponential,
		BackoffCoefficient: 2,
		MaxInterval:        30 * time.Second,
		Jitter:             JitterEqual,
		UnknownErrors:      UnknownTransient,
		StepTimeout:        15 * time.Minute,
		MaxCrashes:         3,
	}
}

// Or returns p with every unset field taken from fallback.
func (p Policy) Or(fallback Policy) Policy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = fallback.MaxAttempts
	}
	if p.InitialInterval == 0 {
		p.InitialInterval = fallback.InitialInterval
	}
	if p.Backoff == "" {
		p.Backoff = fallback.Backoff
	}
	if p.BackoffCoefficient == 0 {
		p.BackoffCoefficient = fallback.BackoffCoefficient
	}
	if p.MaxInterval == 0 {
		p.MaxInterval = fallback.MaxInterval
	}
	if p.Jitter == "" {
		p.Jitter = fallback.Jitter
	}
	if p.UnknownErrors == "" {
		p.UnknownErrors = fallback.UnknownErrors
	}
	if p.NonRetryableCodes == nil {
		p.NonRetryableCodes = slices.Clone(fallback.NonRetryableCodes)
	}
	if p.StepTimeout == 0 {
		p.StepTimeout = fallback.StepTimeout
	}
	if p.RunTimeout == 0 {
		p.RunTimeout = fallback.RunTimeout
	}
	if p.MaxIterations == 0 {
		p.MaxIterations = fallback.MaxIterations
	}
	if p.MaxCrashes == 0 {
		p.MaxCrashes = fallback.MaxCrashes
	}
	if p.CircuitBreaker == nil && fallback.CircuitBreaker != nil {
		cb := *fallback.CircuitBreaker
		p.CircuitBreaker = &cb
	}
	return p
}

// Equal reports whether p and q set the same fields to the same values. A
// nil and an empty NonRetryableCodes differ: nil inherits, empty does not.
func (p Policy) Equal(q Policy) bool { return reflect.DeepEqual(p, q) }

// NonRetryable reports whether err carries a code (see WithCode) that the
// policy lists in NonRetryableCodes.
func (p Policy) NonRetryable(err error) bool {
	c := Code(err)
	return c != "" && slices.Contains(p.NonRetryableCodes, c)
}

// Validate checks the fields that are set.
func (p Policy) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidPolicy}, args...)...))
	}
	if p.MaxAttempts < 0 {
		bad("max_attempts %d is negative", p.MaxAttempts)
	}
	if p.InitialInterval < 0 {
		bad("initial_interval %s is negative", p.InitialInterval)
	}
	switch p.Backoff {
	case "", BackoffExponential, BackoffLinear, BackoffFixed:
	default:
		bad("backoff %q is not one of exponential, linear, fixed", p.Backoff)
	}
	if p.BackoffCoefficient != 0 && (p.BackoffCoefficient < 1 || math.IsNaN(p.BackoffCoefficient) || math.IsInf(p.BackoffCoefficient, 0)) {
		bad("backoff_coefficient %v must be at least 1", p.BackoffCoefficient)
	}
	if p.MaxInterval < 0 {
		bad("max_interval %s is negative", p.MaxInterval)
	}
	if p.InitialInterval > 0 && p.MaxInterval > 0 && p.MaxInterval < p.InitialInterval {
		bad("max_interval %s is shorter than initial_interval %s", p.MaxInterval, p.InitialInterval)
	}
	switch p.Jitter {
	case "", JitterNone, JitterFull, JitterEqual:
	default:
		bad("jitter %q is not one of none, full, equal", p.Jitter)
	}
	switch p.UnknownErrors {
	case "", UnknownTransient, UnknownPermanent:
	default:
		bad("unknown_errors %q is not one of transient, permanent", p.UnknownErrors)
	}
	for i, c := range p.NonRetryableCodes {
		switch {
		case c == "":
			bad("non_retryable_codes[%d] is empty", i)
		case slices.Index(p.NonRetryableCodes, c) < i:
			bad("non_retryable_codes lists %q twice", c)
		}
	}
	if p.StepTimeout < 0 {
		bad("step_timeout %s is negative", p.StepTimeout)
	}
	if p.RunTimeout < 0 {
		bad("run_timeout %s is negative", p.RunTimeout)
	}
	if p.MaxIterations < 0 {
		bad("max_iterations %d is negative", p.MaxIterations)
	}
	if p.MaxCrashes < 0 {
		bad("max_crashes %d is negative", p.MaxCrashes)
	}
	if p.CircuitBreaker != nil {
		if err := p.CircuitBreaker.validate(); err != nil {
			bad("circuit_breaker: %v", err)
		}
	}
	return errors.Join(errs...)
}

// BaseDelay is the delay before the retry that follows failed attempt n
// (n >= 1 within the current budget), before jitter, capped at MaxInterval:
// InitialInterval * BackoffCoefficient^(n-1) with BackoffExponential (or
// Backoff unset), InitialInterval * n with BackoffLinear, InitialInterval
// with BackoffFixed.
func (p Policy) BaseDelay(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	var d float64
	switch p.Backoff {
	case BackoffFixed:
		d = float64(p.InitialInterval)
	case BackoffLinear:
		d = float64(p.InitialInterval) * float64(n)
	default:
		d = float64(p.InitialInterval) * math.Pow(p.BackoffCoefficient, float64(n-1))
	}
	if p.MaxInterval > 0 && (d >= float64(p.MaxInterval) || math.IsNaN(d)) {
		return p.MaxInterval
	}
	// float64(MaxInt64) rounds up to 2^63, which overflows a Duration.
	if d >= float64(math.MaxInt64) || math.IsNaN(d) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(d)
}

// Delay is BaseDelay(n) with the policy's jitter applied; rnd returns a
// uniform value in [0, 1).
func (p Policy) Delay(n int, rnd func() float64) time.Duration {
	base := p.BaseDelay(n)
	switch p.Jitter {
	case JitterFull:
		return time.Duration(rnd() * float64(base))
	case JitterEqual:
		return base/2 + time.Duration(rnd()*float64(base/2))
	default:
		return base
	}
}

// policyJSON is the persisted and displayed form of a Policy, durations
// written as Go duration strings ("1.5s").
//
// NonRetryableCodes is a pointer so that nil (inherit; omitted) and an empty
// list (none; written as []) survive a round trip.
type policyJSON struct {
	MaxAttempts        int       `json:"max_attempts,omitempty"`
	InitialInterval    string    `json:"initial_interval,omitempty"`
	Backoff            Backoff   `json:"backoff,omitempty"`
	BackoffCoefficient float64   `json:"backoff_coefficient,omitempty"`
	MaxInterval        string    `json:"max_interval,omitempty"`
	Jitter             Jitter    `json:"jitter,omitempty"`
	UnknownErrors      ErrorMode `json:"unknown_errors,omitempty"`
	NonRetryableCodes  *[]string `json:"non_retryable_codes,omitempty"`
	StepTimeout        string    `json:"step_timeout,omitempty"`
	RunTimeout         string    `json:"run_timeout,omitempty"`
	MaxIterations      int       `json:"max_iterations,omitempty"`
	MaxCrashes         int       `json:"max_crashes,omitempty"`
	// CircuitBreaker writes its durations as strings too (its own
	// MarshalJSON).
	CircuitBreaker *CircuitBreaker `json:"circuit_breaker,omitempty"`
}

func durString(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

func parseDur(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q: %v", ErrInvalidPolicy, field, s, err) //nolint:errorlint // the sentinel is the error's identity; the cause is only its text, not part of what callers match
	}
	return d, nil
}

// MarshalJSON writes durations as Go duration strings.
func (p Policy) MarshalJSON() ([]byte, error) {
	j := policyJSON{
		MaxAttempts:        p.MaxAttempts,
		InitialInterval:    durString(p.InitialInterval),
		Backoff:            p.Backoff,
		BackoffCoefficient: p.BackoffCoefficient,
		MaxInterval:        durString(p.MaxInterval),
		Jitter:             p.Jitter,
		UnknownErrors:      p.UnknownErrors,
		StepTimeout:        durString(p.StepTimeout),
		RunTimeout:         durString(p.RunTimeout),
		MaxIterations:      p.MaxIterations,
		MaxCrashes:         p.MaxCrashes,
		CircuitBreaker:     p.CircuitBreaker,
	}
	if p.NonRetryableCodes != nil {
		j.NonRetryableCodes = &p.NonRetryableCodes
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Policy) UnmarshalJSON(b []byte) error {
	var j policyJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	out := Policy{
		MaxAttempts:        j.MaxAttempts,
		Backoff:            j.Backoff,
		BackoffCoefficient: j.BackoffCoefficient,
		Jitter:             j.Jitter,
		UnknownErrors:      j.UnknownErrors,
		MaxIterations:      j.MaxIterations,
		MaxCrashes:         j.MaxCrashes,
		CircuitBreaker:     j.CircuitBreaker,
	}
	if j.NonRetryableCodes != nil {
		out.NonRetryableCodes = *j.NonRetryableCodes
	}
	var err error
	for _, f := range []struct {
		name string
		s    string
		d    *time.Duration
	}{
		{"initial_interval", j.InitialInterval, &out.InitialInterval},
		{"max_interval", j.MaxInterval, &out.MaxInterval},
		{"step_timeout", j.StepTimeout, &out.StepTimeout},
		{"run_timeout", j.RunTimeout, &out.RunTimeout},
	} {
		if *f.d, err = parseDur(f.name, f.s); err != nil {
			return err
		}
	}
	*p = out
	return nil
}
