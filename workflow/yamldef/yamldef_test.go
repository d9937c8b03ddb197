package yamldef_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/yamldef"
)

const fullFile = `workflows:
  sync-invoices:
    description: pulls invoices, then tells the hooks
    ordering: {concurrency: 2, on_failure: release}
    max_running: 8
    execution: inline
    resiliency:
      retry:
        max_attempts: 5
        backoff: linear
        initial_delay: 1s
        multiplier: 1.5
        max_delay: 30s
        jitter: full
        unknown_errors: permanent
        non_retryable_codes: [http_409, http_422]
      timeouts: {step: 2m, total: 1h}
      max_iterations: 50
      max_crashes: 2
      circuit_breaker: {name: billing, failure_threshold: 5, window: 30s, cooldown: 20s}
    steps:
      - name: fetch
        type: http
        with: {method: GET, url: "https://billing.internal/invoices?since={{.input.since}}"}
      - name: notify
        type: http
        description: best effort
        optional: true
        retry: {max_attempts: 2, non_retryable_codes: []}
        timeout: 10s
        timeouts: {total: 30m}
        max_iterations: 20
        max_crashes: 1
        with:
          method: POST
          url: https://hooks.internal/done
          headers: {Authorization: "Bearer {{.input.token}}", X-Count: 3}
          body: '{{json .steps.fetch.body}}'
  ping:
    execution: strict
    steps:
      - {name: ping, type: http, with: {method: HEAD, url: "https://example.com/"}}
`

func TestParseMapsEveryField(t *testing.T) {
	t.Parallel()
	defs, err := yamldef.Parse("workflows.yaml", []byte(fullFile), yamldef.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != 2 || defs[0].Name != "sync-invoices" || defs[1].Name != "ping" {
		t.Fatalf("definitions %v, want sync-invoices and ping in file order", defs)
	}
	d := defs[0]
	wantWF := workflow.Policy{
		MaxAttempts: 5, Backoff: workflow.BackoffLinear, InitialInterval: time.Second, BackoffCoefficient: 1.5,
		MaxInterval: 30 * time.Second, Jitter: workflow.JitterFull, UnknownErrors: workflow.UnknownPermanent,
		NonRetryableCodes: []string{"http_409", "http_422"}, StepTimeout: 2 * time.Minute, RunTimeout: time.Hour,
		MaxIterations: 50, MaxCrashes: 2,
		CircuitBreaker: &workflow.CircuitBreaker{Name: "billing", FailureThreshold: 5, Window: 30 * time.Second,
			Cooldown: 20 * time.Second},
	}
	if !d.Policy.Equal(wantWF) {
		t.Errorf("workflow policy\n got %+v\nwant %+v", d.Policy, wantWF)
	}
	if len(d.Steps) != 2 {
		t.Fatalf("%d steps, want 2", len(d.Steps))
	}
	if s := d.Steps[0]; s.Name != "fetch" || s.Optional || !s.Policy.Equal(workflow.Policy{}) || s.Run == nil {
		t.Errorf("step fetch = %+v", s)
	}
	wantStep := workflow.Policy{MaxAttempts: 2, NonRetryableCodes: []string{}, StepTimeout: 10 * time.Second,
		RunTimeout: 30 * time.Minute, MaxIterations: 20, MaxCrashes: 1}
	if s := d.Steps[1]; s.Name != "notify" || !s.Optional || !s.Policy.Equal(wantStep) || s.Run == nil {
		t.Errorf("step notify = %+v, want optional with %+v", s, wantStep)
	}
	if d.Ordering == nil || *d.Ordering != (workflow.Ordering{Concurrency: 2, OnFailure: workflow.OnFailureRelease}) ||
		d.MaxRunning != 8 {
		t.Errorf("ordering %+v max_running %d; want concurrency 2, release, 8", d.Ordering, d.MaxRunning)
	}
	if !d.Inline || defs[1].Inline {
		t.Errorf("inline: sync-invoices %v, ping %v; want true (execution: inline), false (strict)", d.Inline, defs[1].Inline)
	}
	if defs[1].Ordering != nil || defs[1].MaxRunning != 0 {
		t.Errorf("ping has ordering %+v max_running %d; want none", defs[1].Ordering, defs[1].MaxRunning)
	}
	if err := d.Validate(); err != nil {
		t.Error(err)
	}
	if p := defs[1].Policy; !p.Equal(workflow.Policy{}) {
		t.Errorf("ping has policy %+v, want none", p)
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "workflows.yaml")
	if err := os.WriteFile(path, []byte(fullFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if defs, err := yamldef.Load(path, yamldef.Options{}); err != nil || len(defs) != 2 {
		t.Errorf("Load = %d definitions, %v", len(defs), err)
	}
	_, err := yamldef.Load(filepath.Join(dir, "missing.yaml"), yamldef.Options{})
	var list yamldef.ErrorList
	if !errors.Is(err, os.ErrNotExist) || errors.As(err, &list) {
		t.Errorf("Load of a missing file = %v, want a not-exist error that is not an ErrorList", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, yamldef.MaxFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := yamldef.Load(big, yamldef.Options{}); !errors.As(err, &list) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load of a huge file = %v", err)
	}
	// Not a regular file: refused at once (a FIFO nobody writes to would
	// block a plain open for ever).
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, what := range map[string]string{fifo: "named pipe", dir: "directory", "/dev/zero": "device"} {
		done := make(chan error, 1)
		go func() {
			_, err := yamldef.Load(path, yamldef.Options{})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.As(err, &list) || !strings.Contains(err.Error(), what) {
				t.Errorf("Load(%s) = %v, want an ErrorList saying %q", path, err, what)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Load(%s) still blocks after 10s", path)
		}
	}
}

// parseErrorCase is a file the loader refuses, and the problem it reports.
type parseErrorCase struct {
	name string
	yaml string
	at   string // the error is where the last occurrence of at starts; "@L:C" or "@L:" literally, "@" for no position
	msg  string
}

// parseErrorCases are the files of TestParseErrors (and, for the schema,
// of TestSchemaRejectsStructuralErrors).
func parseErrorCases() []parseErrorCase {
	// step wraps one step's lines (indented 6) in a valid file.
	step := func(lines string) string {
		return "workflows:\n  w:\n    steps:\n" + lines
	}
	// wf wraps workflow-level lines (indented 4) before a valid step list.
	wf := func(lines string) string {
		return "workflows:\n  w:\n" + lines + "    steps: [{name: s, type: http, with: {method: GET, url: 'http://x'}}]\n"
	}
	const ok = "        with: {method: GET, url: 'http://x'}\n"
	return []parseErrorCase{
		// The file.
		{"empty file", "", "@", "the file is empty"},
		{"comment only", "# nothing\n", "@", "the file is empty"},
		{"syntax error", "workflows:\n  w: [a,\n", "@2:", "yaml: did not find expected node content"},
		{"tab indentation", "workflows:\n\tw: {}\n", "@2:", "yaml: found character that cannot start any token"},
		{"not a mapping", "- a\n- b\n", "- a", "the file: want a mapping (key: value), got a list"},
		{"unknown top-level key", "workflow:\n  w: {}\n", "workflow:", `unknown key "workflow" (did you mean "workflows"?)`},
		{"missing workflows", "{}\n", "{}", "missing key workflows"},
		{"no workflows", "workflows: {}\n", "{}", "workflows: no workflows defined"},
		{"workflows is a list", "workflows: [a]\n", "[a]", "workflows: want a mapping"},
		{"two documents", "workflows: {}\n---\nworkflows: {}\n", "---", "more than one YAML document"},
		{"unknown anchor", "workflows: *nope\n", "@", "unknown anchor 'nope' referenced"},

		// Polls (with.poll of an http step).
		{"poll without interval", step("      - name: s\n        type: http\n        with: {method: GET, url: 'http://x', poll: {until: 'true'}}\n"),
			"{until", "with.poll: missing key interval"},
		{"poll without until", step("      - name: s\n        type: http\n        with: {method: GET, url: 'http://x', poll: {interval: 1s}}\n"),
			"{interval", "with.poll: missing key until"},
		{"poll interval without unit", step("      - name: s\n        type: http\n        with: {method: GET, url: 'http://x', poll: {until: 'true', interval: 30}}\n"),
			"30}", "with.poll.interval: 30 has no unit"},
		{"poll until does not parse", step("      - name: s\n        type: http\n        with: {method: GET, url: 'http://x', poll: {until: '{{eq .output', interval: 1s}}\n"),
			"'{{eq", "with.poll.until: template"},
		{"poll until reads a later step", step("      - name: s\n        type: http\n        with: {method: GET, url: 'http://x', poll: {until: '{{.steps.z.ok}}', interval: 1s}}\n"),
			"'{{.steps.z", `"z" is not an earlier step`},
		{"poll unknown key", step("      - name: s\n        type: http\n        with: {method: GET, url: 'http://x', poll: {until: 'true', interval: 1s, every: 2s}}\n"),
			"every", `with.poll: unknown key "every"`},

		// Workflows.
		{"duplicate workflow", "workflows:\n  w:\n    steps: [{name: s, type: http, with: {method: GET, url: 'http://x'}}]\n  w:\n    steps: []\n",
			"w:\n    steps: []", `duplicate workflow "w" (first at line 2)`},
		{"workflow name with space", "workflows:\n  bad name:\n    steps: [{name: s, type: http, with: {method: GET, url: 'http://x'}}]\n",
			"bad name", `workflow "bad name": name must be 1-64 letters, digits, '.', '_' or '-'`},
		{"workflow is a string", "workflows:\n  w: hello\n", "hello", `workflow "w": want a mapping (key: value), got the string "hello"`},
		{"unknown workflow key", wf("    retry: {max_attempts: 3}\n"), "retry:", `workflow "w": unknown key "retry" (want description, resiliency, allowed_hosts, ordering, max_running, on_failure, groups, execution, steps)`},
		{"bad execution", wf("    execution: fast\n"), "fast", `workflow "w": execution: "fast" is not one of strict, inline`},
		{"missing steps", "workflows:\n  w:\n    description: x\n", "w:", `workflow "w": missing key steps`},
		{"no steps", "workflows:\n  w:\n    steps: []\n", "[]", `workflow "w": steps: no steps`},
		{"steps is a mapping", "workflows:\n  w:\n    steps: {a: 1}\n", "{a: 1}", "steps: want a list of steps"},
		{"duplicate key", wf("    description: a\n    description: b\n"), "description: b", `duplicate key "description" (first at line 3)`},
		{"description is a list", wf("    description: [a]\n"), "[a]", "description: want a value, got a list"},

		// Ordering and max_running.
		{"unknown ordering key", wf("    ordering: {concurency: 2}\n"), "concurency", `ordering: unknown key "concurency" (did you mean "concurrency"?)`},
		{"ordering concurrency zero", wf("    ordering: {concurrency: 0}\n"), "0}", "ordering.concurrency: 0: want at least 1"},
		{"ordering concurrency huge", wf("    ordering: {concurrency: 20000}\n"), "20000", "ordering.concurrency: 20000 is more than 10000"},
		{"ordering on_failure", wf("    ordering: {on_failure: retry}\n"), "retry}", `ordering.on_failure: "retry" is not one of block, release`},
		{"ordering is a list", wf("    ordering: [1]\n"), "[1]", "ordering: want a mapping"},
		{"max_running string", wf("    max_running: many\n"), "many", `max_running: want a whole number, got the string "many"`},
		{"max_running zero", wf("    max_running: 0\n"), "0\n", "max_running: 0: want at least 1"},

		// Circuit breakers.
		{"breaker with an empty name", wf("    resiliency: {circuit_breaker: {name: '', failure_threshold: 3}}\n"), "'',", "circuit_breaker.name: empty (leave the key out"},
		{"nameless breaker on a host-templated step", step("      - name: a\n        type: http\n        allowed_hosts: [api.example.com]\n        circuit_breaker: {failure_threshold: 3}\n        with: {method: GET, url: 'https://{{.input.host}}/x'}\n"),
			"{failure_threshold: 3}", `step "a": circuit_breaker: name is required: the URL's host is a template, known only at run time, so it cannot name the breaker`},
		{"nameless workflow breaker on a host-templated step", "workflows:\n  w:\n    allowed_hosts: [api.example.com]\n    resiliency: {circuit_breaker: {cooldown: 5s}}\n    steps:\n      - {name: a, type: http, with: {method: GET, url: 'https://x.example.com/'}}\n      - name: b\n        type: http\n        with: {method: GET, url: 'https://{{.input.host}}/x'}\n",
			"'https://{{", `step "b": with.url: the workflow's circuit_breaker (line 4) has no name, and the URL's host is a template, known only at run time, so it cannot name the breaker: name that breaker, or give this step a circuit_breaker with a name`},
		{"nameless breaker on a host glued to a template", step("      - name: a\n        type: http\n        allowed_hosts: [api.example.com]\n        circuit_breaker: {}\n        with: {method: GET, url: 'https://api.example.com{{.input.path}}'}\n"),
			"{}\n", `step "a": circuit_breaker: name is required: the URL's host is a template`},
		{"nameless breaker on an IPv6 host", step("      - name: a\n        type: http\n        circuit_breaker: {cooldown: 5s}\n        with: {method: GET, url: 'http://[::1]:8080/x'}\n"),
			"{cooldown", `step "a": circuit_breaker: name is required: the target host cannot name the circuit breaker: ::1 is an IPv6 address`},
		{"nameless breaker on a sleep", step("      - name: a\n        type: sleep\n        circuit_breaker: {cooldown: 5s}\n        with: {duration: 1m}\n"),
			"{cooldown", `step "a": circuit_breaker: name is required (only http steps default it to the target host)`},
		{"breaker unknown key", wf("    resiliency: {circuit_breaker: {name: b, treshold: 3}}\n"), "treshold", `circuit_breaker: unknown key "treshold"`},
		{"breaker bad cooldown", wf("    resiliency: {circuit_breaker: {name: b, cooldown: soon}}\n"), "soon", `circuit_breaker.cooldown: "soon" is not a duration`},
		{"breaker bad name", wf("    resiliency: {circuit_breaker: {name: \"a|b\"}}\n"), "{circuit_breaker", `name "a|b" must be`},

		// Resiliency.
		{"unknown resiliency key", wf("    resiliency: {retyr: {}}\n"), "retyr", `resiliency: unknown key "retyr" (did you mean "retry"?)`},
		{"unknown retry key", wf("    resiliency:\n      retry: {max_atempts: 5}\n"), "max_atempts", `resiliency.retry: unknown key "max_atempts" (did you mean "max_attempts"?)`},
		{"bad duration", wf("    resiliency: {retry: {initial_delay: 5 seconds}}\n"), "5 seconds", `initial_delay: "5 seconds" is not a duration`},
		{"duration without unit", wf("    resiliency: {retry: {max_delay: 30}}\n"), "30}", "max_delay: 30 has no unit"},
		{"negative duration", wf("    resiliency: {timeouts: {total: -1h}}\n"), "-1h", "timeouts.total: -1h: want a positive duration"},
		{"zero duration", wf("    resiliency: {timeouts: {step: 0s}}\n"), "0s", "timeouts.step: 0s: want a positive duration"},
		{"unknown timeout key", wf("    resiliency: {timeouts: {run: 1h}}\n"), "run:", `timeouts: unknown key "run"`},
		{"bad number", wf("    resiliency: {retry: {max_attempts: five}}\n"), "five", `max_attempts: want a whole number, got the string "five"`},
		{"quoted number", wf("    resiliency: {retry: {max_attempts: \"5\"}}\n"), "\"5\"", `max_attempts: want a whole number, got the string "5"`},
		{"zero attempts", wf("    resiliency: {retry: {max_attempts: 0}}\n"), "0}", "max_attempts: 0: want at least 1"},
		{"fractional number", wf("    resiliency: {max_iterations: 2.5}\n"), "2.5", `max_iterations: want a whole number, got "2.5"`},
		{"huge number", wf("    resiliency: {max_crashes: 99999999999999999999}\n"), "99999999999999999999}", "max_crashes: want a whole number"},
		{"multiplier below 1", wf("    resiliency: {retry: {multiplier: 0.5}}\n"), "0.5", "multiplier: 0.5: want a number of at least 1"},
		{"multiplier infinite", wf("    resiliency: {retry: {multiplier: .inf}}\n"), ".inf", "want a number of at least 1"},
		{"multiplier a string", wf("    resiliency: {retry: {multiplier: double}}\n"), "double", "multiplier: want a number"},
		{"bad backoff", wf("    resiliency: {retry: {backoff: quadratic}}\n"), "quadratic", `backoff: "quadratic" is not one of exponential, linear, fixed`},
		{"bad jitter", wf("    resiliency: {retry: {jitter: some}}\n"), "some", `jitter: "some" is not one of none, full, equal`},
		{"bad unknown_errors", wf("    resiliency: {retry: {unknown_errors: retry}}\n"), "retry}}", `unknown_errors: "retry" is not one of transient, permanent`},
		{"codes not a list", wf("    resiliency: {retry: {non_retryable_codes: http_409}}\n"), "http_409", "non_retryable_codes: want a list"},
		{"duplicate code", wf("    resiliency: {retry: {non_retryable_codes: [a, b, a]}}\n"), "a]", `non_retryable_codes: "a" is listed twice`},
		{"empty code", wf("    resiliency: {retry: {non_retryable_codes: ['']}}\n"), "'']", "non_retryable_codes: empty code"},
		{"max below initial", wf("    resiliency: {retry: {initial_delay: 10s, max_delay: 5s}}\n"), "5s}", "max_delay: 5s is shorter than initial_delay 10s"},
		{"initial above the defaults' max", wf("    resiliency: {retry: {initial_delay: 1m}}\n"), "{retry",
			"resiliency: with the worker's defaults: max_interval 30s is shorter than initial_interval 1m0s"},

		// Steps.
		{"step is a string", step("      - fetch\n"), "fetch", `step 1: want a mapping (key: value), got the string "fetch"`},
		{"missing name", step("      - type: http\n" + ok), "type: http", "step 1: missing key name"},
		{"step name with dash", step("      - name: send-mail\n        type: http\n" + ok), "send-mail", `step 1: name "send-mail" must be 1-64 letters, digits, '.' or '_'`},
		{"step name a list", step("      - name: [a]\n        type: http\n" + ok), "[a]", "step 1: name: want a value, got a list"},
		{"duplicate step", step("      - {name: a, type: http, with: {method: GET, url: 'http://x'}}\n      - {name: a, type: http, with: {method: GET, url: 'http://x'}}\n"),
			"a, type: http, with", `duplicate step name "a" (first at line 4)`},
		{"unknown step key", step("      - name: a\n        type: http\n        optinal: true\n" + ok), "optinal", `step "a": unknown key "optinal" (did you mean "optional"?)`},
		{"missing type", step("      - name: a\n" + ok), "name: a", `step "a": missing key type (want one of await, http, sleep)`},
		{"unknown type", step("      - name: a\n        type: grpc\n" + ok), "grpc", `step "a": unknown step type "grpc" (want one of await, http, sleep)`},
		{"optional not a bool", step("      - name: a\n        type: http\n        optional: maybe\n" + ok), "maybe", `optional: want true or false, got the string "maybe"`},
		{"step timeout", step("      - name: a\n        type: http\n        timeout: 1d\n" + ok), "1d", `timeout: "1d" is not a duration`},
		{"step total", step("      - name: a\n        type: http\n        timeouts: {total: soon}\n" + ok), "soon", `timeouts.total: "soon" is not a duration`},
		{"step timeout twice", step("      - name: a\n        type: http\n        timeout: 1s\n        timeouts: {step: 2s}\n" + ok), "2s", "timeouts.step and timeout both set"},
		{"step max_iterations", step("      - name: a\n        type: http\n        max_iterations: -1\n" + ok), "-1", "max_iterations"},
		{"step max_crashes", step("      - name: a\n        type: http\n        max_crashes: -1\n" + ok), "-1", "max_crashes: -1: want at least 1"},
		{"step retry", step("      - name: a\n        type: http\n        retry: {max_attempts: 0}\n" + ok), "0}", `step "a": retry.max_attempts: 0: want at least 1`},
		{"step retry run-level key", step("      - name: a\n        type: http\n        retry: {max_iterations: 3}\n" + ok), "max_iterations", `retry: unknown key "max_iterations"`},
		{"step initial above workflow max", "workflows:\n  w:\n    resiliency: {retry: {max_delay: 2s}}\n    steps:\n      - name: a\n        type: http\n        retry: {initial_delay: 5s}\n" + ok,
			"{initial_delay", `step "a": with the workflow's and the worker's settings: max_interval 2s is shorter than initial_interval 5s`},

		// The http step.
		{"missing with", step("      - name: a\n        type: http\n"), "http\n", `step "a": with: missing (an http step needs at least method and url)`},
		{"with is a string", step("      - name: a\n        type: http\n        with: GET http://x\n"), "GET http://x", "with: want a mapping"},
		{"missing url", step("      - name: a\n        type: http\n        with: {method: GET}\n"), "{method: GET}", `step "a": with.url: missing`},
		{"missing method", step("      - name: a\n        type: http\n        with:\n          url: http://x\n"), "url: http://x", `step "a": with.method: missing`},
		{"unknown with key", step("      - name: a\n        type: http\n        with: {method: GET, url: 'http://x', timeout: 5s}\n"), "timeout", `with: unknown key "timeout"`},
		{"bad constant url", step("      - name: a\n        type: http\n        with: {method: GET, url: 'ftp://x'}\n"), "'ftp://x'", `with.url: "ftp://x": want an http:// or https:// URL`},
		{"bad constant method", step("      - name: a\n        type: http\n        with: {method: 'GE T', url: 'http://x'}\n"), "'GE T'", `with.method: "GE T" is not an HTTP method`},
		{"url template", step("      - name: a\n        type: http\n        with: {method: GET, url: 'http://x/{{.input.id'}\n"), "'http://x/{{.input.id'", "with.url: template: url:1: unclosed action"},
		{"body template", step("      - name: a\n        type: http\n        with:\n          method: POST\n          url: http://x\n          body: |\n            {\n              \"a\": {{json .input.a}\n            }\n"),
			"|", "with.body: template: body:2: "},
		{"header template", step("      - name: a\n        type: http\n        with: {method: GET, url: 'http://x', headers: {X-A: '{{if}}'}}\n"), "'{{if}}'", "with.headers.X-A: template: headers.X-A:1: missing value for if"},
		{"unknown function", step("      - name: a\n        type: http\n        with: {method: GET, url: 'http://x/{{toJSON .input}}'}\n"), "'http://x/{{toJSON", `function "toJSON" not defined`},
		{"later step read", step("      - name: a\n        type: http\n        with: {method: GET, url: 'http://x/{{.steps.b.body.id}}'}\n      - {name: b, type: http, with: {method: GET, url: 'http://x'}}\n"),
			"'http://x/{{.steps.b", `with.url: reads .steps.b, but "b" is not an earlier step`},
		{"own output read", step("      - name: a\n        type: http\n        with: {method: GET, url: 'http://x/{{.steps.a.status}}'}\n"), "'http://x/{{.steps.a", `"a" is not an earlier step`},
		{"body a mapping", step("      - name: a\n        type: http\n        with: {method: POST, url: 'http://x', body: {a: 1}}\n"), "{a: 1}", "with.body: want a string, got a mapping (a template: to send JSON"},
		{"headers a list", step("      - name: a\n        type: http\n        with: {method: GET, url: 'http://x', headers: [a]}\n"), "[a]", "with.headers: want a mapping"},
		{"bad header name", step("      - name: a\n        type: http\n        with: {method: GET, url: 'http://x', headers: {'X A': b}}\n"), "'X A'", `with.headers.X A: "X A" is not a valid header name`},

		// Where the http step may go.
		{"host-templated url", step("      - name: a\n        type: http\n        with: {method: GET, url: 'https://{{.input.host}}/x'}\n"),
			"'https://{{.input.host}}", `step "a": with.url: {{.input.host}} renders into the scheme, userinfo, host or port: run input must not choose where the request goes`},
		{"url path glued to the host", step("      - name: a\n        type: http\n        with:\n          method: GET\n          url: https://api.internal{{.input.path}}\n"),
			"https://api.internal", `with.url: {{.input.path}} renders into the scheme, userinfo, host or port`},
		{"whole url templated", step("      - name: a\n        type: http\n        with: {method: GET, url: '{{.input.url}}'}\n"),
			"'{{.input.url}}'", "list the hosts the step may reach in allowed_hosts"},
		{"step turns the workflow's hosts off", "workflows:\n  w:\n    allowed_hosts: [api.example.com]\n    steps:\n      - name: a\n        type: http\n        allowed_hosts: []\n        with: {method: GET, url: 'https://{{.input.host}}/x'}\n",
			"'https://{{.input.host}}", "with.url: {{.input.host}} renders into"},
		{"allowed_hosts not a list", wf("    allowed_hosts: api.example.com\n"), "api.example.com", `workflow "w": allowed_hosts: want a list of hosts`},
		{"allowed_hosts a URL", wf("    allowed_hosts: [api.example.com, 'https://api.example.com/']\n"), "'https://api.example.com/'",
			`workflow "w": allowed_hosts: "https://api.example.com/": want a host name like api.example.com or api.example.com:8443, not a URL`},
		{"allowed_hosts bad port", wf("    allowed_hosts:\n      - api.example.com:99999\n"), "api.example.com:99999", `port "99999": want a number from 1 to 65535`},
		{"allowed_hosts userinfo", wf("    allowed_hosts: ['user@api.example.com']\n"), "'user@", `'@' cannot be part of a host`},
		{"allowed_hosts bare IPv6", wf("    allowed_hosts: ['::1']\n"), "'::1'", "an IPv6 address must be in brackets"},
		{"allowed_hosts broad wildcard", wf("    allowed_hosts: ['*.com']\n"), "'*.com'", "a wildcard needs a domain of at least two labels"},
		{"allowed_hosts inner wildcard", wf("    allowed_hosts: ['api.*.com']\n"), "'api.*.com'", "is not a host name"},
		{"allowed_hosts numeric", wf("    allowed_hosts: ['127.1']\n"), "'127.1'", "neither a host name"},
		{"allowed_hosts unicode", wf("    allowed_hosts: [äpi.example.com]\n"), "äpi", "not ASCII"},
		{"allowed_hosts listed twice", wf("    allowed_hosts: [api.example.com, API.Example.com.]\n"), "API.Example", `"api.example.com" is listed twice (first at line 3)`},
		{"allowed_hosts a mapping entry", wf("    allowed_hosts: [{host: x}]\n"), "{host: x}", "allowed_hosts: want a value, got a mapping"},
		{"step allowed_hosts bad", step("      - name: a\n        type: http\n        allowed_hosts: ['api.example.com/x']\n" + ok), "'api.example.com/x'",
			`step "a": allowed_hosts: "api.example.com/x": '/' cannot be part of a host`},
		{"allowed_hosts misspelt", wf("    allowed_host: [a.example.com]\n"), "allowed_host:", `unknown key "allowed_host" (did you mean "allowed_hosts"?)`},
		//nolint:misspell // deliberate typo: the test checks the suggestion
		{"step allowed_hosts misspelt", step("      - name: a\n        type: http\n        alowed_hosts: [a.example.com]\n" + ok), "alowed_hosts",
			`step "a": unknown key "alowed_hosts" (did you mean "allowed_hosts"?)`},

		// Checkpoints: always after each step.
		{"checkpoint disabled", wf("    resiliency:\n      checkpoint: {enabled: false, interval: after_each_step}\n"), "false",
			"resiliency.checkpoint.enabled: false is not supported: Cairn always checkpoints after every step; it cannot be disabled"},
		{"checkpoint interval", wf("    resiliency:\n      checkpoint: {enabled: true, interval: every_5m}\n"), "every_5m",
			`resiliency.checkpoint.interval: "every_5m" is not supported: Cairn always checkpoints after every step; it cannot be disabled or made less frequent (remove the key or set it to after_each_step)`},
		{"checkpoint interval a duration", wf("    resiliency:\n      checkpoint:\n        interval: 30s\n"), "30s", `checkpoint.interval: "30s" is not supported`},
		{"checkpoint unknown key", wf("    resiliency:\n      checkpoint: {enabled: true, storage: redis}\n"), "storage",
			`resiliency.checkpoint: unknown key "storage" (want enabled, interval; Cairn always checkpoints after every step`},
		{"checkpoint misspelt key", wf("    resiliency:\n      checkpoint: {enable: true}\n"), "enable:",
			`resiliency.checkpoint: unknown key "enable" (did you mean "enabled"? Cairn always checkpoints after every step`},
		{"checkpoint enabled not a bool", wf("    resiliency:\n      checkpoint: {enabled: always}\n"), "always", `checkpoint.enabled: want true or false, got the string "always"`},
		{"checkpoint a scalar", wf("    resiliency:\n      checkpoint: true\n"), "true", "resiliency.checkpoint: want a mapping (key: value), got \"true\""},
		{"checkpoint misspelt", wf("    resiliency:\n      checkpoints: {enabled: true}\n"), "checkpoints", `unknown key "checkpoints" (did you mean "checkpoint"?)`},

		// Anchors and merge keys.
		{"merge of a scalar", wf("    resiliency:\n      retry: {<<: 3}\n"), "3}", "<< must merge a mapping"},
	}
}

// TestParseErrors checks each kind of problem: where it is reported
// (line:col) and what it says.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range parseErrorCases() {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defs, err := yamldef.Parse("f.yaml", []byte(tt.yaml), yamldef.Options{})
			if err == nil {
				t.Fatalf("Parse accepted:\n%s\n(%d definitions)", tt.yaml, len(defs))
			}
			if defs != nil {
				t.Errorf("Parse returned definitions with an error")
			}
			var list yamldef.ErrorList
			if !errors.As(err, &list) || !errors.Is(err, workflow.ErrInvalidDefinition) {
				t.Fatalf("error %v (%T) is not an ErrorList of invalid definitions", err, err)
			}
			prefix := "f.yaml:" + position(t, tt.yaml, tt.at) + " "
			for _, e := range list {
				if strings.HasPrefix(e.Error(), prefix) && strings.Contains(e.Error(), tt.msg) {
					return
				}
			}
			t.Errorf("no error starting %q and containing %q:\n%v", prefix, tt.msg, err)
		})
	}
}

// TestParseReportsEveryProblemInOrder: all problems, sorted by position,
// each on its own line.
func TestParseReportsEveryProblemInOrder(t *testing.T) {
	t.Parallel()
	_, err := yamldef.Parse("f.yaml", []byte(`workflows:
  b:
    steps:
      - {name: x, type: nope}
  a:
    resiliency: {retry: {jitter: sometimes, max_attempts: -2}}
    steps:
      - {name: y, type: http, with: {url: "http://x/{{"}}
`), yamldef.Options{})
	want := []string{
		`f.yaml:4:25: workflow "b": step "x": unknown step type "nope"`,
		`f.yaml:6:34: workflow "a": resiliency.retry.jitter: "sometimes" is not one of none, full, equal`,
		`f.yaml:6:59: workflow "a": resiliency.retry.max_attempts: -2: want at least 1`,
		`f.yaml:8:37: workflow "a": step "y": with.method: missing`,
		`f.yaml:8:43: workflow "a": step "y": with.url: template: url:1: unclosed action`,
	}
	lines := strings.Split(fmt.Sprint(err), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(lines), len(want), err)
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("problem %d:\n got %s\nwant %s...", i+1, lines[i], want[i])
		}
	}
}

func TestAnchorsAliasesAndMergeKeys(t *testing.T) {
	t.Parallel()
	// Top-level x- keys hold anchors.
	defs, err := yamldef.Parse("f.yaml", []byte(`x-retry: &retry {max_attempts: 7, initial_delay: 2s}
x-steps:
  - &get {name: s, type: http, with: {method: GET, url: "http://x"}}
workflows:
  a:
    resiliency: {retry: *retry}
    steps: [*get]
`), yamldef.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p := defs[0].Policy; p.MaxAttempts != 7 || p.InitialInterval != 2*time.Second || len(defs[0].Steps) != 1 {
		t.Errorf("a: %+v", defs[0])
	}
	if _, err := yamldef.Parse("f.yaml", []byte("y-retry: 1\nworkflows: {}\n"), yamldef.Options{}); err == nil ||
		!strings.Contains(err.Error(), `unknown key "y-retry"`) {
		t.Errorf("a top-level key without x- accepted: %v", err)
	}

	defs, err = yamldef.Parse("f.yaml", []byte(`workflows:
  a:
    resiliency:
      retry: &retry
        max_attempts: 7
        initial_delay: 2s
    steps:
      - &get {name: s, type: http, with: {method: GET, url: "http://x"}}
  b:
    resiliency:
      retry:
        <<: *retry
        max_attempts: 3
    steps: [*get]
`), yamldef.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p := defs[0].Policy; p.MaxAttempts != 7 || p.InitialInterval != 2*time.Second {
		t.Errorf("a: %+v", p)
	}
	if p := defs[1].Policy; p.MaxAttempts != 3 || p.InitialInterval != 2*time.Second {
		t.Errorf("b: merged policy %+v, want max_attempts 3 (explicit) and initial_delay 2s (merged)", p)
	}
	if len(defs[1].Steps) != 1 || defs[1].Steps[0].Name != "s" {
		t.Errorf("b: steps %+v, want the aliased step s", defs[1].Steps)
	}
}

func TestCustomStepTypes(t *testing.T) {
	t.Parallel()
	var got yamldef.StepSpec
	opts := yamldef.Options{StepTypes: map[string]yamldef.StepType{
		"echo": func(spec yamldef.StepSpec) (workflow.StepFunc, error) {
			got = spec
			var v struct {
				Say string `yaml:"say"`
			}
			if spec.With == nil {
				return nil, errors.New("needs with")
			}
			if err := spec.With.Decode(&v); err != nil || v.Say == "" {
				return nil, yamldef.NodeError(spec.With, "with.say: missing")
			}
			return func(context.Context, *workflow.StepContext) (any, error) { return v.Say, nil }, nil
		},
	}}
	defs, err := yamldef.Parse("f.yaml", []byte(`workflows:
  w:
    steps:
      - {name: first, type: http, with: {method: GET, url: "http://x"}}
      - {name: second, type: echo, with: {say: hi}}
`), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got.Workflow != "w" || got.Name != "second" || got.Index != 1 || fmt.Sprint(got.Earlier) != "[first]" ||
		got.With == nil || got.With.Kind != yaml.MappingNode {
		t.Errorf("StepSpec %+v", got)
	}
	out, err := defs[0].Steps[1].Run(context.Background(), &workflow.StepContext{})
	if out != "hi" || err != nil {
		t.Errorf("echo step returned %v, %v", out, err)
	}

	_, err = yamldef.Parse("f.yaml", []byte("workflows:\n  w:\n    steps:\n      - {name: a, type: echo, with: {shout: hi}}\n      - {name: b, type: echo}\n"), opts)
	want := []string{`f.yaml:4:37: workflow "w": step "a": with.say: missing`, `f.yaml:5:25: workflow "w": step "b": needs with`}
	if err == nil || strings.Join(strings.Split(err.Error(), "\n"), "|") != strings.Join(want, "|") {
		t.Errorf("custom type errors:\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
}

func TestDefaultsTakePartInTheCheck(t *testing.T) {
	t.Parallel()
	src := []byte("workflows:\n  w:\n    resiliency: {retry: {initial_delay: 1m}}\n    steps: [{name: s, type: http, with: {method: GET, url: 'http://x'}}]\n")
	if _, err := yamldef.Parse("f.yaml", src, yamldef.Options{}); err == nil {
		t.Error("initial_delay 1m accepted under the built-in 30s max_interval")
	}
	if _, err := yamldef.Parse("f.yaml", src, yamldef.Options{Defaults: workflow.Policy{MaxInterval: 5 * time.Minute}}); err != nil {
		t.Errorf("with a 5m default max_interval: %v", err)
	}
}

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		e    yamldef.Error
		want string
	}{
		{yamldef.Error{File: "f.yaml", Line: 3, Column: 7, Msg: "bad"}, "f.yaml:3:7: bad"},
		{yamldef.Error{File: "f.yaml", Line: 3, Msg: "bad"}, "f.yaml:3: bad"},
		{yamldef.Error{File: "f.yaml", Msg: "bad"}, "f.yaml: bad"},
		{yamldef.Error{Line: 2, Column: 1, Msg: "bad"}, ":2:1: bad"},
		{yamldef.Error{Msg: "bad"}, "bad"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("%+v.Error() = %q, want %q", tt.e, got, tt.want)
		}
	}
}

// position returns where the last occurrence of at starts in src, as
// "line:col:", or at's text after "@" ("@3:" is "3:", "@" is "").
func position(t *testing.T, src, at string) string {
	t.Helper()
	if lit, ok := strings.CutPrefix(at, "@"); ok {
		if lit == "" {
			return ""
		}
		if strings.HasSuffix(lit, ":") {
			return lit
		}
		return lit + ":"
	}
	i := strings.LastIndex(src, at)
	if i < 0 {
		t.Fatalf("%q does not occur in the test's YAML", at)
	}
	line := strings.Count(src[:i], "\n") + 1
	col := i - strings.LastIndex(src[:i], "\n")
	return fmt.Sprintf("%d:%d:", line, col)
}

// TestCheckpointBlock: the resiliency block of the requirements, verbatim,
// loads; its checkpoint settings are what Cairn always does.
func TestCheckpointBlock(t *testing.T) {
	t.Parallel()
	defs, err := yamldef.Parse("f.yaml", []byte(`workflows:
  w:
    resiliency:
      retry: {max_attempts: 3, backoff: exponential, initial_delay: 1s, max_delay: 30s}
      timeouts: {step: 5m, total: 1h}
      checkpoint: {enabled: true, interval: after_each_step}
    steps: [{name: s, type: http, with: {method: GET, url: 'http://x'}}]
`), yamldef.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := workflow.Policy{MaxAttempts: 3, Backoff: workflow.BackoffExponential, InitialInterval: time.Second,
		MaxInterval: 30 * time.Second, StepTimeout: 5 * time.Minute, RunTimeout: time.Hour}
	if !defs[0].Policy.Equal(want) {
		t.Errorf("policy %+v, want %+v", defs[0].Policy, want)
	}
	// Either key may be left out: they are the defaults.
	for _, block := range []string{"{enabled: true}", "{interval: after_each_step}", "{}", "",
		"\n        enabled: true\n        interval: after_each_step"} {
		src := "workflows:\n  w:\n    resiliency:\n      checkpoint: " + block + "\n    steps: [{name: s, type: http, with: {method: GET, url: 'http://x'}}]\n"
		if _, err := yamldef.Parse("f.yaml", []byte(src), yamldef.Options{}); err != nil {
			t.Errorf("checkpoint: %s: %v", block, err)
		}
	}
}
