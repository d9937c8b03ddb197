package httpstep_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/httpstep"
)

// request is what a test server saw.
type request struct {
	method, path, query string
	uri                 string // as sent: escaped
	header              http.Header
	body                string
}

// recorder serves each request with handle and records it.
type recorder struct {
	mu   sync.Mutex
	reqs []request
}

func (r *recorder) server(t *testing.T, handle func(w http.ResponseWriter, req *http.Request)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, request{method: req.Method, path: req.URL.Path, query: req.URL.RawQuery,
			uri: req.RequestURI, header: req.Header.Clone(), body: string(b)})
		r.mu.Unlock()
		handle(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (r *recorder) all() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.reqs...)
}

func mustNew(t *testing.T, spec httpstep.Spec, opts httpstep.Options) *httpstep.Step {
	t.Helper()
	s, err := httpstep.New(spec, opts)
	if err != nil {
		t.Fatalf("New(%+v): %v", spec, err)
	}
	return s
}

func attempt(input string, outputs map[string]string) httpstep.Attempt {
	a := httpstep.Attempt{RunID: "01hzzzzzzzzzzzzzzzzzzzzzzz", Workflow: "sync-invoices", Step: "push", Attempt: 2,
		IdempotencyKey: "01hzzzzzzzzzzzzzzzzzzzzzzz:push:2", Input: json.RawMessage(input),
		Outputs: map[string]json.RawMessage{}}
	for k, v := range outputs {
		a.Outputs[k] = json.RawMessage(v)
	}
	return a
}

func TestRequestIsRenderedFromInputAndOutputs(t *testing.T) {
	t.Parallel()
	var rec recorder
	srv := rec.server(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id": 12345678901234567890, "ok": true, "items": [1, 2.5]}`)
	})
	s := mustNew(t, httpstep.Spec{
		Method: "post",
		URL:    srv.URL + "/invoices/{{.steps.fetch.body.customer}}?since={{.input.since | urlquery}}&n={{.input.n}}",
		Headers: map[string]string{
			"authorization": "Bearer {{.input.token}}",
			"X-Run":         "{{.run_id}}/{{.workflow}}/{{.step}}/{{.attempt}}",
		},
		Body:  `{"invoices": {{json .steps.fetch.body.invoices}}, "note": {{json .input.note}}}`,
		Steps: []string{"fetch"},
	}, httpstep.Options{})
	a := attempt(`{"since": "2024-01-01 00:00", "n": 10000000, "token": "t0k", "note": "<b>&"}`,
		map[string]string{"fetch": `{"status": 200, "body": {"customer": "c42", "invoices": [{"id": 1}, {"id": 2}]}}`})
	resp, err := s.Do(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	reqs := rec.all()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.method != "POST" || r.path != "/invoices/c42" || r.query != "since=2024-01-01+00%3A00&n=10000000" {
		t.Errorf("request %s %s?%s", r.method, r.path, r.query)
	}
	for name, want := range map[string]string{
		"Authorization":   "Bearer t0k",
		"X-Run":           "01hzzzzzzzzzzzzzzzzzzzzzzz/sync-invoices/push/2",
		"Idempotency-Key": "01hzzzzzzzzzzzzzzzzzzzzzzz:push:2",
		"Content-Type":    "application/json",
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	if want := `{"invoices": [{"id":1},{"id":2}], "note": "<b>&"}`; r.body != want {
		t.Errorf("body %s, want %s", r.body, want)
	}

	if resp.Status != http.StatusCreated || resp.Headers["x-multi"] != "a, b" ||
		resp.Headers["content-type"] != "application/json" {
		t.Errorf("response status %d headers %v", resp.Status, resp.Headers)
	}
	// The output is what the next step reads: numbers keep their digits.
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"body":{"id":12345678901234567890,"items":[1,2.5],"ok":true}`) {
		t.Errorf("output JSON %s", b)
	}
}

func TestRunIsAStepFunc(t *testing.T) {
	t.Parallel()
	var rec recorder
	srv := rec.server(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "plain text\n") })
	s := mustNew(t, httpstep.Spec{Method: "GET", URL: srv.URL + "/{{.input.x}}"}, httpstep.Options{})
	var fn workflow.StepFunc = s.Run
	out, err := fn(context.Background(), &workflow.StepContext{RunID: "r", Step: "s", Attempt: 1,
		IdempotencyKey: "r:s:1", Input: json.RawMessage(`{"x":"y"}`)})
	if err != nil {
		t.Fatal(err)
	}
	resp, ok := out.(*httpstep.Response)
	if !ok || resp.Status != 200 || resp.Body != "plain text\n" {
		t.Fatalf("output %#v, want a *Response with the text body", out)
	}
	if reqs := rec.all(); len(reqs) != 1 || reqs[0].path != "/y" || reqs[0].header.Get("Idempotency-Key") != "r:s:1" ||
		reqs[0].header.Get("Content-Type") != "" {
		t.Errorf("requests %+v", reqs)
	}
}

func TestExplicitHeadersWin(t *testing.T) {
	t.Parallel()
	var rec recorder
	srv := rec.server(t, func(http.ResponseWriter, *http.Request) {})
	s := mustNew(t, httpstep.Spec{Method: "PUT", URL: srv.URL, Body: "a=1",
		Headers: map[string]string{"Idempotency-Key": "mine-{{.attempt}}", "Content-Type": "application/x-www-form-urlencoded"}},
		httpstep.Options{})
	if _, err := s.Do(context.Background(), attempt(`{}`, nil)); err != nil {
		t.Fatal(err)
	}
	r := rec.all()[0]
	if r.header.Get("Idempotency-Key") != "mine-2" || r.header.Get("Content-Type") != "application/x-www-form-urlencoded" || r.body != "a=1" {
		t.Errorf("request headers %v body %q", r.header, r.body)
	}
	// A non-JSON body without Content-Type is sent as text.
	s = mustNew(t, httpstep.Spec{Method: "PUT", URL: srv.URL, Body: "hello"}, httpstep.Options{})
	if _, err := s.Do(context.Background(), attempt(`{}`, nil)); err != nil {
		t.Fatal(err)
	}
	if r := rec.all()[1]; r.header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("text body sent with Content-Type %q", r.header.Get("Content-Type"))
	}
}

// TestStatusClassification: 408, 429 and 5xx are transient, with
// Retry-After as the delay; other statuses are permanent with the body's
// first bytes; every status is the error's code.
func TestStatusClassification(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	long := strings.Repeat("x", 2000)
	tests := []struct {
		status     int
		retryAfter string
		body       string
		class      string
		delay      time.Duration // -1: none requested
		inError    string
	}{
		{400, "", `{"error":"bad field"}`, workflow.ClassPermanent, -1, `400 Bad Request: {"error":"bad field"}`},
		{404, "", long, workflow.ClassPermanent, -1, "404 Not Found: " + strings.Repeat("x", 512)},
		{409, "5", "conflict", workflow.ClassPermanent, -1, "409 Conflict: conflict"},
		{422, "", "", workflow.ClassPermanent, -1, "422 Unprocessable Entity"},
		{300, "", "", workflow.ClassPermanent, -1, "300 Multiple Choices"},
		{408, "", "", workflow.ClassTransient, -1, "408 Request Timeout"},
		{429, "2", "slow down", workflow.ClassTransient, 2 * time.Second, "429 Too Many Requests: slow down"},
		{429, "", "", workflow.ClassTransient, -1, "429"},
		{503, now.Add(90 * time.Second).Format(http.TimeFormat), "", workflow.ClassTransient, 90 * time.Second, "503"},
		{503, now.Add(-time.Minute).Format(http.TimeFormat), "", workflow.ClassTransient, 0, "503"},
		{503, "soon", "", workflow.ClassTransient, -1, "503 Service Unavailable"},
		{500, "99999999999999999999999", "", workflow.ClassTransient, time.Hour, "500"},
		{502, "", "", workflow.ClassTransient, -1, "502 Bad Gateway"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d_%s", tt.status, tt.retryAfter), func(t *testing.T) {
			t.Parallel()
			var rec recorder
			srv := rec.server(t, func(w http.ResponseWriter, _ *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			s := mustNew(t, httpstep.Spec{Method: "GET", URL: srv.URL + "/thing"},
				httpstep.Options{Now: func() time.Time { return now }})
			resp, err := s.Do(context.Background(), attempt(`{}`, nil))
			if err == nil || resp != nil {
				t.Fatalf("Do = %+v, %v; want an error", resp, err)
			}
			// UnknownPermanent: a transient class must come from the marking.
			if got := workflow.Classify(err, workflow.UnknownPermanent); got != tt.class {
				t.Errorf("class %s, want %s (%v)", got, tt.class, err)
			}
			if got, want := workflow.Code(err), fmt.Sprintf("http_%d", tt.status); got != want {
				t.Errorf("code %q, want %q", got, want)
			}
			d, ok := workflow.RetryDelayOf(err)
			if tt.delay < 0 && ok {
				t.Errorf("delay %s requested, want none", d)
			}
			if tt.delay >= 0 && (!ok || d != tt.delay) {
				t.Errorf("delay %s (requested %v), want %s", d, ok, tt.delay)
			}
			if !strings.Contains(err.Error(), "GET "+srv.URL+"/thing: "+tt.inError) {
				t.Errorf("error %q does not contain %q", err, tt.inError)
			}
			if len(err.Error()) > 700 {
				t.Errorf("error is %d bytes long", len(err.Error()))
			}
		})
	}
}

func TestTransportErrorsAreTransient(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close()
	s := mustNew(t, httpstep.Spec{Method: "GET", URL: closed}, httpstep.Options{})
	_, err = s.Do(context.Background(), attempt(`{}`, nil))
	if err == nil || workflow.Classify(err, workflow.UnknownPermanent) != workflow.ClassTransient {
		t.Errorf("refused connection: %v, want a transient error", err)
	}

	// A server that does not answer before the step's deadline.
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	s = mustNew(t, httpstep.Spec{Method: "GET", URL: srv.URL}, httpstep.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = s.Do(ctx, attempt(`{}`, nil))
	if !errors.Is(err, context.DeadlineExceeded) || workflow.Classify(err, workflow.UnknownPermanent) != workflow.ClassTransient {
		t.Errorf("timeout: %v, want a transient deadline error", err)
	}
}

func TestBodyCap(t *testing.T) {
	t.Parallel()
	var rec recorder
	srv := rec.server(t, func(w http.ResponseWriter, r *http.Request) {
		body := strings.Repeat("a", len(r.URL.Query().Get("n")))
		w.Header()["Date"] = nil // no Date: the headers are the same size each time
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = io.WriteString(w, body)
	})
	// The cap counts the header names and values too.
	headers := httpstep.HeaderBytes(http.Header{"Content-Type": {"text/plain"}, "Content-Length": {"10"}})
	s := mustNew(t, httpstep.Spec{Method: "GET", URL: srv.URL + "/?n={{.input.n}}"}, httpstep.Options{MaxBodyBytes: headers + 10})
	resp, err := s.Do(context.Background(), attempt(`{"n":"1234567890"}`, nil))
	if err != nil || resp.Body != "aaaaaaaaaa" {
		t.Errorf("response at the cap: %+v, %v", resp, err)
	}
	_, err = s.Do(context.Background(), attempt(`{"n":"12345678901"}`, nil))
	if err == nil || !workflow.IsPermanent(err) || workflow.Code(err) != httpstep.CodeResponseTooLarge ||
		!strings.Contains(err.Error(), "larger than the limit") {
		t.Errorf("response over the cap: %v (code %q), want a permanent %s error", err, workflow.Code(err), httpstep.CodeResponseTooLarge)
	}
	// A body over the cap alone is http_body_too_large.
	_, err = s.Do(context.Background(), attempt(fmt.Sprintf(`{"n":"%s"}`, strings.Repeat("1", int(headers)+11)), nil))
	if err == nil || !workflow.IsPermanent(err) || workflow.Code(err) != httpstep.CodeBodyTooLarge ||
		!strings.Contains(err.Error(), fmt.Sprintf("larger than the limit (the limit of %d bytes", headers+10)) {
		t.Errorf("body over the cap: %v (code %q), want a permanent %s error", err, workflow.Code(err), httpstep.CodeBodyTooLarge)
	}
}

func TestRenderErrorsArePermanentAndSendNothing(t *testing.T) {
	t.Parallel()
	var rec recorder
	srv := rec.server(t, func(http.ResponseWriter, *http.Request) {})
	tests := []struct {
		name    string
		spec    httpstep.Spec
		input   string
		inError string
	}{
		{"missing input key", httpstep.Spec{Method: "GET", URL: srv.URL + "/{{.input.nope}}"}, `{}`, `map has no entry for key "nope"`},
		{"missing step output", httpstep.Spec{Method: "GET", URL: srv.URL, Body: "{{.steps.fetch.body}}", Steps: []string{"fetch"}},
			`{}`, `map has no entry for key "fetch"`},
		{"rendered URL not http", httpstep.Spec{Method: "GET", URL: "{{.input.u}}", AllowedHosts: []string{"example.com"}},
			`{"u":"file:///etc/passwd"}`, "http:// or https://"},
		{"rendered method not a token", httpstep.Spec{Method: "{{.input.m}}", URL: srv.URL}, `{"m":"GE T"}`, "not an HTTP method"},
		{"header with a line break", httpstep.Spec{Method: "GET", URL: srv.URL, Headers: map[string]string{"X-A": "{{.input.v}}"}},
			`{"v":"a\r\nX-Evil: 1"}`, "line break"},
		{"input not JSON", httpstep.Spec{Method: "GET", URL: srv.URL}, `{`, "decode run input"},
	}
	for _, tt := range tests {
		s := mustNew(t, tt.spec, httpstep.Options{})
		_, err := s.Do(context.Background(), attempt(tt.input, nil))
		if err == nil || !workflow.IsPermanent(err) || !strings.Contains(err.Error(), tt.inError) {
			t.Errorf("%s: %v, want a permanent error containing %q", tt.name, err, tt.inError)
		}
		if strings.HasPrefix(tt.name, "missing") && workflow.Code(err) != httpstep.CodeTemplateError {
			t.Errorf("%s: code %q, want %s", tt.name, workflow.Code(err), httpstep.CodeTemplateError)
		}
	}
	if n := len(rec.all()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestNewRejectsBadSpecs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		spec  httpstep.Spec
		field string
		msg   string
	}{
		{"missing method", httpstep.Spec{URL: "http://x"}, "method", "missing"},
		{"missing url", httpstep.Spec{Method: "GET", URL: "  "}, "url", "missing"},
		{"bad method", httpstep.Spec{Method: "GE T", URL: "http://x"}, "method", "not an HTTP method"},
		{"ftp url", httpstep.Spec{Method: "GET", URL: "ftp://x/y"}, "url", "http:// or https://"},
		{"url without host", httpstep.Spec{Method: "GET", URL: "http:///y"}, "url", "no host"},
		{"unparsable url", httpstep.Spec{Method: "GET", URL: "http://x/%zz"}, "url", "invalid URL escape"},
		{"template syntax", httpstep.Spec{Method: "GET", URL: "http://x/{{.input.a"}, "url", "unclosed action"},
		{"unknown function", httpstep.Spec{Method: "GET", URL: "http://x", Body: "{{yaml .input}}"}, "body", `function "yaml" not defined`},
		{"define", httpstep.Spec{Method: "GET", URL: "http://x", Body: `{{define "a"}}x{{end}}`}, "body", "not supported"},
		{"template action", httpstep.Spec{Method: "GET", URL: "http://x", Body: `{{template "a"}}`}, "body", "not supported"},
		{"range over a number", httpstep.Spec{Method: "GET", URL: "http://x", Body: `{{range 1000000000}}x{{end}}`}, "body", "range over a number"},
		{"bad header name", httpstep.Spec{Method: "GET", URL: "http://x", Headers: map[string]string{"X Bad": "v"}}, "headers.X Bad", "not a valid header name"},
		{"bad header template", httpstep.Spec{Method: "GET", URL: "http://x", Headers: map[string]string{"X-A": "{{"}}, "headers.X-A", "unclosed action"},
		{"unknown step", httpstep.Spec{Method: "GET", URL: "http://x/{{.steps.fecth.body.id}}", Steps: []string{"fetch"}}, "url", `"fecth" is not an earlier step`},
		{"unknown step through $", httpstep.Spec{Method: "GET", URL: "http://x", Body: `{{range .input.a}}{{$.steps.later}}{{end}}`}, "body", `"later" is not an earlier step`},
	}
	for _, tt := range tests {
		_, err := httpstep.New(tt.spec, httpstep.Options{})
		var fe *httpstep.FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: New = %v, want a FieldError on %s containing %q", tt.name, err, tt.field, tt.msg)
		}
	}
	// Every bad field is reported at once.
	_, err := httpstep.New(httpstep.Spec{Body: "{{"}, httpstep.Options{})
	for _, f := range []string{"method: ", "url: ", "body: "} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("New = %v, want it to report %q", err, f)
		}
	}
	// Templated method and URL are checked when rendered, not before (a
	// URL whose host is templated needs AllowedHosts); step references
	// inside range bodies are not checked (dot is elsewhere).
	if _, err := httpstep.New(httpstep.Spec{Method: "{{.input.m}}", URL: "{{.input.u}}",
		Body: "{{range .input.a}}{{.steps.x}}{{end}}", AllowedHosts: []string{"example.com"}}, httpstep.Options{}); err != nil {
		t.Errorf("New with templated method and URL: %v", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"2", 2 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"3600", time.Hour, true},
		{"3601", time.Hour, true},
		{"18446744073709551616", time.Hour, true},
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second, true},
		{now.Add(-30 * time.Second).Format(http.TimeFormat), 0, true},
		{now.Add(48 * time.Hour).Format(http.TimeFormat), time.Hour, true},
		{"Sunday, 06-Jan-30 03:04:35 GMT", 96*time.Hour + 30*time.Second, true}, // RFC 850
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		limit := time.Hour
		if strings.HasPrefix(tt.in, "Sunday") {
			limit = 100 * time.Hour
		}
		got, ok := httpstep.ParseRetryAfter(tt.in, now, limit)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseRetryAfter(%q) = %s, %v; want %s, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestTemplate(t *testing.T) {
	t.Parallel()
	tm, err := httpstep.ParseTemplate("body", `{{json .input}} {{.steps.a.x}} {{$.steps.b}} {{with .input}}{{.steps.ignored}}{{end}} {{.steps.a.y}}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := tm.StepRefs(); fmt.Sprint(got) != "[a b]" {
		t.Errorf("StepRefs = %v, want [a b]", got)
	}
	if tm.IsConstant() {
		t.Error("a template with actions is constant")
	}
	if !tm.Reads("steps") || !tm.Reads("input") || tm.Reads("ignored") || tm.Reads("compensation") {
		t.Errorf("Reads: steps %v, input %v, ignored %v, compensation %v; want only steps and input read",
			tm.Reads("steps"), tm.Reads("input"), tm.Reads("ignored"), tm.Reads("compensation"))
	}
	if c, err := httpstep.ParseTemplate("url", "https://example.com/x"); err != nil || !c.IsConstant() || c.Text() != "https://example.com/x" {
		t.Errorf("constant template: %v, %v", c, err)
	}
	if e, err := httpstep.ParseTemplate("body", ""); err != nil || !e.IsConstant() {
		t.Errorf("empty template: %v", err)
	} else if out, err := e.Execute(nil); out != "" || err != nil {
		t.Errorf("empty template renders %q, %v", out, err)
	}
	big, err := httpstep.ParseTemplate("body", `{{range .input}}{{printf "%900000d" 1}}{{end}}`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = big.Execute(map[string]any{"input": []any{1, 2}})
	if !errors.Is(err, httpstep.ErrRender) || !strings.Contains(err.Error(), "renders more than") {
		t.Errorf("oversize render: %v", err)
	}
	data, err := attempt(`{"n": 1e400}`, map[string]string{"bad": `{`}).Data()
	if err == nil || !strings.Contains(err.Error(), "decode") || data != nil {
		t.Errorf("Data with a bad output: %v, %v", data, err)
	}
}

// hostOf returns a test server's host:port.
func hostOf(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// TestPollDone: a poll's until template reads the response as .output;
// "true" and "false" tell done and not done, anything else (or a template
// that fails) is a permanent error with code http_poll_invalid, and New
// refuses a poll without until or a positive interval.
func TestPollDone(t *testing.T) {
	t.Parallel()
	resp := &httpstep.Response{Status: 200, Headers: map[string]string{}, Body: map[string]any{"status": "done"}}
	a := httpstep.Attempt{Input: json.RawMessage(`{"want": "done"}`)}
	for _, tc := range []struct {
		until   string
		done    bool
		invalid bool
	}{
		{`{{eq .output.body.status "done"}}`, true, false},
		{`{{eq .output.body.status .input.want}}`, true, false},
		{`{{eq .output.body.status "running"}}`, false, false},
		{` {{eq .output.status 200}} `, true, false},
		{`yes`, false, true},
		{`{{.output.body.missing}}`, false, true},
	} {
		s, err := httpstep.New(httpstep.Spec{Method: "GET", URL: "http://x/",
			Poll: &httpstep.Poll{Until: tc.until, Interval: time.Second}}, httpstep.Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.until, err)
		}
		done, err := s.Done(a, resp)
		if tc.invalid {
			if err == nil || !workflow.IsPermanent(err) || workflow.Code(err) != httpstep.CodePollInvalid {
				t.Errorf("%s: %v, want a permanent %s", tc.until, err, httpstep.CodePollInvalid)
			}
			continue
		}
		if err != nil || done != tc.done {
			t.Errorf("%s: %v, %v; want %v", tc.until, done, err, tc.done)
		}
	}
	for _, p := range []httpstep.Poll{{Interval: time.Second}, {Until: "true"}, {Until: "true", Interval: -time.Second}} {
		if _, err := httpstep.New(httpstep.Spec{Method: "GET", URL: "http://x/", Poll: &p}, httpstep.Options{}); err == nil {
			t.Errorf("New accepted poll %+v", p)
		}
	}
}

// TestCompensationTemplates: a compensation's templates read the step it
// undoes, that step's output and the run's failure as .compensation; New
// refuses .compensation in a spec that is not a compensation's, and an
// attempt that is not a compensation's has no .compensation.
func TestCompensationTemplates(t *testing.T) {
	t.Parallel()
	var rec recorder
	srv := rec.server(t, func(http.ResponseWriter, *http.Request) {})
	spec := httpstep.Spec{Method: "POST", URL: srv.URL + "/refunds/{{.compensation.output.body.id}}",
		Headers: map[string]string{"X-Why": "{{.compensation.failure_code}}"},
		Body: `{"step": {{json .compensation.step}}, "reason": {{json .compensation.failure_reason}}, ` +
			`"same": {{eq (print .compensation.output.body.id) (print .steps.charge.body.id)}}, "as": {{json .step}}}`,
		Steps: []string{"charge"}, Compensation: true}
	s := mustNew(t, spec, httpstep.Options{})
	a := attempt(`{}`, map[string]string{"charge": `{"status": 201, "body": {"id": 12345678901234567890}}`})
	a.Step, a.IdempotencyKey = workflow.CompensationPrefix+"charge", "r:compensate:charge:1"
	a.Compensation = &workflow.Compensation{Step: "charge", Output: json.RawMessage(`{"status": 201, "body": {"id": 12345678901234567890}}`),
		FailureCode: "permanent_error", FailureReason: `step "ship": 400 Bad Request`}
	if _, err := s.Do(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	reqs := rec.all()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	want := `{"step": "charge", "reason": "step \"ship\": 400 Bad Request", "same": true, "as": "compensate:charge"}`
	if r.path != "/refunds/12345678901234567890" || r.header.Get("X-Why") != "permanent_error" || r.body != want ||
		r.header.Get("Idempotency-Key") != "r:compensate:charge:1" {
		t.Errorf("request %s X-Why %q Idempotency-Key %q body\n got %s\nwant %s", r.path, r.header.Get("X-Why"),
			r.header.Get("Idempotency-Key"), r.body, want)
	}

	// The same attempt, not a compensation's: no .compensation.
	a.Compensation = nil
	if _, err := s.Do(context.Background(), a); err == nil || workflow.Code(err) != httpstep.CodeTemplateError {
		t.Errorf("Do without a compensation = %v, want a template_error", err)
	}
	// A compensation of a step without output (null) renders output as
	// null; one whose output is not JSON is a permanent error.
	a.Compensation = &workflow.Compensation{Step: "charge"}
	if data, err := a.Data(); err != nil || data["compensation"].(map[string]any)["output"] != nil { //nolint:forcetypeassert // a failed assertion fails the test
		t.Errorf("Data of a compensation without output: %v, %v", data, err)
	}
	a.Compensation.Output = json.RawMessage(`{`)
	if _, err := a.Data(); err == nil || !workflow.IsPermanent(err) {
		t.Errorf("Data of a compensation with a bad output: %v, want a permanent error", err)
	}

	// New: .compensation only in a compensation's spec, in any field, as
	// .compensation or $.compensation.
	for _, bad := range []httpstep.Spec{
		{Method: "GET", URL: "http://x/{{.compensation.step}}"},
		{Method: "GET", URL: "http://x/", Body: `{{range .input}}{{$.compensation.output}}{{end}}`},
		{Method: "GET", URL: "http://x/", Headers: map[string]string{"X-A": "{{with .compensation}}{{.step}}{{end}}"}},
		{Method: "GET", URL: "http://x/", Poll: &httpstep.Poll{Until: "{{.compensation.failure_code}}", Interval: time.Second}},
	} {
		_, err := httpstep.New(bad, httpstep.Options{})
		if !errors.Is(err, httpstep.ErrNotCompensation) {
			t.Errorf("New(%+v) = %v, want ErrNotCompensation", bad, err)
		}
		bad.Compensation = true
		if _, err := httpstep.New(bad, httpstep.Options{}); err != nil {
			t.Errorf("New(%+v) of a compensation: %v", bad, err)
		}
	}
	// A .compensation inside a with or range body is the element's field,
	// not the data's.
	if _, err := httpstep.New(httpstep.Spec{Method: "GET", URL: "http://x/", Body: `{{range .input.items}}{{.compensation}}{{end}}`},
		httpstep.Options{}); err != nil {
		t.Errorf("New with .compensation of a range element: %v", err)
	}
}
