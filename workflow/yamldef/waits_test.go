package yamldef_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/yamldef"
)

const waitsFile = `workflows:
  approve:
    steps:
      - {name: ask, type: http, with: {method: POST, url: "https://example.com/ask"}}
      - name: approval
        type: await
        with: {signal: approved, timeout: 48h}
      - name: cool_off
        type: sleep
        with: {duration: 10m}
      - name: later
        type: sleep
        with: {until: "{{.input.send_at}}"}
      - name: fixed
        type: sleep
        with: {until: "2030-01-02T15:04:05Z"}
`

func TestParseAwaitAndSleep(t *testing.T) {
	t.Parallel()
	defs, err := yamldef.Parse("w.yaml", []byte(waitsFile), yamldef.Options{})
	if err != nil {
		t.Fatal(err)
	}
	steps := defs[0].Steps
	if a := steps[1].Await; a == nil || a.Signal != "approved" || a.Timeout != 48*time.Hour || steps[1].Run != nil {
		t.Errorf("await: %+v", steps[1])
	}
	if s := steps[2].Sleep; s == nil || s.For != 10*time.Minute || s.Until != nil {
		t.Errorf("sleep: %+v", steps[2])
	}
	s := steps[3].Sleep
	if s == nil || s.Until == nil {
		t.Fatalf("sleep until: %+v", steps[3])
	}
	sc := &workflow.StepContext{Input: json.RawMessage(`{"send_at":"2031-05-06T07:08:09Z"}`)}
	if got, err := s.Until(sc); err != nil || !got.Equal(time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)) {
		t.Errorf("until: %s %v", got, err)
	}
	if _, err := s.Until(&workflow.StepContext{Input: json.RawMessage(`{"send_at":"tomorrow"}`)}); err == nil ||
		!strings.Contains(err.Error(), "RFC 3339") {
		t.Errorf("until of a bad time: %v", err)
	}
	if err := defs[0].Validate(); err != nil {
		t.Errorf("validate: %v", err)
	}
}

// waitErrorCases are the steps of TestParseWaitErrors (and, for the
// schema, of TestSchemaRejectsStructuralErrors): each in a workflow of its
// own (waitFile), the loader refuses, saying want.
func waitErrorCases() []struct{ step, want string } {
	return []struct{ step, want string }{
		{`{name: s, type: await}`, "needs a with mapping"},
		{`{name: s, type: await, with: {timeout: 1h}}`, "missing key signal"},
		{`{name: s, type: await, with: {signal: go}}`, "missing key timeout"},
		{`{name: s, type: await, with: {signal: go-on, timeout: 1h}}`, "a signal name must be"},
		{`{name: s, type: await, with: {signal: go, timeout: 1h, extra: 1}}`, "extra"},
		{`{name: s, type: sleep, with: {}}`, "want duration"},
		{`{name: s, type: sleep, with: {duration: 1m, until: "2030-01-01T00:00:00Z"}}`, "keep one"},
		{`{name: s, type: sleep, with: {duration: 0s}}`, "positive"},
		{`{name: s, type: sleep, with: {until: "soon"}}`, "RFC 3339"},
		{`{name: s, type: sleep, with: {until: "{{.steps.nope.at}}"}}`, "not an earlier step"},
		{`{name: s, type: await, with: {signal: go, timeout: 9000h}}`, "longer than"},
	}
}

// waitFile is a file of one workflow whose one step is step.
func waitFile(step string) string { return "workflows:\n  w:\n    steps:\n      - " + step + "\n" }

func TestParseWaitErrors(t *testing.T) {
	t.Parallel()
	for _, c := range waitErrorCases() {
		src := waitFile(c.step)
		_, err := yamldef.Parse("w.yaml", []byte(src), yamldef.Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.step, err, c.want)
		}
	}
}
