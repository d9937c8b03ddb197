package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/cairnhq/cairn/retrystate"
)

// CircuitBreaker stops a failing dependency from being hammered: it is
// shared by every run and worker of a queue that uses the same Name. After
// FailureThreshold consecutive transient failures of the steps behind it
// (within Window of the first), it opens: their attempts are deferred until
// the Cooldown ends, without spending their retry or crash budget
// (journaled attempt_deferred; the run's warning is "breaker_open"), and
// never past the run's deadline. Then exactly one attempt, across all
// workers, probes the dependency: its success closes the breaker, its
// failure opens it again for twice the cooldown, up to MaxCooldown.
// Permanent failures do not count: they say nothing of the dependency's
// health.
type CircuitBreaker struct {
	// Name identifies the breaker: letters, digits, '.', '_', '-', ':'
	// (at most 128). Steps with the same name share it. Required, except
	// on an http step, where it defaults to the target host (see
	// httpstep.Step.DefaultBreaker; in YAML, a circuit_breaker without a
	// name on an http step).
	Name string `json:"name"`
	// FailureThreshold is how many consecutive transient failures open it.
	// Default 5.
	FailureThreshold int `json:"failure_threshold,omitempty"`
	// Window bounds the time from the first of those failures to the last.
	// Default 1m.
	Window time.Duration `json:"window,omitempty"`
	// Cooldown is how long it stays open before a probe. Default 30s.
	Cooldown time.Duration `json:"cooldown,omitempty"`
	// MaxCooldown caps the cooldown as failed probes double it. Default
	// 10m (or Cooldown, if longer).
	MaxCooldown time.Duration `json:"max_cooldown,omitempty"`
}

type breakerJSON struct {
	Name             string `json:"name"`
	FailureThreshold int    `json:"failure_threshold,omitempty"`
	Window           string `json:"window,omitempty"`
	Cooldown         string `json:"cooldown,omitempty"`
	MaxCooldown      string `json:"max_cooldown,omitempty"`
}

// MarshalJSON writes durations as Go duration strings, as Policy does.
func (b CircuitBreaker) MarshalJSON() ([]byte, error) {
	return json.Marshal(breakerJSON{Name: b.Name, FailureThreshold: b.FailureThreshold, Window: durString(b.Window),
		Cooldown: durString(b.Cooldown), MaxCooldown: durString(b.MaxCooldown)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (b *CircuitBreaker) UnmarshalJSON(data []byte) error {
	var j breakerJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	out := CircuitBreaker{Name: j.Name, FailureThreshold: j.FailureThreshold}
	var err error
	for _, f := range []struct {
		name string
		s    string
		d    *time.Duration
	}{
		{"circuit_breaker.window", j.Window, &out.Window},
		{"circuit_breaker.cooldown", j.Cooldown, &out.Cooldown},
		{"circuit_breaker.max_cooldown", j.MaxCooldown, &out.MaxCooldown},
	} {
		if *f.d, err = parseDur(f.name, f.s); err != nil {
			return err
		}
	}
	*b = out
	return nil
}

// BreakerNameRE matches a circuit breaker's name.
var BreakerNameRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// effective returns b with its defaults.
func (b CircuitBreaker) effective() CircuitBreaker {
	if b.FailureThreshold == 0 {
		b.FailureThreshold = 5
	}
	if b.Window == 0 {
		b.Window = time.Minute
	}
	if b.Cooldown == 0 {
		b.Cooldown = 30 * time.Second
	}
	if b.MaxCooldown == 0 {
		b.MaxCooldown = max(10*time.Minute, b.Cooldown)
	}
	return b
}

func (b CircuitBreaker) validate() error {
	var errs []error
	if b.Name == "" {
		errs = append(errs, errors.New("name is required (only http steps default it to the target host)"))
	} else if !BreakerNameRE.MatchString(b.Name) {
		errs = append(errs, fmt.Errorf("name %q must be 1-128 letters, digits, '.', '_', '-' or ':'", b.Name))
	}
	if b.FailureThreshold < 0 || b.FailureThreshold > 1000 {
		errs = append(errs, fmt.Errorf("failure_threshold %d: must be 1 to 1000 (0: the default, 5)", b.FailureThreshold))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"window", b.Window}, {"cooldown", b.Cooldown}, {"max_cooldown", b.MaxCooldown}} {
		if d.v < 0 || (d.v > 0 && d.v < time.Millisecond) || d.v > 24*time.Hour {
			errs = append(errs, fmt.Errorf("%s %s: must be 1ms to 24h (0: the default)", d.name, d.v))
		}
	}
	if b.MaxCooldown > 0 && b.Cooldown > b.MaxCooldown {
		errs = append(errs, fmt.Errorf("max_cooldown %s is shorter than cooldown %s", b.MaxCooldown, b.Cooldown))
	}
	return errors.Join(errs...)
}

// BreakerSpec is what a run keeps of the breaker of a step with policy p (nil:
// none).
func BreakerSpec(p Policy) *retrystate.BreakerSpec {
	if p.CircuitBreaker == nil {
		return nil
	}
	b := p.CircuitBreaker.effective()
	return &retrystate.BreakerSpec{Name: b.Name, FailureThreshold: b.FailureThreshold, Window: b.Window,
		Cooldown: b.Cooldown, MaxCooldown: b.MaxCooldown}
}

// BreakerState is the state of a circuit breaker, as Client.Breakers reads
// it.
type BreakerState struct {
	Name string `json:"name"`
	// State is "closed", "open" or "half_open" (a probe is out).
	State string `json:"state"`
	// Failures counts the consecutive transient failures (closed).
	Failures int `json:"failures"`
	// OpenUntil is when an open breaker lets a probe through.
	OpenUntil *time.Time `json:"open_until,omitempty"`
	// Cooldown is the current cooldown.
	Cooldown time.Duration `json:"cooldown"`
	// Opened and Deferred count its openings and the attempts it deferred.
	Opened   int64      `json:"opened"`
	Deferred int64      `json:"deferred"`
	Changed  *time.Time `json:"changed_at,omitempty"`
}
