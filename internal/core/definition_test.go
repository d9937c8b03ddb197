package core

// White-box tests: resolve, snapshot and StepContext's outputs are
// unexported.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func defNoop(context.Context, *StepContext) (any, error) { return nil, nil }

func TestDefinitionValidate(t *testing.T) {
	t.Parallel()
	step := func(name string) Step { return Step{Name: name, Run: defNoop} }
	long := strings.Repeat("a", 64)
	tests := []struct {
		name string
		def  Definition
		want []string // substrings of the error; nil for a valid definition
	}{
		{"minimal", Definition{Name: "w", Steps: []Step{step("s")}}, nil},
		{"64-character names", Definition{Name: long, Steps: []Step{step(long)}}, nil},
		{"dots, underscores, digits", Definition{Name: "billing.v2_monthly", Steps: []Step{step("0.charge_card"), step("Notify")}}, nil},
		{"valid policies", Definition{Name: "w", Policy: Policy{MaxAttempts: 10, Jitter: JitterFull},
			Steps: []Step{{Name: "s", Run: defNoop, Optional: true, Policy: Policy{StepTimeout: time.Second}}}}, nil},

		{"empty name", Definition{Steps: []Step{step("s")}}, []string{"name must be"}},
		{"65-character name", Definition{Name: long + "a", Steps: []Step{step("s")}}, []string{"name must be"}},
		{"workflow name with dash", Definition{Name: "send-email", Steps: []Step{step("s")}}, nil},
		{"name starting with dash", Definition{Name: "-send", Steps: []Step{step("s")}}, []string{"name must be"}},
		{"name starting with dot", Definition{Name: ".hidden", Steps: []Step{step("s")}}, []string{"name must be"}},
		{"name starting with underscore", Definition{Name: "_x", Steps: []Step{step("s")}}, []string{"name must be"}},
		{"name with colon", Definition{Name: "a:b", Steps: []Step{step("s")}}, []string{"name must be"}},
		{"name with brace", Definition{Name: "a{b}", Steps: []Step{step("s")}}, []string{"name must be"}},
		{"name with space", Definition{Name: "a b", Steps: []Step{step("s")}}, []string{"name must be"}},
		{"non-ASCII name", Definition{Name: "café", Steps: []Step{step("s")}}, []string{"name must be"}},
		{"name with newline", Definition{Name: "ab\n", Steps: []Step{step("s")}}, []string{"name must be"}},
		{"nil steps", Definition{Name: "w"}, []string{"no steps"}},
		{"empty steps", Definition{Name: "w", Steps: []Step{}}, []string{"no steps"}},
		{"empty step name", Definition{Name: "w", Steps: []Step{step("")}}, []string{"step 0", "name"}},
		{"step name with dash", Definition{Name: "w", Steps: []Step{step("a"), step("b-c")}}, []string{"step 1", `"b-c"`}},
		{"65-character step name", Definition{Name: "w", Steps: []Step{step(long + "b")}}, []string{"step 0"}},
		{"step name with colon", Definition{Name: "w", Steps: []Step{step("a:b")}}, []string{`"a:b"`}},
		{"duplicate step", Definition{Name: "w", Steps: []Step{step("a"), step("b"), step("a")}}, []string{"step 2", "duplicate", `"a"`}},
		{"nil Run", Definition{Name: "w", Steps: []Step{{Name: "s"}}}, []string{`"s"`, "no Run"}},
		{"bad workflow policy", Definition{Name: "w", Policy: Policy{MaxAttempts: -1}, Steps: []Step{step("s")}}, []string{"max_attempts"}},
		{"bad step policy", Definition{Name: "w", Steps: []Step{step("a"), {Name: "b", Run: defNoop, Policy: Policy{Jitter: "lots"}}}},
			[]string{`step "b"`, "jitter"}},

		// Compensations and step groups.
		{"a saga with groups", Definition{Name: "w", OnFailure: FailureCompensate, Groups: map[string]Group{"pay": {Optional: true}},
			Steps: []Step{{Name: "a", Run: defNoop, Compensate: defNoop, CompensatePolicy: Policy{MaxAttempts: 9}},
				{Name: "b", Run: defNoop, Group: "pay"}, {Name: "c", Run: defNoop, Group: "pay"}, step("d")}}, nil},
		{"on_failure stop", Definition{Name: "w", OnFailure: FailureStop, Steps: []Step{step("a")}}, nil},
		{"bad on_failure", Definition{Name: "w", OnFailure: "rollback", Steps: []Step{step("a")}},
			[]string{`on_failure "rollback"`, `"stop" or "compensate"`}},
		{"compensation of an await", Definition{Name: "w", Steps: []Step{
			{Name: "a", Await: &Await{Signal: "go", Timeout: time.Minute}, Compensate: defNoop}}},
			[]string{`step "a"`, "only a step with a Run function can have a compensation"}},
		{"compensation policy without a compensation", Definition{Name: "w", Steps: []Step{
			{Name: "a", Run: defNoop, CompensatePolicy: Policy{MaxAttempts: 2}}}},
			[]string{`step "a"`, "CompensatePolicy without Compensate"}},
		{"bad compensation policy", Definition{Name: "w", Steps: []Step{
			{Name: "a", Run: defNoop, Compensate: defNoop, CompensatePolicy: Policy{MaxAttempts: -1}}}},
			[]string{`step "a": compensation policy`, "max_attempts"}},
		{"group not contiguous", Definition{Name: "w", Steps: []Step{
			{Name: "a", Run: defNoop, Group: "g"}, step("b"), {Name: "c", Run: defNoop, Group: "g"}}},
			[]string{`step "c"`, `group "g" is not contiguous`}},
		{"bad group name", Definition{Name: "w", Steps: []Step{{Name: "a", Run: defNoop, Group: "a b"}}},
			[]string{`group name "a b"`}},
		{"a configured group with no step", Definition{Name: "w", Groups: map[string]Group{"ghost": {}},
			Steps: []Step{step("a")}}, []string{`groups: "ghost" is configured but no step is in it`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.def.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidDefinition) {
				t.Fatalf("Validate() = %v, want ErrInvalidDefinition", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestDefinitionValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	d := Definition{
		Name:   "bad name",
		Policy: Policy{MaxCrashes: -1},
		Steps: []Step{
			{Name: "a", Run: defNoop},
			{Name: "a", Run: defNoop},
			{Name: "b"},
			{Name: "c", Run: defNoop, Policy: Policy{RunTimeout: -time.Second}},
		},
	}
	err := d.Validate()
	if !errors.Is(err, ErrInvalidDefinition) {
		t.Fatalf("Validate() = %v", err)
	}
	for _, w := range []string{"name must be", "max_crashes", "duplicate", `step "b" has no Run`, "run_timeout"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Validate() does not report %q:\n%v", w, err)
		}
	}
	// The workflow name is in every message.
	for line := range strings.SplitSeq(err.Error(), "\n") {
		if !strings.Contains(line, `"bad name"`) {
			t.Errorf("message %q does not name the workflow", line)
		}
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	global := Policy{MaxAttempts: 7, MaxInterval: time.Minute, RunTimeout: time.Hour, UnknownErrors: UnknownPermanent}
	d := Definition{
		Name:   "w",
		Policy: Policy{MaxAttempts: 5, InitialInterval: 2 * time.Second, MaxIterations: 50},
		Steps: []Step{
			{Name: "inherits", Run: defNoop},
			{Name: "overrides", Run: defNoop, Optional: true,
				Policy: Policy{MaxAttempts: 2, Jitter: JitterNone, StepTimeout: time.Second, UnknownErrors: UnknownTransient}},
		},
	}
	s := d.resolve(global)
	wantWF := Policy{
		MaxAttempts:        5,               // workflow
		InitialInterval:    2 * time.Second, // workflow
		Backoff:            BackoffExponential,
		BackoffCoefficient: 2,           // default
		MaxInterval:        time.Minute, // global
		Jitter:             JitterEqual, // default
		UnknownErrors:      UnknownPermanent,
		StepTimeout:        15 * time.Minute,
		RunTimeout:         time.Hour,
		MaxIterations:      50,
		MaxCrashes:         3,
	}
	if s.Name != "w" || !s.Policy.Equal(wantWF) {
		t.Errorf("workflow policy:\n got %+v\nwant %+v", s.Policy, wantWF)
	}
	if len(s.Steps) != 2 {
		t.Fatalf("snapshot has %d steps, want 2", len(s.Steps))
	}
	if st := s.Steps[0]; st.Name != "inherits" || st.Optional || !st.Policy.Equal(wantWF) {
		t.Errorf("step 0 = %+v, want the workflow policy %+v", st, wantWF)
	}
	wantStep := wantWF
	wantStep.MaxAttempts, wantStep.Jitter, wantStep.StepTimeout, wantStep.UnknownErrors = 2, JitterNone, time.Second, UnknownTransient
	if st := s.Steps[1]; st.Name != "overrides" || !st.Optional || !st.Policy.Equal(wantStep) {
		t.Errorf("step 1 = %+v, want optional with %+v", st, wantStep)
	}

	// With no global policy, the defaults fill in.
	if got := (&Definition{Name: "x", Steps: []Step{{Name: "s", Run: defNoop}}}).resolve(Policy{}); !got.Steps[0].Policy.Equal(DefaultPolicy()) {
		t.Errorf("zero policies resolve to %+v, want DefaultPolicy", got.Steps[0].Policy)
	}
}

// TestResolveCompensation: a compensation's effective policy is its own
// CompensatePolicy over its step's effective policy; a step without one has
// none; groups and on_failure reach the snapshot.
func TestResolveCompensation(t *testing.T) {
	t.Parallel()
	d := Definition{Name: "w", OnFailure: FailureCompensate, Policy: Policy{MaxAttempts: 5},
		Groups: map[string]Group{"g": {Optional: true}},
		Steps: []Step{
			{Name: "a", Run: defNoop, Policy: Policy{StepTimeout: time.Minute}, Compensate: defNoop,
				CompensatePolicy: Policy{MaxAttempts: 9}, Group: "g"},
			{Name: "b", Run: defNoop},
		}}
	s := d.resolve(Policy{})
	c := s.Steps[0].Compensate
	if c == nil || c.MaxAttempts != 9 || c.StepTimeout != time.Minute || c.MaxCrashes != 3 {
		t.Errorf("a's compensation policy %+v; want max_attempts 9 (its own), step_timeout 1m (the step's), max_crashes 3", c)
	}
	if s.Steps[1].Compensate != nil {
		t.Errorf("b has no compensation, the snapshot has %+v", s.Steps[1].Compensate)
	}
	if s.OnFailure != FailureCompensate || s.Steps[0].Group != "g" || !s.Groups["g"].Optional {
		t.Errorf("snapshot on_failure %q, a's group %q, groups %v", s.OnFailure, s.Steps[0].Group, s.Groups)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseSnapshot(string(b))
	if err != nil || back.Steps[0].Compensate == nil || back.Steps[0].Compensate.MaxAttempts != 9 || back.OnFailure != FailureCompensate {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	d := Definition{Name: "w", Policy: Policy{InitialInterval: 1500 * time.Millisecond},
		Steps: []Step{{Name: "a", Run: defNoop}, {Name: "b", Run: defNoop, Optional: true, Policy: Policy{MaxAttempts: 9}}}}
	s := d.resolve(Policy{})
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"initial_interval":"1.5s"`) {
		t.Errorf("snapshot JSON %s does not write durations as strings", b)
	}
	got, err := ParseSnapshot(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != s.Name || !got.Policy.Equal(s.Policy) || len(got.Steps) != len(s.Steps) {
		t.Fatalf("parseSnapshot = %+v, want %+v", got, s)
	}
	for i := range s.Steps {
		if !reflect.DeepEqual(got.Steps[i], s.Steps[i]) {
			t.Errorf("step %d = %+v, want %+v", i, got.Steps[i], s.Steps[i])
		}
	}
}

func TestParseSnapshotRejects(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		``,
		`not json`,
		`{"name":"w","steps":[]}`,
		`{"name":"w"}`,
		`{"name":"w","steps":[{"name":"a","policy":{"step_timeout":"forever"}}]}`,
		`{"name":"w","steps":"a"}`,
	} {
		if _, err := ParseSnapshot(in); !errors.Is(err, ErrInvalidDefinition) {
			t.Errorf("parseSnapshot(%q) = %v, want ErrInvalidDefinition", in, err)
		}
	}
}

func TestStepContextDecodeInput(t *testing.T) {
	t.Parallel()
	type in struct {
		N int `json:"n"`
	}
	var v in
	if err := (&StepContext{Input: json.RawMessage(`{"n":3}`)}).DecodeInput(&v); err != nil || v.N != 3 {
		t.Fatalf("DecodeInput = %v, %+v", err, v)
	}
	for _, raw := range []string{``, `{"n":`, `{"n":"three"}`, `[1,2]`} {
		err := (&StepContext{Input: json.RawMessage(raw)}).DecodeInput(&v)
		if err == nil {
			t.Errorf("DecodeInput(%q) = nil", raw)
			continue
		}
		if !IsPermanent(err) || Classify(err, UnknownTransient) != ClassPermanent {
			t.Errorf("DecodeInput(%q) = %v: not permanent", raw, err)
		}
		if !strings.Contains(err.Error(), "run input") {
			t.Errorf("DecodeInput(%q) = %q, want it to say it is the run input", raw, err)
		}
	}
}

func TestStepContextOutputs(t *testing.T) {
	t.Parallel()
	sc := &StepContext{outputs: map[string]json.RawMessage{
		"fetch": json.RawMessage(`{"rows":12}`),
		"null":  json.RawMessage(`null`),
	}}
	type out struct {
		Rows int `json:"rows"`
	}

	if raw, ok := sc.Output("fetch"); !ok || string(raw) != `{"rows":12}` {
		t.Errorf("Output(fetch) = %s, %v", raw, ok)
	}
	if raw, ok := sc.Output("missing"); ok || raw != nil {
		t.Errorf("Output(missing) = %s, %v", raw, ok)
	}
	var o out
	if err := sc.DecodeOutput("fetch", &o); err != nil || o.Rows != 12 {
		t.Errorf("DecodeOutput(fetch) = %v, %+v", err, o)
	}

	tests := []struct {
		step string
		into any
		msg  string
	}{
		{"missing", &o, `step "missing" has no output`},
		{"fetch", new(string), `decode output of step "fetch"`},
		{"fetch", out{}, `decode output of step "fetch"`}, // not a pointer
	}
	for _, tt := range tests {
		err := sc.DecodeOutput(tt.step, tt.into)
		if err == nil || !IsPermanent(err) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("DecodeOutput(%q, %T) = %v, want a permanent error containing %q", tt.step, tt.into, err, tt.msg)
		}
	}

	// A StepContext with no outputs at all (the first step) is not an error
	// to ask, just a permanent failure to decode.
	first := &StepContext{}
	if _, ok := first.Output("fetch"); ok {
		t.Error("first step sees an output")
	}
	if err := first.DecodeOutput("fetch", &o); !IsPermanent(err) {
		t.Errorf("DecodeOutput on the first step = %v, want permanent", err)
	}
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	run := NewRunID(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	if got, want := IdempotencyKey(run, "charge", 3), run+":charge:3"; got != want {
		t.Errorf("IdempotencyKey = %q, want %q", got, want)
	}
	other := NewRunID(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	seen := map[string]string{}
	for _, r := range []string{run, other} {
		for _, s := range []string{"a", "a1", "a.1", "b", "1"} {
			for attempt := 1; attempt <= 12; attempt++ {
				k := IdempotencyKey(r, s, attempt)
				what := fmt.Sprintf("(%s, %s, %d)", r, s, attempt)
				if prev, dup := seen[k]; dup {
					t.Fatalf("IdempotencyKey%s = %q, same as for %s", what, k, prev)
				}
				seen[k] = what
				if IdempotencyKey(r, s, attempt) != k {
					t.Fatalf("IdempotencyKey%s is not stable", what)
				}
			}
		}
	}
}
