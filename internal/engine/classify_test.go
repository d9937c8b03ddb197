package engine

// White-box tests: classify is unexported.

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/core"
)

func TestClassifyUnderPolicy(t *testing.T) {
	t.Parallel()
	base := errors.New("boom")
	pol := core.DefaultPolicy()
	pol.NonRetryableCodes = []string{"card_declined"}
	strict := pol
	strict.UnknownErrors = core.UnknownPermanent

	tests := []struct {
		name    string
		err     error
		pol     core.Policy
		class   string
		code    string
		message string
		after   time.Duration // -1: none asked for
	}{
		{"unknown, lenient", base, pol, core.ClassTransient, "", "boom", -1},
		{"unknown, strict", base, strict, core.ClassPermanent, "", "boom", -1},
		{"transient under strict", core.Transient(base), strict, core.ClassTransient, "", "boom", -1},
		{"permanent", core.Permanent(base), pol, core.ClassPermanent, "", "boom", -1},
		{"listed code", core.WithCode(base, "card_declined"), pol, core.ClassPermanent, "card_declined",
			`error code "card_declined" is non-retryable: boom`, -1},
		{"listed code beats transient", core.Transient(core.WithCode(base, "card_declined")), pol, core.ClassPermanent, "card_declined",
			`error code "card_declined" is non-retryable: boom`, -1},
		{"listed code, permanent already", core.Permanent(core.WithCode(base, "card_declined")), pol, core.ClassPermanent,
			"card_declined", "boom", -1},
		{"unlisted code", core.WithCode(base, "http_500"), pol, core.ClassTransient, "http_500", "boom", -1},
		{"retry after", fmt.Errorf("call: %w", core.RetryAfter(base, 3*time.Second)), strict, core.ClassTransient, "",
			"call: boom", 3 * time.Second},
		{"retry after, listed code", core.RetryAfter(core.WithCode(base, "card_declined"), time.Second), pol, core.ClassPermanent,
			"card_declined", `error code "card_declined" is non-retryable: boom`, time.Second},
	}
	for _, tt := range tests {
		c := classify(tt.err, tt.pol)
		if c.class != tt.class || c.code != tt.code || c.message != tt.message {
			t.Errorf("%s: class %q code %q message %q; want %q %q %q", tt.name, c.class, c.code, c.message,
				tt.class, tt.code, tt.message)
		}
		if c.message != c.err.Error() {
			t.Errorf("%s: message %q is not the recorded error's %q", tt.name, c.message, c.err.Error())
		}
		if tt.class == core.ClassPermanent && tt.pol.UnknownErrors != core.UnknownPermanent && !core.IsPermanent(c.err) {
			t.Errorf("%s: recorded error %v not marked permanent", tt.name, c.err)
		}
		if !errors.Is(c.err, base) {
			t.Errorf("%s: recorded error %v does not wrap the step's", tt.name, c.err)
		}
		if tt.after < 0 {
			if c.hasRetryAfter {
				t.Errorf("%s: retry after %s, asked for none", tt.name, c.retryAfter)
			}
		} else if !c.hasRetryAfter || c.retryAfter != tt.after {
			t.Errorf("%s: retry after %s (%v), want %s", tt.name, c.retryAfter, c.hasRetryAfter, tt.after)
		}
	}
}

func TestClassifyTruncatesMessage(t *testing.T) {
	t.Parallel()
	c := classify(errors.New(strings.Repeat("x", 5000)), core.DefaultPolicy())
	if want := strings.Repeat("x", 4096) + "…"; c.message != want {
		t.Errorf("message of %d bytes, want the first 4096 and an ellipsis", len(c.message))
	}
}

// TestClassificationDelay: the RetryAfter delay wins over the backoff, and
// the jitter is drawn from either way.
func TestClassificationDelay(t *testing.T) {
	t.Parallel()
	pol := core.DefaultPolicy() // 1s initial, exponential, equal jitter
	draws := 0
	rnd := func() float64 { draws++; return 0.5 }
	if d := classify(errors.New("boom"), pol).delay(pol, 2, rnd); d != 1500*time.Millisecond {
		t.Errorf("backoff delay %s, want 1.5s", d)
	}
	if d := classify(core.RetryAfter(errors.New("slow down"), 7*time.Second), pol).delay(pol, 2, rnd); d != 7*time.Second {
		t.Errorf("retry-after delay %s, want 7s", d)
	}
	if draws != 2 {
		t.Errorf("jitter drawn %d times for two delays, want 2", draws)
	}
}
