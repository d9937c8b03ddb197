package httpstep_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/httpstep"
)

// TestRedirects: followed to the same scheme, host and port or an allowed
// host, at most 5 times; anything else fails permanently with
// http_redirect_refused, and the other server gets nothing.
func TestRedirects(t *testing.T) {
	t.Parallel()
	var otherHits atomicCounter
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { otherHits.add() }))
	defer other.Close()
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		q := r.URL.Query()
		switch {
		case q.Get("to") != "":
			http.Redirect(w, r, q.Get("to"), http.StatusFound)
		case q.Get("hops") != "":
			n, _ := strconv.Atoi(q.Get("hops"))
			if n > 0 {
				http.Redirect(w, r, fmt.Sprintf("/hop%d?hops=%d", n, n-1), http.StatusTemporaryRedirect)
			}
		}
	}))
	defer srv.Close()
	otherHost := hostOf(t, other)

	run := func(spec httpstep.Spec, opts httpstep.Options, in string) error {
		s := mustNew(t, spec, opts)
		_, err := s.Do(context.Background(), attempt(in, nil))
		return err
	}
	get := httpstep.Spec{Method: "GET", URL: srv.URL + "/start?to={{.input.to}}&hops={{.input.hops}}"}

	// The same host: followed, up to 5 times.
	if err := run(get, httpstep.Options{}, `{"to": "/next", "hops": ""}`); err != nil {
		t.Errorf("same-host redirect: %v", err)
	}
	if err := run(get, httpstep.Options{}, `{"to": "", "hops": "5"}`); err != nil {
		t.Errorf("5 redirects: %v", err)
	}
	err := run(get, httpstep.Options{}, `{"to": "", "hops": "6"}`)
	if !workflow.IsPermanent(err) || workflow.Code(err) != httpstep.CodeRedirectRefused || !strings.Contains(err.Error(), "5 redirects") {
		t.Errorf("6 redirects: %v (code %q), want a permanent %s error", err, workflow.Code(err), httpstep.CodeRedirectRefused)
	}

	// Another host (another port of 127.0.0.1), userinfo, a scheme that is
	// not http: refused.
	for _, to := range []string{other.URL + "/x?sig=s3cret", "http://u:s3cret@" + hostOf(t, srv) + "/x",
		"http://localhost:" + strings.Split(hostOf(t, srv), ":")[1] + "/x", "ftp://" + otherHost + "/", "//" + otherHost + "/x"} {
		err := run(get, httpstep.Options{}, input(t, map[string]any{"to": to, "hops": ""}))
		if !workflow.IsPermanent(err) || workflow.Code(err) != httpstep.CodeRedirectRefused {
			t.Errorf("redirect to %s: %v (code %q), want a permanent %s error", to, err, workflow.Code(err), httpstep.CodeRedirectRefused)
		}
		if strings.Contains(fmt.Sprint(err), "s3cret") {
			t.Errorf("redirect to %s: the error shows a secret: %v", to, err)
		}
	}
	if n := otherHits.get(); n != 0 {
		t.Errorf("the other server got %d requests", n)
	}
	// Listed in AllowedHosts: followed.
	spec := get
	spec.AllowedHosts = []string{otherHost}
	if err := run(spec, httpstep.Options{}, input(t, map[string]any{"to": other.URL + "/x", "hops": ""})); err != nil {
		t.Errorf("redirect to an allowed host: %v", err)
	}
	if n := otherHits.get(); n != 1 {
		t.Errorf("the allowed server got %d requests, want 1", n)
	}

	// A client of the caller's: its own CheckRedirect runs after the
	// step's rules, and the client is not modified.
	var ownCalls atomicCounter
	own := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
		ownCalls.add()
		return nil
	}}
	err = run(get, httpstep.Options{Client: own}, input(t, map[string]any{"to": other.URL + "/x", "hops": ""}))
	if workflow.Code(err) != httpstep.CodeRedirectRefused || ownCalls.get() != 0 {
		t.Errorf("caller's client, redirect elsewhere: %v, its CheckRedirect called %d times", err, ownCalls.get())
	}
	if err := run(get, httpstep.Options{Client: own}, `{"to": "/next", "hops": ""}`); err != nil || ownCalls.get() != 1 {
		t.Errorf("caller's client, same host: %v, its CheckRedirect called %d times, want 1", err, ownCalls.get())
	}
	plain := &http.Client{}
	_ = run(get, httpstep.Options{Client: plain}, `{"to": "/next", "hops": ""}`)
	if plain.CheckRedirect != nil {
		t.Error("the caller's client was modified")
	}
	if err := run(get, httpstep.Options{Client: plain}, input(t, map[string]any{"to": other.URL + "/x", "hops": ""})); workflow.Code(err) != httpstep.CodeRedirectRefused {
		t.Errorf("caller's client without CheckRedirect, redirect elsewhere: %v", err)
	}
	if n := otherHits.get(); n != 1 {
		t.Errorf("the other server got %d requests, want 1", n)
	}
}

// TestRedirectFromHTTPSToHTTPIsRefused: even to an allowed host.
func TestRedirectFromHTTPSToHTTPIsRefused(t *testing.T) {
	t.Parallel()
	var plainHits atomicCounter
	plain := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { plainHits.add() }))
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+"/x", http.StatusFound)
	}))
	defer tlsSrv.Close()
	s := mustNew(t, httpstep.Spec{Method: "GET", URL: tlsSrv.URL + "/{{.input.x}}", AllowedHosts: []string{hostOf(t, plain)}},
		httpstep.Options{Client: tlsSrv.Client()})
	_, err := s.Do(context.Background(), attempt(`{"x": "a"}`, nil))
	if !workflow.IsPermanent(err) || workflow.Code(err) != httpstep.CodeRedirectRefused || !strings.Contains(err.Error(), "https to http") {
		t.Errorf("%v (code %q), want a permanent %s error", err, workflow.Code(err), httpstep.CodeRedirectRefused)
	}
	if plainHits.get() != 0 {
		t.Errorf("the http server got %d requests", plainHits.get())
	}
}
