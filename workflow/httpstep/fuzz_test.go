package httpstep_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/httpstep"
)

// FuzzRender parses arbitrary templates and renders them with arbitrary run
// input (also as the output of an earlier step): nothing may panic, output
// stays within MaxRenderBytes, and every rendering error wraps ErrRender.
// As the path of a step's URL after a literal host, the template never
// sends the request to another scheme, host or port, nor with userinfo;
// as a value in the path, the query and the fragment, the text comes back
// whole from each.
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
		{`users/{{.input}}?q={{.input}}#{{.input}}`, `"@evil.com:6379/x?y#z"`},
		{`{{if .input}}?a={{end}}{{.input}}`, `"a&b=c"`},
		{`{{range .input}}{{.}}/{{end}}`, `["..", "%2e", "\\evil", "a\r\nb"]`},
		{`{{.input | urlquery}}`, `"a b/c"`},
		{`..`, `{}`},
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
		checkURLStaysOnHost(t, src, input)
		checkURLEscaping(t, src)
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

// stubTransport answers every request with an empty 200, recording it.
type stubTransport struct{ reqs []*http.Request }

func (s *stubTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s.reqs = append(s.reqs, req)
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")),
		Request: req}, nil
}

// checkURLStaysOnHost: src after https://api.example.com/ is a URL template
// New accepts without AllowedHosts, or refuses; the request it makes goes
// to https://api.example.com, without userinfo.
func checkURLStaysOnHost(t *testing.T, src string, input []byte) {
	t.Helper()
	var tr stubTransport
	step, err := httpstep.New(httpstep.Spec{Method: "GET", URL: "https://api.example.com/" + src, Steps: []string{"fetch"}},
		httpstep.Options{Client: &http.Client{Transport: &tr}})
	if err != nil {
		return
	}
	a := httpstep.Attempt{RunID: "r", Workflow: "w", Step: "s", Attempt: 1, Input: json.RawMessage(input),
		Outputs: map[string]json.RawMessage{"fetch": json.RawMessage(input)}}
	_, err = step.Do(context.Background(), a)
	for _, req := range tr.reqs {
		if u := req.URL; u.Scheme != "https" || u.Host != "api.example.com" || u.User != nil {
			t.Fatalf("template %q with input %q sent a request to %s", src, input, u)
		}
	}
	if len(tr.reqs) == 0 && err == nil {
		t.Fatalf("template %q with input %q: no request and no error", src, input)
	}
	if code := workflow.Code(err); code == httpstep.CodeHostNotAllowed {
		t.Fatalf("template %q with input %q: a URL with a literal host rendered another: %v", src, input, err)
	}
}

// checkURLEscaping: v, rendered into a path segment, a query value and the
// fragment, comes back whole from each (or is refused: "." and "..").
func checkURLEscaping(t *testing.T, v string) {
	t.Helper()
	in, _ := json.Marshal(map[string]string{"v": v})
	var decoded struct {
		V string `json:"v"`
	}
	if err := json.Unmarshal(in, &decoded); err != nil {
		t.Fatal(err)
	}
	v = decoded.V // invalid UTF-8 became U+FFFD
	var tr stubTransport
	step, err := httpstep.New(httpstep.Spec{Method: "GET", URL: "https://api.example.com/p/{{.input.v}}/x?q={{.input.v}}&n=1#{{.input.v}}"},
		httpstep.Options{Client: &http.Client{Transport: &tr}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = step.Do(context.Background(), httpstep.Attempt{Input: in})
	if err != nil {
		if (v == "." || v == "..") && workflow.Code(err) == httpstep.CodeInvalidURL {
			return
		}
		t.Fatalf("value %q: %v", v, err)
	}
	u := tr.reqs[0].URL
	q, err := url.ParseQuery(u.RawQuery)
	if u.Host != "api.example.com" || u.Path != "/p/"+v+"/x" || err != nil || len(q) != 2 || q.Get("q") != v ||
		q.Get("n") != "1" || u.Fragment != v {
		t.Fatalf("value %q: sent %s (path %q, query %v, fragment %q)", v, u, u.Path, q, u.Fragment)
	}
	if seg := strings.Split(u.EscapedPath(), "/"); len(seg) != 4 {
		t.Fatalf("value %q: path %s is not 3 segments", v, u.EscapedPath())
	}
}
