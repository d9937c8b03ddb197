package engine

import (
	"context"
	"fmt"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
)

// Breakers returns the queue's circuit breakers, most recently changed
// first.
func (c *Client) Breakers(ctx context.Context) ([]core.BreakerState, error) {
	bs, err := c.store.Breakers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]core.BreakerState, len(bs))
	for i, b := range bs {
		out[i] = core.BreakerState{Name: b.Name, State: b.State, Failures: b.Failures, Cooldown: b.Cooldown,
			Opened: b.Opened, Deferred: b.Deferred, Changed: core.TimePtr(b.ChangedAt)}
		if b.State == retrystate.BreakerOpen {
			out[i].OpenUntil = core.TimePtr(b.OpenUntil)
		}
	}
	return out, nil
}

// ResetBreaker closes the named breaker at once (an operator's override):
// no failures counted, no cooldown. ErrBreakerNotFound when no step has
// used it.
func (c *Client) ResetBreaker(ctx context.Context, name string) error {
	if !core.BreakerNameRE.MatchString(name) {
		return fmt.Errorf("%w: breaker name %q", core.ErrInvalidInput, name)
	}
	ok, err := c.store.ResetBreaker(ctx, name, c.cfg.Clock.Now())
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %q", core.ErrBreakerNotFound, name)
	}
	c.log.Info("circuit breaker reset", "breaker", name)
	return nil
}
