package yamldef_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow/yamldef"
)

// FuzzParse feeds arbitrary files to the loader: it must not panic (the
// loader turns a panic into an error, which the target fails on), every
// problem must be an *Error of the file with a message, and whatever loads
// must be valid definitions.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		fullFile,
		"",
		"workflows: {}\n",
		"workflows:\n  w:\n    steps:\n      - {name: a, type: http, with: {method: GET, url: 'http://x/{{.input.a}}'}}\n",
		"x-r: &r {max_attempts: 2}\nworkflows:\n  w:\n    resiliency: {retry: {<<: *r, jitter: none}}\n    steps: [{name: a, type: http, with: {method: GET, url: 'http://x'}}]\n",
		"workflows:\n  w:\n    steps:\n      - &s {name: a, type: http, with: {method: GET, url: 'http://x'}}\n      - *s\n",
		"workflows:\n  w: [a,\n",
		"workflows: &a [*a]\n",
		"a: &a [*a, *a, *a]\nb: &b [*a, *a, *a]\nworkflows: [*b, *b]\n",
		"workflows:\n  w:\n    resiliency: {retry: {max_attempts: 0x10, multiplier: .nan, max_delay: 1e3s}}\n    steps: []\n",
		"workflows: {w: {steps: [{name: a, type: http, with: {method: '{{', url: '{{end}}', headers: {'': x}, body: !!binary aGk=}}]}}\n",
		"---\nworkflows: {}\n---\n",
		"workflows:\n  w:\n    allowed_hosts: [api.example.com, '*.svc.example.net:8443', '[::1]']\n    steps:\n      - {name: a, type: http, allowed_hosts: [], with: {method: GET, url: 'https://{{.input.h}}/x'}}\n",
		"workflows:\n  w:\n    resiliency: {checkpoint: {enabled: true, interval: after_each_step}}\n    steps: [{name: a, type: http, with: {method: GET, url: 'http://x'}}]\n",
		"workflows:\n  w:\n    steps:\n      - name: a\n        type: http\n        with:\n          method: POST\n          url: http://x\n          body: |\n            {{range .input.items}}{{json .}}{{end}}\n",
		fmt.Sprintf(sagaFile, "http://127.0.0.1:1"),
		"workflows:\n  w:\n    on_failure: compensate\n    groups: {g: {optional: true}, h: }\n    steps:\n      - {name: a, type: http, group: g, with: {method: GET, url: 'http://x'}, compensate: {type: http, retry: {max_attempts: 2}, with: {method: DELETE, url: 'http://x/{{.compensation.output.body.id}}'}}}\n      - {name: b, type: sleep, group: h, with: {duration: 1m}, compensate: {type: sleep}}\n      - {name: c, type: http, group: g, with: {method: GET, url: 'http://x'}}\n",
		"x-c: &c {type: http, name: n, compensate: *c, with: {method: GET, url: 'http://x/{{.steps.a.body}}'}}\nworkflows:\n  w:\n    resiliency: {circuit_breaker: {cooldown: 1s}}\n    steps: [{name: a, type: http, with: {method: GET, url: 'http://x'}, compensate: *c}]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A hang would stall the fuzzer silently; crash instead, so that
		// the input is saved.
		watchdog := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("Parse ran 10s on %q", data)) })
		defs, err := yamldef.Parse("f.yaml", data, yamldef.Options{})
		watchdog.Stop()
		if err != nil {
			var list yamldef.ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty ErrorList", err, err)
			}
			if defs != nil {
				t.Fatal("definitions returned with an error")
			}
			for _, e := range list {
				if e.File != "f.yaml" || e.Msg == "" || e.Line < 0 || e.Column < 0 {
					t.Fatalf("malformed error %+v", e)
				}
				if strings.Contains(e.Msg, "cannot parse the file: ") {
					t.Fatalf("the loader panicked: %v", e)
				}
			}
			return
		}
		if len(defs) == 0 {
			t.Fatal("no definitions and no error")
		}
		for _, d := range defs {
			if err := d.Validate(); err != nil {
				t.Fatalf("loaded an invalid definition: %v", err)
			}
		}
	})
}
