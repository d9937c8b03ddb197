package editdist

import (
	"strings"
	"testing"
)

func TestDistance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"wait", "wait", 0}, {"wiat", "wait", 2}, {"jsn", "json", 1}, {"", "abc", 3}, {"kitten", "sitting", 3},
		{strings.Repeat("a", 65), "a", Far}} {
		if d := Distance(tc.a, tc.b); d != tc.d {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, d, tc.d)
		}
	}
}
