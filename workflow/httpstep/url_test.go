package httpstep_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/httpstep"
)

// input returns fields as run input (JSON).
func input(t *testing.T, fields map[string]any) string {
	t.Helper()
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHostTemplatedURLsAreRefusedAtLoad: a URL template whose action can
// render into the scheme, userinfo, host or port (or whose literal text
// does not fix them before the first action) is a FieldError on "url"
// without AllowedHosts, and is accepted with them.
func TestHostTemplatedURLsAreRefusedAtLoad(t *testing.T) {
	t.Parallel()
	for _, tmpl := range []string{
		"https://{{.input.host}}/x",
		"https://api.internal{{.input.path}}",
		"https://api.internal{{.input.path}}/x",
		"{{.input.url}}",
		"{{.input.base}}/users/{{.input.id}}",
		"http{{.input.s}}://api.example.com/",
		"https:/{{.input.s}}/api.example.com/",
		"https://{{.input.user}}@api.example.com/",
		"https://user:{{.input.password}}@api.example.com/",
		"https://api.example.com:{{.input.port}}/",
		"https://api.{{.input.tenant}}.example.com/",
		"https://api.example.com{{if .input.a}}/a{{end}}",
		"https://api.example.com{{with .input.a}}{{end}}/x",
		"{{if .input.a}}https://a.example.com/{{else}}https://b.example.com/{{end}}x",
		"{{$h := .input.host}}https://{{$h}}/",
		"https://{{range .input.parts}}{{.}}.{{end}}example.com/",
		"  https://{{.input.host}}/",
	} {
		_, err := httpstep.New(httpstep.Spec{Method: "GET", URL: tmpl}, httpstep.Options{})
		var fe *httpstep.FieldError
		if !errors.As(err, &fe) || fe.Field != "url" || !errors.Is(err, httpstep.ErrHostTemplated) ||
			!strings.Contains(err.Error(), "allowed_hosts") {
			t.Errorf("New(%q) = %v, want a FieldError on url wrapping ErrHostTemplated", tmpl, err)
		}
		if _, err := httpstep.New(httpstep.Spec{Method: "GET", URL: tmpl, AllowedHosts: []string{"api.example.com"}},
			httpstep.Options{}); err != nil {
			t.Errorf("New(%q) with AllowedHosts: %v", tmpl, err)
		}
	}
	// Literal scheme://host[:port], then /, ? or # before the first action:
	// accepted without AllowedHosts.
	for _, tmpl := range []string{
		"https://api.example.com/users/{{.input.id}}",
		"https://api.example.com?q={{.input.q}}",
		"https://api.example.com#{{.input.f}}",
		"https://user:pw@api.example.com:8443/{{.input.a}}/{{.input.b}}?x={{.input.c}}",
		"https://{{- /* a comment */ -}}api.example.com/{{.input.x}}",
		"https://api.example.com/{{if .input.a}}a{{else}}b{{end}}/{{range .input.p}}{{.}}/{{end}}",
		"https://api.example.com/{{$x := .input.x}}{{$x}}",
	} {
		if _, err := httpstep.New(httpstep.Spec{Method: "GET", URL: tmpl}, httpstep.Options{}); err != nil {
			t.Errorf("New(%q): %v", tmpl, err)
		}
	}
	// The literal scheme and host are checked at load.
	for tmpl, msg := range map[string]string{
		"ftp://api.example.com/{{.input.x}}": "http:// or https://",
		"https:///{{.input.x}}":              "has no host",
		"https://a b/{{.input.x}}":           "invalid character",
	} {
		_, err := httpstep.New(httpstep.Spec{Method: "GET", URL: tmpl}, httpstep.Options{})
		var fe *httpstep.FieldError
		if !errors.As(err, &fe) || fe.Field != "url" || !strings.Contains(err.Error(), msg) {
			t.Errorf("New(%q) = %v, want a FieldError on url containing %q", tmpl, err, msg)
		}
	}
}

// TestHostileInputsStayInTheirComponent: values rendered into the path,
// the query and the fragment are escaped for them, so no input reaches
// another host or changes the URL's structure: the server sees each value
// back, decoded, as one path segment or one query value.
func TestHostileInputsStayInTheirComponent(t *testing.T) {
	t.Parallel()
	var evilHits atomicCounter
	evil := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { evilHits.add() }))
	defer evil.Close()
	evilHost := hostOf(t, evil)

	var rec recorder
	srv := rec.server(t, func(http.ResponseWriter, *http.Request) {})
	hostile := []string{
		"42", "a/b", "127.0.0.1:6379", "evil@" + evilHost, "/x@evil.com", "@" + evilHost, "#@evil", "?a=b#",
		"%2F..%2F", "%2e%2e", "a&b=c", "q=1&x", "a+b c", `\\` + evilHost + `\x`, "ünïcødé/π", "a\r\nHost: evil",
		"\x00\x7f", "http://" + evilHost + "/", "//" + evilHost, "...", ".a", "~_-",
	}
	s := mustNew(t, httpstep.Spec{Method: "GET", URL: srv.URL + "/users/{{.input.v}}/x?q={{.input.v}}&n=1"},
		httpstep.Options{})
	for i, v := range hostile {
		if _, err := s.Do(context.Background(), attempt(input(t, map[string]any{"v": v}), nil)); err != nil {
			t.Errorf("%q: %v", v, err)
			continue
		}
		reqs := rec.all()
		if len(reqs) != i+1 {
			t.Fatalf("%q: %d requests, want %d", v, len(reqs), i+1)
		}
		r := reqs[i]
		if want := "/users/" + v + "/x"; r.path != want {
			t.Errorf("%q: path %q, want %q", v, r.path, want)
		}
		q, err := url.ParseQuery(r.query)
		if err != nil || len(q) != 2 || q.Get("q") != v || q.Get("n") != "1" {
			t.Errorf("%q: query %q, want q=%q and n=1", v, r.query, v)
		}
	}
	// The path escaping: one segment.
	s = mustNew(t, httpstep.Spec{Method: "GET", URL: srv.URL + "/users/{{.input.v}}"}, httpstep.Options{})
	for v, want := range map[string]string{"42": "/users/42", "a/b": "/users/a%2Fb", "?a=b#": "/users/%3Fa%3Db%23",
		"@x:1": "/users/%40x%3A1", "%2F..%2F": "/users/%252F..%252F", `a\b`: "/users/a%5Cb"} {
		n := len(rec.all())
		_, err := s.Do(context.Background(), attempt(input(t, map[string]any{"v": v}), nil))
		if reqs := rec.all(); err != nil || len(reqs) != n+1 || reqs[n].uri != want {
			t.Errorf("%q: %v, requests %+v; want one for %q", v, err, reqs[n:], want)
		}
	}
	// The query escaping: & # = cannot add parameters.
	s = mustNew(t, httpstep.Spec{Method: "GET", URL: srv.URL + "/search?q={{.input.q}}"}, httpstep.Options{})
	n := len(rec.all())
	_, err := s.Do(context.Background(), attempt(`{"q": "a&admin=1#x=y z"}`, nil))
	if reqs := rec.all(); err != nil || len(reqs) != n+1 || reqs[n].uri != "/search?q=a%26admin%3D1%23x%3Dy+z" {
		t.Errorf("%v, requests %+v; want one for /search?q=a%%26admin%%3D1%%23x%%3Dy+z", err, reqs[n:])
	}
	// A dot segment would climb out of the path: refused, nothing sent.
	n = len(rec.all())
	for _, v := range []string{"..", ".", "%2e%2E"} {
		tmpl := srv.URL + "/users/{{.input.v}}/profile"
		if v == "%2e%2E" { // an escaped dot segment the author wrote
			tmpl = srv.URL + "/users/%2e%2E/{{.input.v}}"
			v = "x"
		}
		s := mustNew(t, httpstep.Spec{Method: "GET", URL: tmpl}, httpstep.Options{})
		_, err := s.Do(context.Background(), attempt(input(t, map[string]any{"v": v}), nil))
		if !workflow.IsPermanent(err) || workflow.Code(err) != httpstep.CodeInvalidURL || !strings.Contains(err.Error(), "segment") {
			t.Errorf("%q: %v (code %q), want a permanent %s error", tmpl, err, workflow.Code(err), httpstep.CodeInvalidURL)
		}
	}
	if got := len(rec.all()); got != n {
		t.Errorf("%d requests sent with dot segments", got-n)
	}
	if evilHits.get() != 0 {
		t.Errorf("the other server got %d requests", evilHits.get())
	}
}

// TestEscapingFollowsControlStructures: the escaping of an action depends
// on where it lands, through if, range and with.
func TestEscapingFollowsControlStructures(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.URL.RequestURI()
		mu.Unlock()
	}))
	defer srv.Close()
	tests := []struct {
		tmpl, input, want string
	}{
		{"/a{{if .input.q}}?q={{.input.q}}{{end}}", `{"q": "x&y=z"}`, "/a?q=x%26y%3Dz"},
		{"/a{{if .input.q}}?q={{.input.q}}{{end}}", `{"q": ""}`, "/a"},
		{"/{{range .input.p}}{{.}}/{{end}}?n={{.input.n}}", `{"p": ["a/b", "?"], "n": "1&2"}`, "/a%2Fb/%3F/?n=1%262"},
		// Path or query, depending on .input.a: the path escaping is right in both.
		{"/x{{if .input.a}}?a={{end}}{{.input.v}}", `{"a": true, "v": "1&b=2 3"}`, "/x?a=1%26b%3D2%203"},
		{"/x{{if .input.a}}?a={{end}}{{.input.v}}", `{"a": false, "v": "1/2"}`, "/x1%2F2"},
		{"/{{with .input.u}}{{.name}}{{end}}", `{"u": {"name": "../../admin"}}`, "/..%2F..%2Fadmin"},
		// urlquery's output is escaped already: not escaped twice.
		{"/s?q={{.input.q | urlquery}}&r={{urlquery .input.q}}", `{"q": "a b&c"}`, "/s?q=a+b%26c&r=a+b%26c"},
		{"/{{printf \"%s-%s\" .input.a .input.b}}", `{"a": "x/y", "b": "#"}`, "/x%2Fy-%23"},
		{"/{{.input.n}}/{{.input.missing_is_null}}", `{"n": 12345678901234567890, "missing_is_null": null}`,
			"/12345678901234567890/%3Cno%20value%3E"},
	}
	for _, tt := range tests {
		s := mustNew(t, httpstep.Spec{Method: "GET", URL: srv.URL + tt.tmpl}, httpstep.Options{})
		_, err := s.Do(context.Background(), attempt(tt.input, nil))
		mu.Lock()
		g := got
		got = ""
		mu.Unlock()
		if err != nil || g != tt.want {
			t.Errorf("%s with %s: sent %q, %v; want %q", tt.tmpl, tt.input, g, err, tt.want)
		}
	}
}

// dialRecorder is a client whose every connection goes to one test server,
// whatever the host: it records the address each request was for, so that
// host names other than loopback can be tested.
type dialRecorder struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dialRecorder) client(t *testing.T, to string) *http.Client {
	t.Helper()
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.mu.Lock()
		d.addrs = append(d.addrs, addr)
		d.mu.Unlock()
		var dl net.Dialer
		return dl.DialContext(ctx, network, to)
	}}}
}

func (d *dialRecorder) all() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...)
}

// TestAllowedHosts: with AllowedHosts, a host-templated URL may go to the
// listed hosts only: exact names (any case, a trailing dot), wildcards,
// ports, IP literals; anything else fails permanently with
// http_host_not_allowed before a connection is made. A literal host is not
// restricted by the list.
func TestAllowedHosts(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	allowed := []string{"api.example.com", "Internal.Example.ORG.:8443", "*.svc.example.net", "10.1.2.3:8080", "[2001:db8::1]",
		"localhost"}
	tests := []struct {
		host string // into http://{{.input.host}}/x
		dial string // the address dialed; "" refused
	}{
		{"api.example.com", "api.example.com:80"},
		{"API.Example.Com", "API.Example.Com:80"},
		{"api.example.com.", "api.example.com.:80"},
		{"api.example.com:80", "api.example.com:80"},
		{"api.example.com:", "api.example.com:80"},
		{"api.example.com:8080", ""}, // no port in the entry: the default port only
		{"api.example.com:443", ""},  // the default of https, not of http
		{"internal.example.org:8443", "internal.example.org:8443"},
		{"internal.example.org", ""},
		{"a.svc.example.net", "a.svc.example.net:80"},
		{"a.b.svc.example.net", "a.b.svc.example.net:80"},
		{"svc.example.net", ""}, // a wildcard does not match its domain itself
		{"evilsvc.example.net", ""},
		{"a.svc.example.net.evil.com", ""},
		{"10.1.2.3:8080", "10.1.2.3:8080"},
		{"10.1.2.3", ""},
		{"[2001:db8::1]", "[2001:db8::1]:80"},
		{"[2001:0db8:0:0::1]", "[2001:0db8:0:0::1]:80"}, // the same address
		{"[::1]", ""},
		{"127.0.0.1:6379", ""},
		{"127.0.0.1", ""},
		{"127.1", ""},
		{"2130706433", ""},
		{"0x7f000001", ""},
		{"localhost:6379", ""},
		{"api.example.com.evil.com", ""},
		{"evil.com", ""},
		{"evil@api.example.com", ""},
		{"api.example.com@evil.com", ""},
		{"evil.com#api.example.com", ""},
		{"evil.com/api.example.com", ""},
		{"evil.com?api.example.com", ""},
		{`evil.com\api.example.com`, ""},
		{"api.example.com%2F", ""},
		{"ex%61mple.com", ""},
		{"[fe80::1%25lo]", ""},
		{"äpi.example.com", ""},
		{"api.example.com\r\nX: y", ""},
		{"", ""},
	}
	for _, tt := range tests {
		var d dialRecorder
		s := mustNew(t, httpstep.Spec{Method: "GET", URL: "http://{{.input.host}}/x", AllowedHosts: allowed},
			httpstep.Options{Client: d.client(t, srv.Listener.Addr().String())})
		_, err := s.Do(context.Background(), attempt(input(t, map[string]any{"host": tt.host}), nil))
		dialed := d.all()
		if tt.dial != "" {
			if err != nil || len(dialed) != 1 || dialed[0] != tt.dial {
				t.Errorf("%q: %v, dialed %v; want to dial %s", tt.host, err, dialed, tt.dial)
			}
			continue
		}
		if len(dialed) != 0 || !workflow.IsPermanent(err) || workflow.Code(err) != httpstep.CodeHostNotAllowed &&
			workflow.Code(err) != httpstep.CodeInvalidURL {
			t.Errorf("%q: %v (code %q), dialed %v; want a permanent refusal and no connection", tt.host, err, workflow.Code(err), dialed)
		}
	}

	// A whole URL from the input: its host is checked, userinfo refused.
	for _, tt := range []struct{ url, dial string }{
		{"http://api.example.com/a?b=c", "api.example.com:80"},
		{"https://api.example.com:443/", ""}, // the dial goes to a plain server: fails, but only after the check
		{"http://evil@api.example.com/", ""},
		{"http://api.example.com:80@evil.com/", ""},
		{"http://evil.com/", ""},
		{"http://evil.com\\@api.example.com/", ""},
		{"http://api.example.com\\@evil.com/", ""},
		{"file:///etc/passwd", ""},
		{"gopher://api.example.com/", ""},
		{"//api.example.com/", ""},
	} {
		var d dialRecorder
		s := mustNew(t, httpstep.Spec{Method: "GET", URL: "{{.input.url}}", AllowedHosts: allowed},
			httpstep.Options{Client: d.client(t, srv.Listener.Addr().String())})
		_, err := s.Do(context.Background(), attempt(input(t, map[string]any{"url": tt.url}), nil))
		dialed := d.all()
		switch {
		case tt.url == "https://api.example.com:443/":
			if len(dialed) != 1 || dialed[0] != "api.example.com:443" {
				t.Errorf("%q: dialed %v, want api.example.com:443", tt.url, dialed)
			}
		case tt.dial != "":
			if err != nil || len(dialed) != 1 || dialed[0] != tt.dial {
				t.Errorf("%q: %v, dialed %v; want to dial %s", tt.url, err, dialed, tt.dial)
			}
		default:
			if len(dialed) != 0 || !workflow.IsPermanent(err) {
				t.Errorf("%q: %v, dialed %v; want a permanent refusal and no connection", tt.url, err, dialed)
			}
		}
		if strings.Contains(fmt.Sprint(err), "evil@") {
			t.Errorf("%q: the error shows the userinfo: %v", tt.url, err)
		}
	}

	// A literal host is the definition's own: the list does not restrict it.
	var rec recorder
	lit := rec.server(t, func(http.ResponseWriter, *http.Request) {})
	s := mustNew(t, httpstep.Spec{Method: "GET", URL: lit.URL + "/{{.input.x}}", AllowedHosts: allowed}, httpstep.Options{})
	if _, err := s.Do(context.Background(), attempt(`{"x": "y"}`, nil)); err != nil || len(rec.all()) != 1 {
		t.Errorf("literal host with AllowedHosts: %v, %d requests", err, len(rec.all()))
	}

	// Bad entries are a FieldError on allowed_hosts.
	for _, entry := range []string{"", "https://api.example.com", "api.example.com/x", "user@api.example.com",
		"api.example.com:0", "api.example.com:99999", "api.example.com:x", "*", "*.com", "a.*.example.com", "::1",
		"[::1", "[fe80::1%25lo]", "[10.0.0.1]", "127.1", "äpi.example.com", "api example.com", "api..example.com"} {
		_, err := httpstep.New(httpstep.Spec{Method: "GET", URL: "https://{{.input.h}}/", AllowedHosts: []string{entry}},
			httpstep.Options{})
		var fe *httpstep.FieldError
		if !errors.As(err, &fe) || fe.Field != "allowed_hosts" {
			t.Errorf("entry %q: New = %v, want a FieldError on allowed_hosts", entry, err)
		}
	}
}

type atomicCounter struct {
	mu sync.Mutex
	n  int
}

func (c *atomicCounter) add() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *atomicCounter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
