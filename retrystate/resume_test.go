package retrystate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestResumeNotifications: where a reader resuming after an entry ID starts,
// at the edges: an empty stream, an ID beyond the newest, the largest ID,
// and each bound alone.
func TestResumeNotifications(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	key := "cairn:{" + s.Queue() + "}:notifications"
	type want struct {
		start   string
		skipped bool
	}
	check := func(what, after string, maxEntries int64, notBefore time.Time, w want) {
		t.Helper()
		start, skipped, err := s.ResumeNotifications(ctx, after, maxEntries, notBefore)
		if err != nil || start != w.start || skipped != w.skipped {
			t.Errorf("%s: after %s: %q %v %v, want %q %v", what, after, start, skipped, err, w.start, w.skipped)
		}
	}
	check("empty stream", "5-0", 10, time.Time{}, want{"0-0", false})
	check("empty stream, largest ID", "18446744073709551615-18446744073709551615", 10, time.Time{}, want{"0-0", false})
	if _, _, err := s.ResumeNotifications(ctx, "5", 10, time.Time{}); err == nil {
		t.Error("an ID without its sequence number is accepted")
	}

	// 10 entries at 1000 ms apart: 1000-0, 2000-0, ... 10000-0.
	id := func(i int) string { return fmt.Sprintf("%d-0", 1000*(i+1)) }
	for i := range 10 {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: id(i), Values: []any{"type", "run_succeeded"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	check("beyond the newest", "10000-1", 0, time.Time{}, want{id(9), false})
	check("largest ID", "18446744073709551615-18446744073709551615", 3, time.Time{}, want{id(9), false})
	check("the newest", id(9), 3, time.Time{}, want{id(9), false})
	check("no bounds", "0-0", 0, time.Time{}, want{"0-0", false})
	check("within the count", id(6), 3, time.Time{}, want{id(6), false})
	check("beyond the count", id(5), 3, time.Time{}, want{id(6), true})
	check("beyond the count, from 0-0", "0-0", 3, time.Time{}, want{id(6), true})
	notBefore := time.UnixMilli(4500) // entries from 5000-0 on
	check("within the age", id(3), 0, notBefore, want{id(3), false})
	check("beyond the age", id(1), 0, notBefore, want{id(3), true})
	check("beyond the age, none skipped", "4200-0", 0, notBefore, want{"4200-0", false})
	check("age more recent than count", "0-0", 8, notBefore, want{id(3), true})
	check("count more recent than age", "0-0", 3, notBefore, want{id(6), true})
	check("everything older", id(2), 5, time.UnixMilli(20000), want{id(9), true})
}
