package engine

import (
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/core"
)

// TestPrefixTimes: the times a prefix stands for hold the time of every ID
// that starts with it, and no more.
func TestPrefixTimes(t *testing.T) {
	t.Parallel()
	for _, at := range []time.Time{
		time.Unix(0, 0),
		time.Date(2026, 3, 1, 12, 0, 0, 123e6, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC),
	} {
		id := core.NewRunID(at)
		ms := at.UnixMilli()
		for n := 1; n <= len(id); n++ {
			lo, hi := prefixTimes(id[:n])
			if ms < lo || ms > hi {
				t.Errorf("prefixTimes(%q) = [%d, %d]: lacks the ID's time %d", id[:n], lo, hi, ms)
			}
			want := int64(1)
			if n < core.RunIDTimeLen {
				want = int64(1) << (5 * (core.RunIDTimeLen - n))
			}
			if hi-lo+1 != want {
				t.Errorf("prefixTimes(%q) spans %d ms, want %d", id[:n], hi-lo+1, want)
			}
			if n < core.RunIDTimeLen {
				// The range's ends are the times of IDs with this prefix.
				if p := core.NewRunID(time.UnixMilli(lo))[:n]; p != id[:n] {
					t.Errorf("prefixTimes(%q): the ID of its start has prefix %q", id[:n], p)
				}
				if p := core.NewRunID(time.UnixMilli(hi))[:n]; p != id[:n] {
					t.Errorf("prefixTimes(%q): the ID of its end has prefix %q", id[:n], p)
				}
			}
		}
	}
}
