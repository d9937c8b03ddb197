package httpstep_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow/httpstep"
)

// FuzzRender parses arbitrary templates and renders them with arbitrary run
// input (also as the output of an earlier step): nothing may panic, output
// stays within MaxRenderBytes, and every rendering error wraps ErrRender.
func FuzzRender(f *testing.F) {
	for _, seed := range []struct{ tmpl, input string }{
		{"https://billing.internal/invoices?since={{.input.since}}", `{"since":"2024-01-01"}`},
		{`{{json .steps.fetch.body}}`, `{"body":{"a":[1,2,{"b":null}]}}`},
		{`{{.steps.fetch.status}} {{index .steps.fetch.headers "content-type"}}`, `{"status":200,"headers":{"content-type":"x"}}`},
		{`{{range $i, $v := .input.items}}{{$i}}={{json $v}};{{end}}`, `{"items":[1,"two",3.5e10]}`},
		{`{{if eq .input.kind "a"}}A{{else if .input.x}}X{{else}}-{{end}}`, `{"kind":"b","x":true}`},
		{`{{with .input.user}}{{.name | printf "%q"}}{{end}} {{.run_id}}:{{.step}}:{{.attempt}}`, `{"user":{"name":"ü\u0000"}}`},
		{`{{index .input 3}} {{slice .input.s 1 2}} {{len .input}}`, `[1,2]`},
		{`{{.input.missing}}`, `null`},
		{`{{printf "%v %d" .input .attempt}}{{urlquery .input}}{{html .input}}{{js .input}}`, `"<&>"`},
		{`{{- /* a comment */ -}} constant`, `{}`},
		{`{{define "x"}}{{end}}`, `{}`},
		{`{{$x := .input}}{{$x = 5}}{{$x}}`, `1e400`},
		{`{{break}}{{continue}}`, `{}`},
	} {
		f.Add(seed.tmpl, []byte(seed.input))
	}
	f.Fuzz(func(t *testing.T, src string, input []byte) {
		// Loops multiply: keep each case to at most one range, not over
		// numbers (a template author's nested ranges over big data are
		// theirs to bound; run input cannot make a number to range over).
		if len(src) > 512 || len(input) > 1024 || strings.Count(src, "range") > 1 ||
			(strings.Contains(src, "range") && strings.ContainsAny(src, "0123456789")) {
			t.Skip()
		}
		// A hang would stall the fuzzer silently; crash instead, so that
		// the input is saved.
		watchdog := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("ran 10s on %q, %q", src, input)) })
		defer watchdog.Stop()
		tm, err := httpstep.ParseTemplate("body", src)
		if err != nil {
			return
		}
		_ = tm.StepRefs()
		a := httpstep.Attempt{RunID: "r", Workflow: "w", Step: "s", Attempt: 1, Input: json.RawMessage(input),
			Outputs: map[string]json.RawMessage{"fetch": json.RawMessage(input)}}
		data, err := a.Data()
		if err != nil {
			data = nil
		}
		out, err := tm.Execute(data)
		if err != nil {
			if !errors.Is(err, httpstep.ErrRender) {
				t.Fatalf("Execute error %v does not wrap ErrRender", err)
			}
			return
		}
		if len(out) > httpstep.MaxRenderBytes {
			t.Fatalf("rendered %d bytes", len(out))
		}
		if tm.IsConstant() {
			if again, err := tm.Execute(nil); err != nil || again != out {
				t.Fatalf("constant template renders %q with data and %q, %v without", out, again, err)
			}
		}
	})
}
