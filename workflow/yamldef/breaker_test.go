package yamldef_test

import (
	"context"
	"fmt"
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

// breakerName returns the name of a step's circuit breaker ("" for none).
func breakerName(s workflow.Step) string {
	if s.Policy.CircuitBreaker == nil {
		return ""
	}
	return s.Policy.CircuitBreaker.Name
}

// TestBreakerDefaultsToTheTargetHost: a circuit_breaker without a name on
// an http step, its own or its workflow's, is named after the host the
// step calls, so that two steps calling two hosts get two breakers; the
// rest of the breaker (threshold, cooldown) is the one written. A named
// breaker keeps its name; an await or a sleep inherits no nameless
// breaker.
func TestBreakerDefaultsToTheTargetHost(t *testing.T) {
	t.Parallel()
	defs, err := yamldef.Parse("f.yaml", []byte(`workflows:
  w:
    resiliency:
      circuit_breaker: {failure_threshold: 3, cooldown: 20s}
    steps:
      - {name: charge, type: http, with: {method: POST, url: "https://Pay.Example.com/charges"}}
      - {name: user, type: http, with: {method: GET, url: "https://users.example.com:8443/u/{{.input.id}}"}}
      - {name: refund, type: http, with: {method: POST, url: "https://pay.example.com:443/refunds?id={{.input.id}}"}}
      - {name: pause, type: sleep, with: {duration: 1m}}
      - name: own
        type: http
        circuit_breaker: {window: 10s}
        with: {method: GET, url: "http://10.0.0.7:8080/x"}
      - name: named
        type: http
        circuit_breaker: {name: billing}
        with: {method: GET, url: "https://pay.example.com/x"}
  plain:
    steps:
      - {name: a, type: http, with: {method: GET, url: "https://a.example.com/"}}
`), yamldef.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := defs[0]
	want := map[string]string{"charge": "pay.example.com", "user": "users.example.com:8443",
		"refund": "pay.example.com", "pause": "", "own": "10.0.0.7:8080", "named": "billing"}
	for _, s := range d.Steps {
		if got := breakerName(s); got != want[s.Name] {
			t.Errorf("step %s: breaker %q, want %q", s.Name, got, want[s.Name])
		}
	}
	inherited := workflow.CircuitBreaker{Name: "pay.example.com", FailureThreshold: 3, Cooldown: 20 * time.Second}
	if cb := d.Steps[0].Policy.CircuitBreaker; cb == nil || *cb != inherited {
		t.Errorf("charge: breaker %+v, want %+v", cb, inherited)
	}
	if cb := d.Steps[4].Policy.CircuitBreaker; cb == nil || *cb != (workflow.CircuitBreaker{Name: "10.0.0.7:8080", Window: 10 * time.Second}) {
		t.Errorf("own: breaker %+v, want its own window and no threshold", cb)
	}
	// Each step now has its own breaker: the workflow keeps no nameless
	// one, which its waits would inherit and Validate refuse.
	if d.Policy.CircuitBreaker != nil {
		t.Errorf("workflow policy keeps the nameless breaker %+v", d.Policy.CircuitBreaker)
	}
	if err := d.Validate(); err != nil {
		t.Error(err)
	}
	if cb := defs[1].Steps[0].Policy.CircuitBreaker; cb != nil {
		t.Errorf("a step without any breaker got %+v", cb)
	}
}

// TestBreakerDefaultFromTheWorkerDefaults: a nameless breaker of the
// worker's defaults is named per http step too.
func TestBreakerDefaultFromTheWorkerDefaults(t *testing.T) {
	t.Parallel()
	defs, err := yamldef.Parse("f.yaml", []byte(`workflows:
  w:
    steps:
      - {name: a, type: http, with: {method: GET, url: "https://a.example.com/"}}
      - {name: b, type: http, with: {method: GET, url: "https://b.example.com/"}}
`), yamldef.Options{Defaults: workflow.Policy{CircuitBreaker: &workflow.CircuitBreaker{FailureThreshold: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := breakerName(defs[0].Steps[0]), breakerName(defs[0].Steps[1]); a != "a.example.com" || b != "b.example.com" {
		t.Errorf("breakers %q and %q, want a.example.com and b.example.com", a, b)
	}
}

// TestNamelessBreakerOnOtherStepTypes: only http steps default the name.
// A nameless breaker a step of another type inherits is reported at its
// type, naming the step and where the breaker is; the same on a
// replaced http step type.
func TestNamelessBreakerOnOtherStepTypes(t *testing.T) {
	t.Parallel()
	body := func(yamldef.StepSpec) (workflow.StepFunc, error) {
		return func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }, nil
	}
	src := `workflows:
  w:
    resiliency: {circuit_breaker: {cooldown: 5s}}
    steps:
      - {name: fetch, type: http, with: {method: GET, url: "https://a.example.com/"}}
      - {name: work, type: record}
`
	_, err := yamldef.Parse("f.yaml", []byte(src), yamldef.Options{StepTypes: map[string]yamldef.StepType{"record": body}})
	want := `f.yaml:6:28: workflow "w": step "work": the workflow's circuit_breaker (line 3) has no name, and only http ` +
		`steps default it to the target host: name that breaker, or give this step a circuit_breaker with a name`
	if err == nil || err.Error() != want {
		t.Errorf("inherited by a custom step:\n got %v\nwant %s", err, want)
	}

	// The same step with a named breaker of its own is fine; the http
	// step still gets its host's.
	defs, err := yamldef.Parse("f.yaml", []byte(strings.Replace(src, "type: record}",
		"type: record, circuit_breaker: {name: worker}}", 1)), yamldef.Options{StepTypes: map[string]yamldef.StepType{"record": body}})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := breakerName(defs[0].Steps[0]), breakerName(defs[0].Steps[1]); a != "a.example.com" || b != "worker" {
		t.Errorf("breakers %q and %q, want a.example.com and worker", a, b)
	}

	_, err = yamldef.Parse("f.yaml", []byte(`workflows:
  w:
    steps:
      - name: fetch
        type: http
        circuit_breaker: {cooldown: 5s}
        with: {method: GET, url: "https://a.example.com/"}
`), yamldef.Options{StepTypes: map[string]yamldef.StepType{"http": body}})
	want = `f.yaml:6:26: workflow "w": step "fetch": circuit_breaker: name is required (only the built-in http step defaults it to the target host)`
	if err == nil || err.Error() != want {
		t.Errorf("replaced http step:\n got %v\nwant %s", err, want)
	}
}

// TestBreakerPerHostEndToEnd: a run of a workflow whose nameless breaker
// covers steps calling two hosts carries one breaker per host. Each host
// fails its first request, which opens the breaker of that host alone
// (threshold 1); the retry, deferred or not (that depends on when the
// retry's task comes), closes it. The third step calls the first host
// again, under the same breaker.
func TestBreakerPerHostEndToEnd(t *testing.T) {
	t.Parallel()
	newServer := func() *httptest.Server {
		var mu sync.Mutex
		failed := false
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if !failed {
				failed = true
				http.Error(w, "busy", http.StatusServiceUnavailable)
			}
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	a, b := newServer(), newServer()
	hostA, hostB := strings.TrimPrefix(a.URL, "http://"), strings.TrimPrefix(b.URL, "http://")

	h := startWorker(t, "workflows.yaml", fmt.Sprintf(`workflows:
  two-hosts:
    resiliency:
      retry: {max_attempts: 3, initial_delay: 10ms, jitter: none}
      circuit_breaker: {failure_threshold: 1, cooldown: 200ms}
    steps:
      - {name: a, type: http, with: {method: GET, url: "%[1]s/a"}}
      - {name: b, type: http, with: {method: GET, url: "%[2]s/b"}}
      - {name: again, type: http, with: {method: GET, url: "%[1]s/again"}}
`, a.URL, b.URL))
	run := h.run("two-hosts", nil, 30*time.Second)
	if run.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s: %s", run.Status, run.FailureReason)
	}
	want := map[string]string{"a": hostA, "b": hostB, "again": hostA}
	for _, ev := range h.events(run.ID) {
		if ev.Type == "attempt_deferred" && ev.Details["breaker"] != want[ev.Step] {
			t.Errorf("step %s deferred by breaker %q, want %q", ev.Step, ev.Details["breaker"], want[ev.Step])
		}
	}
	bs, err := h.client.Breakers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, br := range bs {
		names = append(names, br.Name)
		if br.Opened != 1 || br.State != "closed" {
			t.Errorf("breaker %s: opened %d, state %s; want opened once, closed", br.Name, br.Opened, br.State)
		}
	}
	slices.Sort(names)
	if want := []string{hostA, hostB}; !slices.Equal(names, slices.Sorted(slices.Values(want))) {
		t.Errorf("breakers %q, want %q", names, want)
	}
}
