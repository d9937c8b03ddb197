package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
)

// A state write on a closed Redis client (the process shutting down) is
// not retried: no retry could succeed, and a retry loop would outlive the
// worker by StateWriteTimeout. Another error is retried until it succeeds.
func TestRetryStopsOnAClosedClient(t *testing.T) {
	t.Parallel()
	d := &deps{writeTimeout: time.Hour}
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name  string
		fails []error // what fn returns, call by call, then nil
		calls int
		want  error
	}{
		{"closed at once", []error{fmt.Errorf("complete: %w", redis.ErrClosed)}, 1, redis.ErrClosed},
		{"closed on a retry", []error{errors.New("i/o timeout"), redis.ErrClosed}, 2, redis.ErrClosed},
		{"transient", []error{errors.New("i/o timeout"), errors.New("LOADING")}, 3, nil},
	} {
		// (In a bubble: the backoff between calls is the bubble's time.)
		synctest.Test(t, func(t *testing.T) {
			calls := 0
			err := d.retry(context.Background(), log, "test", func(context.Context) error {
				calls++
				if calls <= len(tc.fails) {
					return tc.fails[calls-1]
				}
				return nil
			})
			if calls != tc.calls || !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Errorf("%s: %d calls, %v; want %d calls, %v", tc.name, calls, err, tc.calls, tc.want)
			}
		})
	}
}
