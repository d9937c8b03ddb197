package workflow_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

const crockfordLower = "0123456789abcdefghjkmnpqrstvwxyz"

func TestNewRunIDForm(t *testing.T) {
	t.Parallel()
	for _, at := range []time.Time{
		time.Unix(0, 0),
		time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC),
		time.Now(),
		time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC),
	} {
		for range 100 {
			id := workflow.NewRunID(at)
			if len(id) != 26 {
				t.Fatalf("NewRunID(%v) = %q: length %d, want 26", at, id, len(id))
			}
			for _, c := range id {
				if !strings.ContainsRune(crockfordLower, c) {
					t.Fatalf("NewRunID(%v) = %q contains %q, not lowercase Crockford base32", at, id, c)
				}
			}
			if strings.Contains(id, "-") || strings.Contains(id, "_") || strings.Contains(id, ":") {
				t.Fatalf("NewRunID(%v) = %q contains a separator", at, id)
			}
			if !workflow.ValidRunID(id) {
				t.Fatalf("ValidRunID(%q) = false for a generated ID", id)
			}
		}
	}
}

func TestNewRunIDTimePrefix(t *testing.T) {
	t.Parallel()
	// The first 10 characters encode the Unix time in milliseconds.
	at := time.UnixMilli(1)
	if got := workflow.NewRunID(at)[:10]; got != "0000000001" {
		t.Errorf("time prefix of 1ms = %q, want 0000000001", got)
	}
	at = time.UnixMilli(32)
	if got := workflow.NewRunID(at)[:10]; got != "0000000010" {
		t.Errorf("time prefix of 32ms = %q, want 0000000010", got)
	}
	// Sub-millisecond differences do not change the prefix.
	base := time.Date(2030, 1, 2, 3, 4, 5, 6e6, time.UTC)
	if a, b := workflow.NewRunID(base)[:10], workflow.NewRunID(base.Add(999 * time.Microsecond))[:10]; a != b {
		t.Errorf("prefixes within one millisecond differ: %q %q", a, b)
	}
}

func TestValidRunID(t *testing.T) {
	t.Parallel()
	good := workflow.NewRunID(time.Now())
	tests := []struct {
		name string
		id   string
		want bool
	}{
		{"generated", good, true},
		{"all zeros", strings.Repeat("0", 26), true},
		{"all z", strings.Repeat("z", 26), true},
		{"empty", "", false},
		{"too short", good[:25], false},
		{"too long", good + "0", false},
		{"uppercase", strings.Repeat("A", 26), false},
		{"one uppercase letter", good[:25] + "A", false},
		{"dash", good[:12] + "-" + good[13:], false},
		{"underscore", good[:12] + "_" + good[13:], false},
		{"u", good[:25] + "u", false},
		{"i", good[:25] + "i", false},
		{"l", good[:25] + "l", false},
		{"o", good[:25] + "o", false},
		{"space", good[:25] + " ", false},
		{"non-ASCII", good[:24] + "é", false},
		{"uuid", "123e4567-e89b-12d3-a456-426614174000", false},
	}
	for _, tt := range tests {
		if got := workflow.ValidRunID(tt.id); got != tt.want {
			t.Errorf("%s: ValidRunID(%q) = %v, want %v", tt.name, tt.id, got, tt.want)
		}
	}
}

func TestRunIDsSortByCreationTime(t *testing.T) {
	t.Parallel()
	start := time.Date(2024, 2, 29, 23, 59, 59, 0, time.UTC)
	var ids []string
	for _, d := range []time.Duration{
		0, time.Millisecond, 2 * time.Millisecond, 31 * time.Millisecond, 32 * time.Millisecond,
		time.Second, time.Minute, time.Hour, 24 * time.Hour, 365 * 24 * time.Hour, 50 * 365 * 24 * time.Hour,
	} {
		ids = append(ids, workflow.NewRunID(start.Add(d)))
	}
	if !slices.IsSorted(ids) {
		t.Errorf("IDs created at increasing times are not in order:\n%s", strings.Join(ids, "\n"))
	}
	// Across every millisecond of a second, too.
	prev := ""
	for ms := range 1000 {
		id := workflow.NewRunID(start.Add(time.Duration(ms) * time.Millisecond))
		if id <= prev {
			t.Fatalf("ID at +%dms %q does not sort after %q", ms, id, prev)
		}
		prev = id
	}
}

func TestRunIDsUniqueAtOneInstant(t *testing.T) {
	t.Parallel()
	at := time.Now()
	const n = 10000
	seen := make(map[string]bool, n)
	for range n {
		id := workflow.NewRunID(at)
		if seen[id] {
			t.Fatalf("duplicate ID %q", id)
		}
		seen[id] = true
	}
}
