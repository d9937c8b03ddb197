package yamldef_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/yamldef"
)

// TestAllowedHostsPrecedence: a step's allowed_hosts replaces its
// workflow's; without one the step has the workflow's. Each decides where
// a host-templated URL may go.
func TestAllowedHostsPrecedence(t *testing.T) {
	t.Parallel()
	var hitsA, hitsB atomic.Int64
	a := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hitsA.Add(1) }))
	defer a.Close()
	b := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hitsB.Add(1) }))
	defer b.Close()
	hostA, hostB := strings.TrimPrefix(a.URL, "http://"), strings.TrimPrefix(b.URL, "http://")

	var specs []yamldef.StepSpec
	defs, err := yamldef.Parse("f.yaml", []byte(fmt.Sprintf(`workflows:
  w:
    allowed_hosts: ['%s']
    steps:
      - {name: inherits, type: http, with: {method: GET, url: 'http://{{.input.host}}/x'}}
      - {name: replaces, type: http, allowed_hosts: ['%s'], with: {method: GET, url: 'http://{{.input.host}}/x'}}
      - {name: custom, type: record}
  v:
    steps:
      - {name: none, type: record}
      - {name: empty, type: record, allowed_hosts: []}
`, hostA, hostB)), yamldef.Options{StepTypes: map[string]yamldef.StepType{
		"record": func(spec yamldef.StepSpec) (workflow.StepFunc, error) {
			specs = append(specs, spec)
			return func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }, nil
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	run := func(step workflow.Step, host string) error {
		in, _ := json.Marshal(map[string]string{"host": host})
		_, err := step.Run(context.Background(), &workflow.StepContext{RunID: "r", Step: step.Name, Attempt: 1, Input: in})
		return err
	}
	inherits, replaces := defs[0].Steps[0], defs[0].Steps[1]
	if err := run(inherits, hostA); err != nil || hitsA.Load() != 1 {
		t.Errorf("inherits -> A: %v, %d requests", err, hitsA.Load())
	}
	if err := run(inherits, hostB); workflow.Code(err) != "http_host_not_allowed" || !workflow.IsPermanent(err) {
		t.Errorf("inherits -> B: %v, want a permanent http_host_not_allowed", err)
	}
	if err := run(replaces, hostB); err != nil || hitsB.Load() != 1 {
		t.Errorf("replaces -> B: %v, %d requests", err, hitsB.Load())
	}
	if err := run(replaces, hostA); workflow.Code(err) != "http_host_not_allowed" || hitsA.Load() != 1 {
		t.Errorf("replaces -> A: %v, want http_host_not_allowed (A got %d requests, want 1)", err, hitsA.Load())
	}
	if hitsB.Load() != 1 {
		t.Errorf("B got %d requests, want 1", hitsB.Load())
	}

	// Other step types get the list too, in canonical form.
	if len(specs) != 3 {
		t.Fatalf("%d record steps built, want 3", len(specs))
	}
	if got := specs[0].AllowedHosts; len(got) != 1 || got[0] != hostA {
		t.Errorf("custom: AllowedHosts %q, want the workflow's [%s]", got, hostA)
	}
	if got := specs[1].AllowedHosts; got != nil {
		t.Errorf("none: AllowedHosts %q, want nil", got)
	}
	if got := specs[2].AllowedHosts; got == nil || len(got) != 0 {
		t.Errorf("empty: AllowedHosts %#v, want empty and not nil", got)
	}
}

// TestAllowedHostsCanonical: entries are checked and written canonically.
func TestAllowedHostsCanonical(t *testing.T) {
	t.Parallel()
	var got []string
	_, err := yamldef.Parse("f.yaml", []byte(`workflows:
  w:
    allowed_hosts: [API.Example.COM., '*.svc.example.net:8443', '[2001:0db8::1]:80', 10.0.0.1]
    steps: [{name: s, type: record}]
`), yamldef.Options{StepTypes: map[string]yamldef.StepType{
		"record": func(spec yamldef.StepSpec) (workflow.StepFunc, error) {
			got = spec.AllowedHosts
			return func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }, nil
		},
	}})
	if want := "[api.example.com *.svc.example.net:8443 [2001:db8::1]:80 10.0.0.1]"; err != nil || fmt.Sprint(got) != want {
		t.Errorf("AllowedHosts %v, %v; want %s", got, err, want)
	}
}
