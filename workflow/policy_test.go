package workflow_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// policyField reads and writes one field of a Policy, for tables that must
// cover every field.
type policyField struct {
	name string
	// set stores a value that marks level (1 step, 2 workflow, 3 global);
	// the values differ from each other and from DefaultPolicy's.
	set func(p *workflow.Policy, level int)
	get func(p workflow.Policy) any
}

var policyFields = []policyField{
	{"MaxAttempts",
		func(p *workflow.Policy, l int) { p.MaxAttempts = 100 + l },
		func(p workflow.Policy) any { return p.MaxAttempts }},
	{"InitialInterval",
		func(p *workflow.Policy, l int) { p.InitialInterval = time.Duration(100+l) * time.Millisecond },
		func(p workflow.Policy) any { return p.InitialInterval }},
	{"Backoff",
		func(p *workflow.Policy, l int) { p.Backoff = []workflow.Backoff{"", "step", "workflow", "global"}[l] },
		func(p workflow.Policy) any { return p.Backoff }},
	{"BackoffCoefficient",
		func(p *workflow.Policy, l int) { p.BackoffCoefficient = 10 + float64(l) },
		func(p workflow.Policy) any { return p.BackoffCoefficient }},
	{"MaxInterval",
		func(p *workflow.Policy, l int) { p.MaxInterval = time.Duration(100+l) * time.Second },
		func(p workflow.Policy) any { return p.MaxInterval }},
	{"Jitter",
		func(p *workflow.Policy, l int) { p.Jitter = []workflow.Jitter{"", "step", "workflow", "global"}[l] },
		func(p workflow.Policy) any { return p.Jitter }},
	{"UnknownErrors",
		func(p *workflow.Policy, l int) {
			p.UnknownErrors = []workflow.ErrorMode{"", "step", "workflow", "global"}[l]
		},
		func(p workflow.Policy) any { return p.UnknownErrors }},
	{"NonRetryableCodes",
		func(p *workflow.Policy, l int) { p.NonRetryableCodes = []string{fmt.Sprint("code", l)} },
		func(p workflow.Policy) any { return codesString(p.NonRetryableCodes) }},
	{"StepTimeout",
		func(p *workflow.Policy, l int) { p.StepTimeout = time.Duration(l) * time.Hour },
		func(p workflow.Policy) any { return p.StepTimeout }},
	{"RunTimeout",
		func(p *workflow.Policy, l int) { p.RunTimeout = time.Duration(l) * 24 * time.Hour },
		func(p workflow.Policy) any { return p.RunTimeout }},
	{"MaxIterations",
		func(p *workflow.Policy, l int) { p.MaxIterations = 1000 + l },
		func(p workflow.Policy) any { return p.MaxIterations }},
	{"MaxCrashes",
		func(p *workflow.Policy, l int) { p.MaxCrashes = 10 + l },
		func(p workflow.Policy) any { return p.MaxCrashes }},
	{"CircuitBreaker",
		func(p *workflow.Policy, l int) {
			p.CircuitBreaker = &workflow.CircuitBreaker{Name: fmt.Sprint("cb", l)}
		},
		func(p workflow.Policy) any {
			if p.CircuitBreaker == nil {
				return ""
			}
			return p.CircuitBreaker.Name
		}},
}

// TestPolicyFieldsTableIsComplete keeps policyFields in step with Policy, so
// that a new field cannot escape the precedence test.
func TestPolicyFieldsTableIsComplete(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[workflow.Policy]()
	if typ.NumField() != len(policyFields) {
		t.Fatalf("Policy has %d fields, policyFields covers %d", typ.NumField(), len(policyFields))
	}
	for i, f := range policyFields {
		if got := typ.Field(i).Name; got != f.name {
			t.Errorf("policyFields[%d] = %s, Policy field %d is %s", i, f.name, i, got)
		}
	}
}

// TestPolicyOrPrecedence checks, field by field, that the most specific level
// that sets a field wins: step > workflow > global > DefaultPolicy.
func TestPolicyOrPrecedence(t *testing.T) {
	t.Parallel()
	def := workflow.DefaultPolicy()
	for _, f := range policyFields {
		for mask := range 8 { // bit 0: step sets it, bit 1: workflow, bit 2: global
			var levels [4]workflow.Policy // index 1..3 as in policyField.set
			want := f.get(def)
			for l := 3; l >= 1; l-- {
				if mask&(1<<(l-1)) != 0 {
					f.set(&levels[l], l)
					want = f.get(levels[l])
				}
			}
			got := levels[1].Or(levels[2]).Or(levels[3]).Or(def)
			if f.get(got) != want {
				t.Errorf("%s, set at levels %03b (global,workflow,step): got %v, want %v", f.name, mask, f.get(got), want)
			}
			// Every other field keeps its default: Or copies field by field.
			for _, o := range policyFields {
				if o.name != f.name && o.get(got) != o.get(def) {
					t.Errorf("%s set at %03b changed %s to %v", f.name, mask, o.name, o.get(got))
				}
			}
		}
	}
}

func TestPolicyOrKeepsSetFields(t *testing.T) {
	t.Parallel()
	var step, other workflow.Policy
	for _, f := range policyFields {
		f.set(&step, 1)
		f.set(&other, 2)
	}
	if got := step.Or(other); !got.Equal(step) {
		t.Errorf("fully set policy changed by Or:\n got %+v\nwant %+v", got, step)
	}
	if got := (workflow.Policy{}).Or(other); !got.Equal(other) {
		t.Errorf("zero.Or(p) = %+v, want p %+v", got, other)
	}
	if got := (workflow.Policy{}).Or(workflow.DefaultPolicy()); !got.Equal(workflow.DefaultPolicy()) {
		t.Errorf("zero.Or(DefaultPolicy()) = %+v", got)
	}
}

func TestDefaultPolicy(t *testing.T) {
	t.Parallel()
	want := workflow.Policy{
		MaxAttempts: 4, InitialInterval: time.Second, Backoff: workflow.BackoffExponential,
		BackoffCoefficient: 2, MaxInterval: 30 * time.Second,
		Jitter: workflow.JitterEqual, UnknownErrors: workflow.UnknownTransient, StepTimeout: 15 * time.Minute,
		MaxCrashes: 3,
	}
	if got := workflow.DefaultPolicy(); !got.Equal(want) {
		t.Errorf("DefaultPolicy() = %+v, want the documented %+v", got, want)
	}
	if err := workflow.DefaultPolicy().Validate(); err != nil {
		t.Errorf("DefaultPolicy().Validate() = %v", err)
	}
}

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		p     workflow.Policy
		field string // named in the error; "" for a valid policy
	}{
		{"zero", workflow.Policy{}, ""},
		{"default", workflow.DefaultPolicy(), ""},
		{"coefficient 1", workflow.Policy{BackoffCoefficient: 1}, ""},
		{"max equals initial", workflow.Policy{InitialInterval: time.Second, MaxInterval: time.Second}, ""},
		{"max without initial", workflow.Policy{MaxInterval: time.Millisecond}, ""},
		{"every mode", workflow.Policy{Jitter: workflow.JitterFull, UnknownErrors: workflow.UnknownPermanent}, ""},

		{"negative max_attempts", workflow.Policy{MaxAttempts: -1}, "max_attempts"},
		{"negative initial_interval", workflow.Policy{InitialInterval: -time.Second}, "initial_interval"},
		{"coefficient below 1", workflow.Policy{BackoffCoefficient: 0.5}, "backoff_coefficient"},
		{"negative coefficient", workflow.Policy{BackoffCoefficient: -2}, "backoff_coefficient"},
		{"NaN coefficient", workflow.Policy{BackoffCoefficient: math.NaN()}, "backoff_coefficient"},
		{"infinite coefficient", workflow.Policy{BackoffCoefficient: math.Inf(1)}, "backoff_coefficient"},
		{"negative max_interval", workflow.Policy{MaxInterval: -time.Second}, "max_interval"},
		{"max below initial", workflow.Policy{InitialInterval: 2 * time.Second, MaxInterval: time.Second}, "max_interval"},
		{"unknown jitter", workflow.Policy{Jitter: "sometimes"}, "jitter"},
		{"jitter in capitals", workflow.Policy{Jitter: "FULL"}, "jitter"},
		{"unknown error mode", workflow.Policy{UnknownErrors: "maybe"}, "unknown_errors"},
		{"negative step_timeout", workflow.Policy{StepTimeout: -time.Nanosecond}, "step_timeout"},
		{"negative run_timeout", workflow.Policy{RunTimeout: -time.Hour}, "run_timeout"},
		{"negative max_iterations", workflow.Policy{MaxIterations: -5}, "max_iterations"},
		{"negative max_crashes", workflow.Policy{MaxCrashes: -1}, "max_crashes"},
		{"unknown backoff", workflow.Policy{Backoff: "quadratic"}, "backoff"},
		{"backoff in capitals", workflow.Policy{Backoff: "LINEAR"}, "backoff"},
		{"empty code", workflow.Policy{NonRetryableCodes: []string{"a", ""}}, "non_retryable_codes[1] is empty"},
		{"duplicate code", workflow.Policy{NonRetryableCodes: []string{"a", "b", "a"}}, `lists "a" twice`},
		{"fixed backoff is valid", workflow.Policy{Backoff: workflow.BackoffFixed}, ""},
		{"linear backoff is valid", workflow.Policy{Backoff: workflow.BackoffLinear}, ""},
		{"empty code list is valid", workflow.Policy{NonRetryableCodes: []string{}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.p.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, workflow.ErrInvalidPolicy) {
				t.Fatalf("Validate() = %v, want an error wrapping ErrInvalidPolicy", err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("Validate() = %q, want it to name %s", err, tt.field)
			}
		})
	}
}

func TestPolicyValidateReportsEveryBadField(t *testing.T) {
	t.Parallel()
	p := workflow.Policy{
		MaxAttempts: -1, InitialInterval: -1, BackoffCoefficient: 0.1, MaxInterval: -1, Jitter: "x",
		UnknownErrors: "y", StepTimeout: -1, RunTimeout: -1, MaxIterations: -1, MaxCrashes: -1,
		Backoff: "z", NonRetryableCodes: []string{""},
	}
	err := p.Validate()
	if !errors.Is(err, workflow.ErrInvalidPolicy) {
		t.Fatalf("Validate() = %v, want ErrInvalidPolicy", err)
	}
	for _, field := range []string{"max_attempts", "initial_interval", "backoff_coefficient", "max_interval",
		"jitter", "unknown_errors", "step_timeout", "run_timeout", "max_iterations", "max_crashes", "backoff",
		"non_retryable_codes"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("Validate() does not name %s: %q", field, err)
		}
	}
}

func TestPolicyBaseDelay(t *testing.T) {
	t.Parallel()
	exp := workflow.Policy{InitialInterval: time.Second, BackoffCoefficient: 2, MaxInterval: 30 * time.Second}
	constant := workflow.Policy{InitialInterval: 3 * time.Second, BackoffCoefficient: 1, MaxInterval: time.Minute}
	slow := workflow.Policy{InitialInterval: 100 * time.Millisecond, BackoffCoefficient: 1.5, MaxInterval: time.Hour}
	uncapped := workflow.Policy{InitialInterval: time.Second, BackoffCoefficient: 2}
	expl := workflow.Policy{InitialInterval: time.Second, Backoff: workflow.BackoffExponential, BackoffCoefficient: 2,
		MaxInterval: 30 * time.Second}
	linear := workflow.Policy{InitialInterval: time.Second, Backoff: workflow.BackoffLinear, BackoffCoefficient: 5,
		MaxInterval: 10 * time.Second}
	linearUncapped := workflow.Policy{InitialInterval: time.Second, Backoff: workflow.BackoffLinear}
	fixed := workflow.Policy{InitialInterval: 3 * time.Second, Backoff: workflow.BackoffFixed, BackoffCoefficient: 2,
		MaxInterval: time.Minute}
	// Not valid (max below initial), but BaseDelay still never exceeds the cap.
	fixedCapped := workflow.Policy{InitialInterval: 3 * time.Second, Backoff: workflow.BackoffFixed, MaxInterval: time.Second}
	tests := []struct {
		name string
		p    workflow.Policy
		n    int
		want time.Duration
	}{
		{"first retry", exp, 1, time.Second},
		{"second", exp, 2, 2 * time.Second},
		{"third", exp, 3, 4 * time.Second},
		{"fourth", exp, 4, 8 * time.Second},
		{"fifth", exp, 5, 16 * time.Second},
		{"capped", exp, 6, 30 * time.Second},
		{"stays capped", exp, 7, 30 * time.Second},
		{"n 0 is the first", exp, 0, time.Second},
		{"negative n is the first", exp, -3, time.Second},
		{"huge n", exp, 1 << 20, 30 * time.Second},
		{"MaxInt n", exp, math.MaxInt, 30 * time.Second},
		{"constant 1", constant, 1, 3 * time.Second},
		{"constant 2", constant, 2, 3 * time.Second},
		{"constant 1000", constant, 1000, 3 * time.Second},
		{"constant MaxInt", constant, math.MaxInt, 3 * time.Second},
		{"coefficient 1.5, 2", slow, 2, 150 * time.Millisecond},
		{"coefficient 1.5, 3", slow, 3, 225 * time.Millisecond},
		{"coefficient 1.5, huge", slow, 1 << 30, time.Hour},
		{"uncapped 10", uncapped, 10, 512 * time.Second},
		{"uncapped overflow", uncapped, 1000, time.Duration(math.MaxInt64)},
		{"uncapped MaxInt", uncapped, math.MaxInt, time.Duration(math.MaxInt64)},
		{"explicit exponential", expl, 3, 4 * time.Second},
		{"linear 1", linear, 1, time.Second},
		{"linear 2", linear, 2, 2 * time.Second},
		{"linear 3 ignores the coefficient", linear, 3, 3 * time.Second},
		{"linear capped", linear, 11, 10 * time.Second},
		{"linear MaxInt capped", linear, math.MaxInt, 10 * time.Second},
		{"linear uncapped MaxInt", linearUncapped, math.MaxInt, time.Duration(math.MaxInt64)},
		{"fixed 1", fixed, 1, 3 * time.Second},
		{"fixed 7 ignores the coefficient", fixed, 7, 3 * time.Second},
		{"fixed MaxInt", fixed, math.MaxInt, 3 * time.Second},
		{"fixed above the cap", fixedCapped, 1, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.p.BaseDelay(tt.n); got != tt.want {
				t.Errorf("%+v.BaseDelay(%d) = %v, want %v", tt.p, tt.n, got, tt.want)
			}
		})
	}
}

// TestPolicyBaseDelayMonotonic checks that delays never shrink nor go
// negative as attempts grow, over the whole range of n.
func TestPolicyBaseDelayMonotonic(t *testing.T) {
	t.Parallel()
	for _, p := range []workflow.Policy{
		workflow.DefaultPolicy(),
		{InitialInterval: time.Millisecond, Backoff: workflow.BackoffLinear, MaxInterval: 24 * time.Hour},
		{InitialInterval: time.Millisecond, Backoff: workflow.BackoffLinear},
		{InitialInterval: time.Millisecond, Backoff: workflow.BackoffFixed},
		{InitialInterval: time.Millisecond, BackoffCoefficient: 1.1, MaxInterval: 24 * time.Hour},
		{InitialInterval: time.Second, BackoffCoefficient: 1e9, MaxInterval: time.Hour},
		{InitialInterval: time.Second, BackoffCoefficient: 3},
	} {
		prev := time.Duration(0)
		for n := 1; n > 0 && n < math.MaxInt/2; n = n*2 + 1 {
			d := p.BaseDelay(n)
			if d < prev {
				t.Fatalf("%+v: BaseDelay(%d) = %v, less than %v before", p, n, d, prev)
			}
			if p.MaxInterval > 0 && d > p.MaxInterval {
				t.Fatalf("%+v: BaseDelay(%d) = %v, above MaxInterval", p, n, d)
			}
			prev = d
		}
	}
}

// TestPolicyBaseDelayNeverNegativeAtInt64Boundary: when the uncapped delay
// is exactly 2^63 ns, float64(math.MaxInt64) (which rounds to 2^63) does not
// compare greater, and converting 2^63 to a time.Duration overflows to
// math.MinInt64. Both policies pass Validate.
func TestPolicyBaseDelayNeverNegativeAtInt64Boundary(t *testing.T) {
	t.Parallel()
	for _, p := range []workflow.Policy{
		{InitialInterval: 1 << 33, BackoffCoefficient: 2, MaxInterval: math.MaxInt64},
		{InitialInterval: 1 << 33, BackoffCoefficient: 2},
	} {
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		// 2^33 ns * 2^30 = 2^63 ns.
		if got := p.BaseDelay(31); got < p.BaseDelay(30) {
			t.Errorf("%+v.BaseDelay(31) = %v (%d), less than BaseDelay(30) = %v", p, got, int64(got), p.BaseDelay(30))
		}
	}
}

func constRand(v float64) func() float64 { return func() float64 { return v } }

const almostOne = 0.9999999999999999 // the largest float64 below 1

func TestPolicyDelayJitterBounds(t *testing.T) {
	t.Parallel()
	base := 10 * time.Second
	p := func(j workflow.Jitter) workflow.Policy {
		return workflow.Policy{InitialInterval: base, BackoffCoefficient: 2, MaxInterval: time.Minute, Jitter: j}
	}
	tests := []struct {
		jitter workflow.Jitter
		rnd    float64
		want   time.Duration
	}{
		{workflow.JitterNone, 0, base},
		{workflow.JitterNone, 0.5, base},
		{workflow.JitterNone, almostOne, base},
		{"", 0.5, base}, // unset: no jitter
		{workflow.JitterFull, 0, 0},
		{workflow.JitterFull, 0.5, base / 2},
		{workflow.JitterFull, 0.25, base / 4},
		{workflow.JitterEqual, 0, base / 2},
		{workflow.JitterEqual, 0.5, base/2 + base/4},
	}
	for _, tt := range tests {
		if got := p(tt.jitter).Delay(1, constRand(tt.rnd)); got != tt.want {
			t.Errorf("jitter %q, rnd %v: Delay(1) = %v, want %v", tt.jitter, tt.rnd, got, tt.want)
		}
	}
	// Just below 1: within a nanosecond or so of base, never above it.
	for _, j := range []workflow.Jitter{workflow.JitterFull, workflow.JitterEqual} {
		got := p(j).Delay(1, constRand(almostOne))
		if got > base || base-got > time.Microsecond {
			t.Errorf("jitter %q, rnd just below 1: Delay(1) = %v, want just under %v", j, got, base)
		}
	}
}

// TestPolicyDelayJitterProperty draws many random values: full jitter stays
// in [0, base], equal jitter in [base/2, base], no jitter is base.
func TestPolicyDelayJitterProperty(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		p := workflow.Policy{
			InitialInterval:    time.Duration(1 + rng.Int64N(int64(time.Minute))),
			BackoffCoefficient: 1 + 3*rng.Float64(),
			MaxInterval:        time.Duration(1+rng.Int64N(1000)) * time.Minute,
		}
		n := 1 + rng.IntN(100)
		base := p.BaseDelay(n)
		if base <= 0 || base > p.MaxInterval {
			t.Fatalf("case %d: %+v.BaseDelay(%d) = %v out of (0, MaxInterval]", i, p, n, base)
		}
		p.Jitter = workflow.JitterNone
		if d := p.Delay(n, rng.Float64); d != base {
			t.Fatalf("case %d: none: Delay = %v, want %v", i, d, base)
		}
		p.Jitter = workflow.JitterFull
		if d := p.Delay(n, rng.Float64); d < 0 || d > base {
			t.Fatalf("case %d: full: Delay = %v, want in [0, %v]", i, d, base)
		}
		p.Jitter = workflow.JitterEqual
		if d := p.Delay(n, rng.Float64); d < base/2 || d > base {
			t.Fatalf("case %d: equal: Delay = %v, want in [%v, %v]", i, d, base/2, base)
		}
	}
}

func TestPolicyJSONRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		p    workflow.Policy
		json string
	}{
		{"zero", workflow.Policy{}, `{}`},
		{"durations as strings", workflow.Policy{InitialInterval: 1500 * time.Millisecond, MaxInterval: 2 * time.Minute},
			`{"initial_interval":"1.5s","max_interval":"2m0s"}`},
		{"every field", workflow.Policy{
			MaxAttempts: 5, InitialInterval: 250 * time.Millisecond, BackoffCoefficient: 1.5,
			MaxInterval: time.Minute, Jitter: workflow.JitterFull, UnknownErrors: workflow.UnknownPermanent,
			StepTimeout: 90 * time.Second, RunTimeout: 24 * time.Hour, MaxIterations: 100, MaxCrashes: 2,
		}, `{"max_attempts":5,"initial_interval":"250ms","backoff_coefficient":1.5,"max_interval":"1m0s",` +
			`"jitter":"full","unknown_errors":"permanent","step_timeout":"1m30s","run_timeout":"24h0m0s",` +
			`"max_iterations":100,"max_crashes":2}`},
		{"sub-microsecond", workflow.Policy{StepTimeout: 1500 * time.Nanosecond}, `{"step_timeout":"1.5µs"}`},
		{"backoff and codes", workflow.Policy{Backoff: workflow.BackoffLinear, NonRetryableCodes: []string{"http_409", "card_declined"}},
			`{"backoff":"linear","non_retryable_codes":["http_409","card_declined"]}`},
		{"empty code list survives", workflow.Policy{NonRetryableCodes: []string{}}, `{"non_retryable_codes":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.json {
				t.Errorf("Marshal = %s, want %s", b, tt.json)
			}
			var got workflow.Policy
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tt.p) {
				t.Errorf("round trip = %+v, want %+v", got, tt.p)
			}
			// A pointer and a field of a struct marshal the same way.
			wrapped, err := json.Marshal(struct{ P *workflow.Policy }{&tt.p}) //nolint:musttag // untagged on purpose: the field's name is the key
			if err != nil || string(wrapped) != `{"P":`+tt.json+`}` {
				t.Errorf("Marshal(&p in struct) = %s, %v", wrapped, err)
			}
		})
	}
}

func TestPolicyUnmarshalJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    workflow.Policy
		wantErr string // a policy error naming this field; "json" for a JSON syntax or type error
	}{
		{"hand-written durations", `{"initial_interval":"1.5s","run_timeout":"1h30m"}`,
			workflow.Policy{InitialInterval: 1500 * time.Millisecond, RunTimeout: 90 * time.Minute}, ""},
		{"empty string is unset", `{"max_interval":""}`, workflow.Policy{}, ""},
		{"unknown fields ignored", `{"max_attempts":2,"colour":"blue"}`, workflow.Policy{MaxAttempts: 2}, ""},
		{"null codes inherit", `{"non_retryable_codes":null}`, workflow.Policy{}, ""},
		{"codes not strings", `{"non_retryable_codes":[1]}`, workflow.Policy{}, "json"},
		{"bad initial_interval", `{"initial_interval":"soon"}`, workflow.Policy{}, "initial_interval"},
		{"bad max_interval", `{"max_interval":"5 seconds"}`, workflow.Policy{}, "max_interval"},
		{"bad step_timeout", `{"step_timeout":"10"}`, workflow.Policy{}, "step_timeout"},
		{"bad run_timeout", `{"run_timeout":"1d"}`, workflow.Policy{}, "run_timeout"},
		{"duration as a number", `{"step_timeout":1000000000}`, workflow.Policy{}, "json"},
		{"not an object", `[1]`, workflow.Policy{}, "json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.wantErr == "" {
				var got workflow.Policy
				if err := json.Unmarshal([]byte(tt.in), &got); err != nil {
					t.Fatalf("Unmarshal(%s) = %v", tt.in, err)
				}
				if !got.Equal(tt.want) {
					t.Fatalf("Unmarshal(%s) = %+v, want %+v", tt.in, got, tt.want)
				}
				return
			}
			before := workflow.Policy{MaxCrashes: 9}
			got := before
			err := json.Unmarshal([]byte(tt.in), &got)
			switch tt.wantErr {
			case "json":
				if err == nil {
					t.Fatalf("Unmarshal(%s) = nil error", tt.in)
				}
			default:
				if !errors.Is(err, workflow.ErrInvalidPolicy) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Unmarshal(%s) = %v, want ErrInvalidPolicy naming %s", tt.in, err, tt.wantErr)
				}
			}
			if !got.Equal(before) {
				t.Errorf("failed Unmarshal changed the policy to %+v", got)
			}
		})
	}
}

// codesString shows a code list for comparison, telling nil from empty.
func codesString(c []string) string {
	if c == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", c)
}

// TestPolicyNonRetryableCodesPrecedence: the most specific level that sets
// the list wins as a whole; an empty list turns off the less specific
// levels' lists; nil inherits.
func TestPolicyNonRetryableCodesPrecedence(t *testing.T) {
	t.Parallel()
	global := workflow.Policy{NonRetryableCodes: []string{"g1", "g2"}}
	wf := workflow.Policy{NonRetryableCodes: []string{"w"}}
	tests := []struct {
		name           string
		step, workflow workflow.Policy
		want           []string
	}{
		{"nothing set", workflow.Policy{}, workflow.Policy{}, []string{"g1", "g2"}},
		{"workflow replaces global", workflow.Policy{}, wf, []string{"w"}},
		{"step replaces workflow", workflow.Policy{NonRetryableCodes: []string{"s"}}, wf, []string{"s"}},
		{"empty at step means none", workflow.Policy{NonRetryableCodes: []string{}}, wf, []string{}},
		{"empty at workflow means none", workflow.Policy{}, workflow.Policy{NonRetryableCodes: []string{}}, []string{}},
	}
	for _, tt := range tests {
		got := tt.step.Or(tt.workflow).Or(global).Or(workflow.DefaultPolicy())
		if codesString(got.NonRetryableCodes) != codesString(tt.want) {
			t.Errorf("%s: codes %s, want %s", tt.name, codesString(got.NonRetryableCodes), codesString(tt.want))
		}
	}
	// Or copies: changing the result leaves the fallback alone.
	got := workflow.Policy{}.Or(global)
	got.NonRetryableCodes[0] = "changed"
	if global.NonRetryableCodes[0] != "g1" {
		t.Errorf("Or shares the fallback's list: %v", global.NonRetryableCodes)
	}
}

func TestPolicyNonRetryable(t *testing.T) {
	t.Parallel()
	p := workflow.Policy{NonRetryableCodes: []string{"http_409", "card_declined"}}
	base := errors.New("boom")
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{base, false},
		{workflow.WithCode(base, "http_409"), true},
		{fmt.Errorf("wrapped: %w", workflow.WithCode(base, "card_declined")), true},
		{workflow.WithCode(base, "http_500"), false},
		{workflow.WithCode(base, ""), false},
	}
	for _, tt := range tests {
		if got := p.NonRetryable(tt.err); got != tt.want {
			t.Errorf("NonRetryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
	if (workflow.Policy{}).NonRetryable(workflow.WithCode(base, "http_409")) {
		t.Error("a policy without codes calls a coded error non-retryable")
	}
}

func TestPolicyEqual(t *testing.T) {
	t.Parallel()
	a := workflow.Policy{MaxAttempts: 3, NonRetryableCodes: []string{"x"}}
	if !a.Equal(workflow.Policy{MaxAttempts: 3, NonRetryableCodes: []string{"x"}}) {
		t.Error("equal policies differ")
	}
	for _, b := range []workflow.Policy{
		{MaxAttempts: 3},
		{MaxAttempts: 3, NonRetryableCodes: []string{"y"}},
		{MaxAttempts: 4, NonRetryableCodes: []string{"x"}},
		{MaxAttempts: 3, NonRetryableCodes: []string{"x"}, Backoff: workflow.BackoffFixed},
	} {
		if a.Equal(b) {
			t.Errorf("%+v equals %+v", a, b)
		}
	}
	if (workflow.Policy{}).Equal(workflow.Policy{NonRetryableCodes: []string{}}) {
		t.Error("nil and empty code lists are equal, but they mean inherit and none")
	}
}
