package core

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Ordering configures how runs that share an ordering key
// (StartOptions.OrderingKey) are admitted. Runs with the same key, in a
// queue, start strictly in start order, at most Concurrency of them at once;
// runs with different keys run concurrently. A run that waits for its turn
// is pending and holds no worker slot; Run.WaitingFor says where it stands.
type Ordering struct {
	// Concurrency is how many runs of one key may be active at once:
	// 1 (the default) runs them one after another.
	Concurrency int `json:"concurrency,omitempty"`
	// OnFailure says what a run that fails for good does to its key:
	// OnFailureBlock (the default) keeps the key until the run is recovered
	// to success, skipped through or cancelled; OnFailureRelease lets the
	// next run start.
	OnFailure OnFailure `json:"on_failure,omitempty"`
}

// OnFailure is what a failed run does to its ordering key.
type OnFailure string

// What a failed run does to its ordering key.
const (
	OnFailureBlock   OnFailure = "block"
	OnFailureRelease OnFailure = "release"
)

// Limits of ordering settings.
const (
	// MaxOrderingKeyBytes bounds an ordering key.
	MaxOrderingKeyBytes = 256
	// MaxOrderingConcurrency bounds Ordering.Concurrency.
	MaxOrderingConcurrency = 10000
	// MaxRunningLimit bounds Definition.MaxRunning.
	MaxRunningLimit = 1000000
)

// EffectiveOrdering returns o with its defaults filled in (o may be nil).
func EffectiveOrdering(o *Ordering) Ordering {
	var e Ordering
	if o != nil {
		e = *o
	}
	if e.Concurrency == 0 {
		e.Concurrency = 1
	}
	if e.OnFailure == "" {
		e.OnFailure = OnFailureBlock
	}
	return e
}

func (o *Ordering) validate() error {
	if o == nil {
		return nil
	}
	var errs []error
	if o.Concurrency < 0 || o.Concurrency > MaxOrderingConcurrency {
		errs = append(errs, fmt.Errorf("ordering concurrency %d: must be 1 to %d (0: the default, 1)",
			o.Concurrency, MaxOrderingConcurrency))
	}
	switch o.OnFailure {
	case "", OnFailureBlock, OnFailureRelease:
	default:
		errs = append(errs, fmt.Errorf("ordering on_failure %q: must be %q or %q", o.OnFailure, OnFailureBlock,
			OnFailureRelease))
	}
	return errors.Join(errs...)
}

// validateGates checks the definition's ordering and max_running.
func (d *Definition) validateGates() error {
	var errs []error
	if err := d.Ordering.validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w %q: %w", ErrInvalidDefinition, d.Name, err))
	}
	if d.MaxRunning < 0 || d.MaxRunning > MaxRunningLimit {
		errs = append(errs, fmt.Errorf("%w %q: max_running %d: must be 0 (no limit) to %d", ErrInvalidDefinition,
			d.Name, d.MaxRunning, MaxRunningLimit))
	}
	return errors.Join(errs...)
}

// CheckOrderingKey reports whether key can be an ordering key: 1 to
// MaxOrderingKeyBytes bytes of UTF-8 without control characters. The error
// wraps ErrInvalidInput.
func CheckOrderingKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty ordering key", ErrInvalidInput)
	case len(key) > MaxOrderingKeyBytes:
		return fmt.Errorf("%w: ordering key longer than %d bytes", ErrInvalidInput, MaxOrderingKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: ordering key is not valid UTF-8", ErrInvalidInput)
	}
	for _, r := range key {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: ordering key contains control character %U", ErrInvalidInput, r)
		}
	}
	return nil
}
