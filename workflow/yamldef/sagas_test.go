package yamldef_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/yamldef"
)

// sagaFile is a saga: on_failure compensate, two groups, compensations with
// and without their own settings. %s is the base URL of the compensations'
// server.
const sagaFile = `workflows:
  order:
    on_failure: compensate
    ordering: {on_failure: release}
    resiliency:
      retry: {max_attempts: 3, max_delay: 20s}
    groups:
      payment: {optional: true}
      shipping: {}
      audit:
    steps:
      - name: reserve
        type: http
        with: {method: POST, url: "https://stock.example.com/reservations"}
        compensate:
          type: http
          with: {method: DELETE, url: "https://stock.example.com/reservations/{{.steps.reserve.body.id}}"}
      - name: charge
        type: http
        group: payment
        retry: {max_attempts: 4}
        with: {method: POST, url: "https://pay.example.com/charges"}
        compensate:
          type: http
          description: refund the charge
          retry: {max_attempts: 7, initial_delay: 2s}
          timeout: 5s
          max_crashes: 2
          with:
            method: POST
            url: "%s/refunds/{{.compensation.output.body.id}}"
            headers: {X-Failure: "{{.compensation.failure_code}}", X-Step: "{{.compensation.step}}"}
            body: '{"reason": {{json .compensation.failure_reason}}, "amount": {{.compensation.output.body.amount}}}'
      - name: fee
        type: http
        group: payment
        with: {method: POST, url: "https://pay.example.com/fees"}
        compensate: {type: http, timeouts: {step: 3s}, with: {method: DELETE, url: "https://pay.example.com/fees/1"}}
      - name: ship
        type: http
        group: shipping
        with: {method: POST, url: "https://ship.example.com/shipments"}
      - {name: log, type: http, group: audit, with: {method: POST, url: "https://audit.example.com/"}}
      - {name: pause, type: sleep, with: {duration: 1m}}
`

// TestParseSagas: on_failure, groups, each step's group, compensation and
// compensation policy are as written; ordering.on_failure is kept apart
// from on_failure; the compensation is an http body whose templates read
// .compensation.
func TestParseSagas(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []*http.Request
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got, bodies = append(got, r), append(bodies, string(b))
	}))
	defer srv.Close()
	defs, err := yamldef.Parse("saga.yaml", []byte(fmt.Sprintf(sagaFile, srv.URL)), yamldef.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := defs[0]
	if d.OnFailure != workflow.FailureCompensate {
		t.Errorf("on_failure %q, want compensate", d.OnFailure)
	}
	if d.Ordering == nil || d.Ordering.OnFailure != workflow.OnFailureRelease {
		t.Errorf("ordering %+v, want on_failure release", d.Ordering)
	}
	wantGroups := map[string]workflow.Group{"payment": {Optional: true}, "shipping": {}, "audit": {}}
	if fmt.Sprint(d.Groups) != fmt.Sprint(wantGroups) {
		t.Errorf("groups %v, want %v", d.Groups, wantGroups)
	}
	want := []struct {
		name, group string
		comp        bool
		compPolicy  workflow.Policy
	}{
		{"reserve", "", true, workflow.Policy{}},
		{"charge", "payment", true, workflow.Policy{MaxAttempts: 7, InitialInterval: 2 * time.Second, StepTimeout: 5 * time.Second, MaxCrashes: 2}},
		{"fee", "payment", true, workflow.Policy{StepTimeout: 3 * time.Second}},
		{"ship", "shipping", false, workflow.Policy{}},
		{"log", "audit", false, workflow.Policy{}},
		{"pause", "", false, workflow.Policy{}},
	}
	if len(d.Steps) != len(want) {
		t.Fatalf("%d steps, want %d", len(d.Steps), len(want))
	}
	for i, w := range want {
		s := d.Steps[i]
		if s.Name != w.name || s.Group != w.group || (s.Compensate != nil) != w.comp || !s.CompensatePolicy.Equal(w.compPolicy) {
			t.Errorf("step %d: %s in group %q, compensation %v with %+v; want %s in %q, %v with %+v", i, s.Name, s.Group,
				s.Compensate != nil, s.CompensatePolicy, w.name, w.group, w.comp, w.compPolicy)
		}
	}
	if p := d.Steps[1].Policy; p.MaxAttempts != 4 {
		t.Errorf("charge's own policy %+v: the compensation's settings leaked into it", p)
	}
	if err := d.Validate(); err != nil {
		t.Error(err)
	}

	// The compensation is the http body written: its templates read the
	// compensated step's output and the run's failure.
	sc := &workflow.StepContext{RunID: "r1", Step: workflow.CompensationPrefix + "charge", Attempt: 1,
		IdempotencyKey: "r1:compensate:charge:1", Input: json.RawMessage(`{}`),
		Compensation: &workflow.Compensation{Step: "charge", Output: json.RawMessage(`{"status": 201, "body": {"id": "ch_9", "amount": 12.50}}`),
			FailureCode: "permanent_error", FailureReason: `ship: 400 "no"`}}
	if _, err := d.Steps[1].Compensate(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	r := got[0]
	if r.Method != http.MethodPost || r.URL.Path != "/refunds/ch_9" || r.Header.Get("X-Failure") != "permanent_error" ||
		r.Header.Get("X-Step") != "charge" || r.Header.Get("Idempotency-Key") != "r1:compensate:charge:1" ||
		bodies[0] != `{"reason": "ship: 400 \"no\"", "amount": 12.50}` {
		t.Errorf("compensation sent %s %s headers %v body %s", r.Method, r.URL.Path, r.Header, bodies[0])
	}

	// on_failure: stop is the default, written or not.
	for src, wantAction := range map[string]workflow.FailureAction{"    on_failure: stop\n": workflow.FailureStop, "": ""} {
		defs, err := yamldef.Parse("f.yaml", []byte("workflows:\n  w:\n"+src+
			"    steps: [{name: s, type: http, with: {method: GET, url: 'http://x'}}]\n"), yamldef.Options{})
		if err != nil || defs[0].OnFailure != wantAction || defs[0].Groups != nil {
			t.Errorf("%q: on_failure %q, groups %v (%v); want %q and none", src, defs[0].OnFailure, defs[0].Groups, err, wantAction)
		}
	}
}

// TestCompensationOfACustomStepType: a custom step type builds a
// compensation from a spec that says so, whose Earlier ends with the step.
func TestCompensationOfACustomStepType(t *testing.T) {
	t.Parallel()
	var specs []yamldef.StepSpec
	opts := yamldef.Options{StepTypes: map[string]yamldef.StepType{
		"echo": func(spec yamldef.StepSpec) (workflow.StepFunc, error) {
			specs = append(specs, spec)
			return func(_ context.Context, sc *workflow.StepContext) (any, error) {
				if sc.Compensation != nil {
					return "undo " + sc.Compensation.Step, nil
				}
				return "do", nil
			}, nil
		},
	}}
	defs, err := yamldef.Parse("f.yaml", []byte(`workflows:
  w:
    steps:
      - {name: first, type: http, with: {method: GET, url: "http://x"}}
      - {name: second, type: echo, compensate: {type: echo, with: {x: 1}}}
`), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].Compensation || !specs[1].Compensation || specs[1].Name != "second" ||
		specs[1].Index != 1 || !slices.Equal(specs[1].Earlier, []string{"first", "second"}) || specs[1].With == nil {
		t.Fatalf("specs %+v; want the step's, then its compensation's with Earlier [first second]", specs)
	}
	out, err := defs[0].Steps[1].Compensate(context.Background(), &workflow.StepContext{Compensation: &workflow.Compensation{Step: "second"}})
	if out != "undo second" || err != nil {
		t.Errorf("compensation returned %v, %v", out, err)
	}
}

// TestCompensationBreakerNamedAfterItsHost: a nameless circuit breaker in
// force for an http compensation is named after the compensation's own
// target host, with the fields of the breaker it comes from (its own, the
// step's, the workflow's); a compensation calling its step's host, or
// under a named breaker, inherits the step's.
func TestCompensationBreakerNamedAfterItsHost(t *testing.T) {
	t.Parallel()
	defs, err := yamldef.Parse("f.yaml", []byte(`workflows:
  w:
    resiliency: {circuit_breaker: {failure_threshold: 3}}
    steps:
      - name: charge
        type: http
        with: {method: POST, url: "https://pay.example.com/charges"}
        compensate: {type: http, with: {method: POST, url: "https://refunds.example.com/r"}}
      - name: same_host
        type: http
        with: {method: POST, url: "https://pay.example.com/x"}
        compensate: {type: http, with: {method: DELETE, url: "https://PAY.example.com/x"}}
      - name: named
        type: http
        circuit_breaker: {name: billing}
        with: {method: POST, url: "https://pay.example.com/y"}
        compensate: {type: http, with: {method: DELETE, url: "https://refunds.example.com/y"}}
      - name: step_own
        type: http
        circuit_breaker: {cooldown: 7s}
        with: {method: POST, url: "https://pay.example.com/z"}
        compensate: {type: http, with: {method: DELETE, url: "https://refunds.example.com/z"}}
      - name: comp_own
        type: http
        with: {method: POST, url: "https://pay.example.com/w"}
        compensate:
          type: http
          circuit_breaker: {window: 9s}
          with: {method: DELETE, url: "https://pay.example.com/w"}
`), yamldef.Options{})
	if err != nil {
		t.Fatal(err)
	}
	steps := defs[0].Steps
	for _, tc := range []struct {
		step       int
		stepCB     workflow.CircuitBreaker
		compCB     *workflow.CircuitBreaker // CompensatePolicy's; nil: inherits the step's
		compEffect string
	}{
		{0, workflow.CircuitBreaker{Name: "pay.example.com", FailureThreshold: 3},
			&workflow.CircuitBreaker{Name: "refunds.example.com", FailureThreshold: 3}, "refunds.example.com"},
		{1, workflow.CircuitBreaker{Name: "pay.example.com", FailureThreshold: 3}, nil, "pay.example.com"},
		{2, workflow.CircuitBreaker{Name: "billing"}, nil, "billing"},
		{3, workflow.CircuitBreaker{Name: "pay.example.com", Cooldown: 7 * time.Second},
			&workflow.CircuitBreaker{Name: "refunds.example.com", Cooldown: 7 * time.Second}, "refunds.example.com"},
		{4, workflow.CircuitBreaker{Name: "pay.example.com", FailureThreshold: 3},
			&workflow.CircuitBreaker{Name: "pay.example.com", Window: 9 * time.Second}, "pay.example.com"},
	} {
		s := steps[tc.step]
		if cb := s.Policy.CircuitBreaker; cb == nil || *cb != tc.stepCB {
			t.Errorf("%s: step breaker %+v, want %+v", s.Name, cb, tc.stepCB)
		}
		cb := s.CompensatePolicy.CircuitBreaker
		if (cb == nil) != (tc.compCB == nil) || (cb != nil && *cb != *tc.compCB) {
			t.Errorf("%s: compensation breaker %+v, want %+v", s.Name, cb, tc.compCB)
		}
		if eff := s.CompensatePolicy.Or(s.Policy).CircuitBreaker; eff == nil || eff.Name != tc.compEffect {
			t.Errorf("%s: the compensation runs under breaker %+v, want %s", s.Name, eff, tc.compEffect)
		}
	}
	if err := defs[0].Validate(); err != nil {
		t.Error(err)
	}
}

// sagaErrorCases are the files of TestParseSagaErrors (and, for the
// schema, of TestSchemaRejectsStructuralErrors).
func sagaErrorCases() []parseErrorCase {
	// wf wraps workflow-level lines (indented 4) before a valid step list
	// whose step is in group g.
	wf := func(lines string) string {
		return "workflows:\n  w:\n" + lines + "    steps: [{name: s, type: http, group: g, with: {method: GET, url: 'http://x'}}]\n"
	}
	// steps wraps steps (indented 6).
	steps := func(lines string) string { return "workflows:\n  w:\n    steps:\n" + lines }
	// comp is a step a, http, with a compensate mapping of the lines
	// (indented 10) given.
	comp := func(lines string) string {
		return steps("      - name: a\n        type: http\n        with: {method: POST, url: 'http://x/a'}\n        compensate:\n" + lines)
	}
	const undo = "          with: {method: DELETE, url: 'http://x/a'}\n"
	return []parseErrorCase{
		// on_failure.
		{"on_failure unknown", wf("    on_failure: rollback\n"), "rollback", `workflow "w": on_failure: "rollback" is not one of stop, compensate`},
		{"on_failure of ordering", wf("    on_failure: block\n"), "block", `on_failure: "block" is not one of stop, compensate (block is a value of ordering.on_failure`},
		{"on_failure a list", wf("    on_failure: [stop]\n"), "[stop]", "on_failure: want a value, got a list"},
		{"ordering on_failure compensate", wf("    ordering: {on_failure: compensate}\n"), "compensate}", `ordering.on_failure: "compensate" is not one of block, release`},

		// groups.
		{"groups a list", wf("    groups: [g]\n"), "[g]", `workflow "w": groups: want a mapping`},
		{"group unknown key", wf("    groups: {g: {optionl: true}}\n"), "optionl", `groups: "g": unknown key "optionl" (did you mean "optional"?)`},
		{"group optional not a bool", wf("    groups: {g: {optional: yes please}}\n"), "yes please", `groups: "g": optional: want true or false`},
		{"group a scalar", wf("    groups: {g: optional}\n"), "optional}", `groups: "g": want a mapping`},
		{"group bad name", wf("    groups:\n      g: {}\n      'pay ment': {optional: true}\n"), "'pay ment'", `groups: group name "pay ment" must be 1-64 letters, digits, '.', '_' or '-'`},
		{"group unused", wf("    groups:\n      g: {}\n      payment: {optional: true}\n"), "payment:", `workflow "w": groups: "payment" is configured but no step is in it (a step joins it with group: payment)`},
		{"group duplicate", wf("    groups:\n      g: {}\n      g: {optional: true}\n"), "g: {optional", `duplicate key "g"`},

		// A step's group.
		{"step group bad name", steps("      - {name: a, type: http, group: 'a/b', with: {method: GET, url: 'http://x'}}\n"), "'a/b'",
			`step "a": group name "a/b" must be`},
		{"step group a mapping", steps("      - {name: a, type: http, group: {name: g}, with: {method: GET, url: 'http://x'}}\n"), "{name: g}",
			`step "a": group: want a value, got a mapping`},
		{"group not contiguous", steps("      - {name: a, type: http, group: pay, with: {method: GET, url: 'http://x'}}\n      - {name: b, type: http, with: {method: GET, url: 'http://x'}}\n      - {name: c, type: http, group: pay, with: {method: GET, url: 'http://x'}}\n"),
			"pay, with", `workflow "w": step "c": group "pay" is not contiguous: step "b" (line 5) comes between it and the group's step "a" (line 4); a group's steps must follow one another`},
		{"group not contiguous, other group between", steps("      - {name: a, type: http, group: pay, with: {method: GET, url: 'http://x'}}\n      - {name: b, type: http, group: ship, with: {method: GET, url: 'http://x'}}\n      - name: c\n        type: http\n        group: pay\n        with: {method: GET, url: 'http://x'}\n"),
			"pay\n", `step "c": group "pay" is not contiguous: step "b" (line 5)`},

		// compensate on a step without a body.
		{"compensate on an await", steps("      - name: a\n        type: await\n        with: {signal: go, timeout: 1h}\n        compensate: {type: http, with: {method: GET, url: 'http://x'}}\n"),
			"compensate:", `workflow "w": step "a": compensate: an await step has nothing to undo; only a step with a body can have a compensation`},
		{"compensate on a sleep", steps("      - name: a\n        type: sleep\n        compensate: {type: http, with: {method: GET, url: 'http://x'}}\n        with: {duration: 1m}\n"),
			"compensate:", `step "a": compensate: a sleep step has nothing to undo`},

		// The compensation's type and keys.
		{"compensation an await", comp("          type: await\n          with: {signal: go, timeout: 1h}\n"), "await",
			`step "a": compensate: type: a compensation cannot be an await: it must do something to undo the step (want one of http)`},
		{"compensation a sleep", comp("          {type: sleep, with: {duration: 1m}}\n"), "sleep", `compensate: type: a compensation cannot be a sleep`},
		{"compensation without type", comp(undo), "with: {method: DELETE", `step "a": compensate: missing key type (want one of http)`},
		{"compensation null", steps("      - name: a\n        type: http\n        with: {method: POST, url: 'http://x/a'}\n        compensate:\n"), "compensate:\n",
			`step "a": compensate: empty: want a mapping with type and with`},
		{"compensation unknown type", comp("          type: grpc\n" + undo), "grpc", `step "a": compensate: unknown step type "grpc" (want one of http)`},
		{"compensation a string", steps("      - name: a\n        type: http\n        with: {method: POST, url: 'http://x/a'}\n        compensate: refund\n"), "refund",
			`step "a": compensate: want a mapping (key: value), got the string "refund"`},
		{"compensation with a name", comp("          name: undo_a\n          type: http\n" + undo), "name: undo_a",
			`step "a": compensate: a compensation cannot have name: it is named after its step (compensate:STEP)`},
		{"compensation with a group", comp("          type: http\n          group: g\n" + undo), "group: g", `compensate: a compensation cannot have group: it belongs to its step's group`},
		{"compensation with a compensation", comp("          type: http\n          compensate: {type: http}\n" + undo), "compensate: {type", `compensate: a compensation cannot have compensate: a compensation has no compensation of its own`},
		{"compensation optional", comp("          type: http\n          optional: true\n" + undo), "optional", `compensate: a compensation cannot have optional: an operator may retry a compensation that failed, never skip it`},
		{"compensation max_iterations", comp("          type: http\n          max_iterations: 3\n" + undo), "max_iterations", `compensate: a compensation cannot have max_iterations`},
		{"compensation unknown key", comp("          type: http\n          retyr: {max_attempts: 2}\n" + undo), "retyr", `step "a": compensate: unknown key "retyr" (did you mean "retry"?)`},
		{"compensation total timeout", comp("          type: http\n          timeouts: {step: 1s, total: 1h}\n" + undo), "total", `compensate: timeouts: unknown key "total" (want step; a compensation has no total: a compensating run has no deadline)`},
		{"compensation timeout twice", comp("          type: http\n          timeout: 1s\n          timeouts: {step: 2s}\n" + undo), "2s}", `compensate: timeouts.step and timeout both set the step timeout`},
		{"compensation description a list", comp("          type: http\n          description: [a]\n" + undo), "[a]", `compensate: description: want a value, got a list`},

		// What the step loader refuses in a step, in a compensation.
		{"compensation retry", comp("          type: http\n          retry: {max_attempts: 0}\n" + undo), "0}", `step "a": compensate: retry.max_attempts: 0: want at least 1`},
		{"compensation bad timeout", comp("          type: http\n          timeout: soon\n" + undo), "soon", `compensate: timeout: "soon" is not a duration`},
		{"compensation max_crashes", comp("          type: http\n          max_crashes: 0\n" + undo), "0\n", `compensate: max_crashes: 0: want at least 1`},
		{"compensation initial above the step's max", steps("      - name: a\n        type: http\n        retry: {max_delay: 2s}\n        with: {method: POST, url: 'http://x/a'}\n        compensate:\n          type: http\n          retry: {initial_delay: 5s}\n" + undo),
			"{initial_delay", `step "a": compensate: with the step's, the workflow's and the worker's settings: max_interval 2s is shorter than initial_interval 5s`},
		{"compensation without with", comp("          type: http\n"), "http\n", `step "a": compensate: with: missing (an http step needs at least method and url)`},
		{"compensation without url", comp("          type: http\n          with: {method: DELETE}\n"), "{method: DELETE}", `step "a": compensate: with.url: missing`},
		{"compensation unknown with key", comp("          type: http\n          with: {method: DELETE, url: 'http://x', timeout: 1s}\n"), "timeout", `compensate: with: unknown key "timeout"`},
		{"compensation template", comp("          type: http\n          with: {method: DELETE, url: 'http://x/{{.compensation.output'}\n"), "'http://x/{{", `compensate: with.url: template: url:1: unclosed action`},
		{"compensation reads a later step", steps("      - name: a\n        type: http\n        with: {method: POST, url: 'http://x/a'}\n        compensate: {type: http, with: {method: DELETE, url: 'http://x/{{.steps.b.body.id}}'}}\n      - {name: b, type: http, with: {method: GET, url: 'http://x'}}\n"),
			"'http://x/{{.steps.b", `step "a": compensate: with.url: reads .steps.b, but "b" is not an earlier step`},
		{"compensation host-templated", comp("          type: http\n          with: {method: DELETE, url: 'http://{{.input.host}}/a'}\n"), "'http://{{", `compensate: with.url: {{.input.host}} renders into the scheme, userinfo, host or port`},
		{"compensation allowed_hosts bad", comp("          type: http\n          allowed_hosts: ['http://x/']\n" + undo), "'http://x/'", `step "a": compensate: allowed_hosts: "http://x/": want a host name`},
		{"compensation turns the step's hosts off", steps("      - name: a\n        type: http\n        allowed_hosts: [api.example.com]\n        with: {method: POST, url: 'http://x/a'}\n        compensate:\n          type: http\n          allowed_hosts: []\n          with: {method: DELETE, url: 'https://{{.input.host}}/x'}\n"),
			"'https://{{", `compensate: with.url: {{.input.host}} renders into`},

		// .compensation only in a compensation's templates.
		{"step reads .compensation", steps("      - {name: a, type: http, with: {method: GET, url: 'http://x/{{.compensation.step}}'}}\n"), "'http://x/{{",
			`step "a": with.url: reads .compensation, which only the templates of a compensation can read`},
		{"step body reads $.compensation", steps("      - name: a\n        type: http\n        with:\n          method: GET\n          url: http://x\n          body: '{{range .input}}{{$.compensation}}{{end}}'\n"), "'{{range",
			`step "a": with.body: reads .compensation`},
		{"sleep until reads .compensation", steps("      - {name: a, type: sleep, with: {until: '{{.compensation.failure_code}}'}}\n"), "'{{",
			`step "a": with.until reads .compensation, which only the templates of a compensation can read`},

		// Circuit breakers of compensations.
		{"compensation nameless breaker on a templated host", comp("          type: http\n          allowed_hosts: [api.example.com]\n          circuit_breaker: {cooldown: 5s}\n          with: {method: DELETE, url: 'https://{{.input.host}}/a'}\n"),
			"{cooldown", `step "a": compensate: circuit_breaker: name is required: the URL's host is a template, known only at run time, so it cannot name the breaker`},
		{"compensation inherits the step's nameless breaker on a templated host", steps("      - name: a\n        type: http\n        circuit_breaker: {failure_threshold: 2}\n        with: {method: POST, url: 'http://x/a'}\n        compensate:\n          type: http\n          allowed_hosts: [api.example.com]\n          with: {method: DELETE, url: 'https://{{.input.host}}/a'}\n"),
			"'https://{{", `step "a": compensate: with.url: the step's circuit_breaker (line 6) has no name, and the URL's host is a template, known only at run time, so it cannot name the breaker: name that breaker, or give this compensation a circuit_breaker with a name`},
		{"compensation inherits the workflow's nameless breaker on a templated host", "workflows:\n  w:\n    resiliency: {circuit_breaker: {cooldown: 5s}}\n    steps:\n      - name: a\n        type: http\n        with: {method: POST, url: 'http://x/a'}\n        compensate:\n          type: http\n          allowed_hosts: [api.example.com]\n          with: {method: DELETE, url: 'https://{{.input.host}}/a'}\n",
			"'https://{{", `compensate: with.url: the workflow's circuit_breaker (line 3) has no name`},
		{"compensation breaker unknown key", comp("          type: http\n          circuit_breaker: {name: b, treshold: 3}\n" + undo), "treshold", `compensate: circuit_breaker: unknown key "treshold"`},
	}
}

// TestParseSagaErrors checks each problem of on_failure, groups and
// compensations: where it is reported (line:col) and what it says.
func TestParseSagaErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range sagaErrorCases() {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defs, err := yamldef.Parse("f.yaml", []byte(tt.yaml), yamldef.Options{})
			if err == nil {
				t.Fatalf("Parse accepted:\n%s\n(%d definitions)", tt.yaml, len(defs))
			}
			var list yamldef.ErrorList
			if !errors.As(err, &list) || !errors.Is(err, workflow.ErrInvalidDefinition) || defs != nil {
				t.Fatalf("error %v (%T) is not an ErrorList of invalid definitions, or definitions came with it", err, err)
			}
			prefix := "f.yaml:" + position(t, tt.yaml, tt.at) + " "
			for _, e := range list {
				if e.Line == 0 || e.Column == 0 {
					t.Errorf("error without a position: %v", e)
				}
				if strings.HasPrefix(e.Error(), prefix) && strings.Contains(e.Error(), tt.msg) {
					return
				}
			}
			t.Errorf("no error starting %q and containing %q:\n%v", prefix, tt.msg, err)
		})
	}
}

// TestCompensationOfACustomTypeUnderANamelessBreaker: only the built-in
// http body names a nameless breaker; a custom compensation that inherits
// one is refused at its type.
func TestCompensationOfACustomTypeUnderANamelessBreaker(t *testing.T) {
	t.Parallel()
	opts := yamldef.Options{StepTypes: map[string]yamldef.StepType{"undo": func(yamldef.StepSpec) (workflow.StepFunc, error) {
		return func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }, nil
	}}}
	src := `workflows:
  w:
    steps:
      - name: a
        type: http
        circuit_breaker: {failure_threshold: 2}
        with: {method: POST, url: "https://pay.example.com/a"}
        compensate: {type: undo}
`
	_, err := yamldef.Parse("f.yaml", []byte(src), opts)
	want := `f.yaml:8:28: workflow "w": step "a": compensate: the step's circuit_breaker (line 6) has no name, and only http ` +
		`steps default it to the target host: name that breaker, or give this compensation a circuit_breaker with a name`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	defs, err := yamldef.Parse("f.yaml", []byte(strings.Replace(src, "{type: undo}", "{type: undo, circuit_breaker: {name: undoer}}", 1)), opts)
	if err != nil {
		t.Fatal(err)
	}
	if cb := defs[0].Steps[0].CompensatePolicy.CircuitBreaker; cb == nil || cb.Name != "undoer" {
		t.Errorf("compensation breaker %+v, want undoer", cb)
	}
}
