package retrystate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A circuit breaker (lua/lib/breaker.lua) is shared by every run and
// replica of a queue: transient failures of the steps behind it open it,
// and while it is open their attempts are deferred (begin answers
// OutcomeDeferred) without spending any budget; after the cooldown one
// probe attempt goes through, whose success closes it and whose failure
// opens it again with the cooldown doubled.

// BreakerSpec is a step's circuit breaker as a run keeps it.
type BreakerSpec struct {
	Name             string
	FailureThreshold int
	Window           time.Duration
	Cooldown         time.Duration
	MaxCooldown      time.Duration
}

// encode is the step field the scripts read: name|threshold|window|cooldown|max
// (milliseconds); "" for none.
func (b *BreakerSpec) encode() string {
	if b == nil {
		return ""
	}
	return b.Name + "|" + strconv.Itoa(b.FailureThreshold) + "|" + strconv.FormatInt(b.Window.Milliseconds(), 10) +
		"|" + strconv.FormatInt(b.Cooldown.Milliseconds(), 10) + "|" + strconv.FormatInt(b.MaxCooldown.Milliseconds(), 10)
}

// Breaker states.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half_open"
)

// Breaker is the state of one circuit breaker.
type Breaker struct {
	Name  string
	State string
	// Failures counts the consecutive transient failures in the current
	// window (closed).
	Failures int
	// OpenUntil is when an open breaker lets a probe through.
	OpenUntil time.Time
	// Cooldown is the breaker's current cooldown.
	Cooldown time.Duration
	// Probing: a probe attempt is out (half-open).
	Probing bool
	// Opened and Deferred count the times it opened and the attempts it
	// deferred.
	Opened, Deferred int64
	ChangedAt        time.Time
}

// Breakers reads every breaker of the queue (idx:breakers), most recently
// changed first.
func (s *Store) Breakers(ctx context.Context) ([]Breaker, error) {
	names, err := s.rdb.ZRevRange(ctx, s.keys.breakers(), 0, 999).Result()
	if err != nil {
		return nil, fmt.Errorf("read breakers: %w", err)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(names))
	for i, n := range names {
		cmds[i] = pipe.HGetAll(ctx, s.keys.breaker(n))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read breakers: %w", err)
	}
	out := make([]Breaker, 0, len(names))
	for i, n := range names {
		h := cmds[i].Val()
		if len(h) == 0 {
			continue
		}
		st := h["state"]
		if st == "" {
			st = BreakerClosed
		}
		out = append(out, Breaker{Name: n, State: st, Failures: atoi(h["failures"]), OpenUntil: msTime(h["open_until"]),
			Cooldown: time.Duration(atoi(h["cooldown"])) * time.Millisecond, Probing: h["probe"] != "",
			Opened: int64(atoi(h["opened"])), Deferred: int64(atoi(h["deferred"])), ChangedAt: msTime(h["changed_at"])})
	}
	return out, nil
}

// ResetBreaker closes a breaker: no failures, no cooldown; deferred
// attempts start at their scheduled time. It reports whether the breaker
// existed.
func (s *Store) ResetBreaker(ctx context.Context, name string, now time.Time) (bool, error) {
	n, err := s.rdb.Exists(ctx, s.keys.breaker(name)).Result()
	if err != nil || n == 0 {
		return false, err
	}
	err = s.rdb.HSet(ctx, s.keys.breaker(name), "state", BreakerClosed, "failures", "0", "window_start", "0",
		"open_until", "0", "cooldown", "0", "probe", "", "probe_until", "0", "changed_at", now.UnixMilli()).Err()
	if err != nil {
		return false, fmt.Errorf("reset breaker: %w", err)
	}
	return true, nil
}
