package httpstep_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/httpstep"
)

// TestBreakerName: the default breaker name is the URL's literal host,
// lower-cased, with its port unless it is the scheme's default, never the
// userinfo; a host known only at run time, or an IPv6 address, has none.
func TestBreakerName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url, allowed, want string // want "": an error
	}{
		{url: "https://API.Example.com/v1/charges", want: "api.example.com"},
		{url: "https://api.example.com./x", want: "api.example.com"},
		{url: "https://api.example.com:443/x", want: "api.example.com"},
		{url: "http://api.example.com:80/x", want: "api.example.com"},
		{url: "https://api.example.com:8443/x", want: "api.example.com:8443"},
		{url: "http://api.example.com:443/x", want: "api.example.com:443"},
		{url: "https://user:secret@billing.internal/x", want: "billing.internal"},
		{url: "http://10.0.0.7:8080/x", want: "10.0.0.7:8080"},
		{url: "https://api.example.com/customers/{{.input.id}}?q={{.input.q}}", want: "api.example.com"},
		{url: "https://Billing.Internal:9000?since={{.input.since}}", want: "billing.internal:9000"},
		{url: "https://[2001:db8::1]:8443/x"},
		{url: "https://{{.input.host}}/x", allowed: "api.example.com"},
		{url: "https://api.example.com{{.input.path}}", allowed: "api.example.com"},
		{url: "{{.input.url}}", allowed: "api.example.com"},
	}
	for _, tt := range tests {
		spec := httpstep.Spec{Method: "GET", URL: tt.url}
		if tt.allowed != "" {
			spec.AllowedHosts = []string{tt.allowed}
		}
		s := mustNew(t, spec, httpstep.Options{})
		got, err := s.BreakerName()
		switch {
		case tt.want == "" && (err == nil || !errors.Is(err, httpstep.ErrBreakerHost)):
			t.Errorf("%s: BreakerName = %q, %v; want an ErrBreakerHost error", tt.url, got, err)
		case tt.want != "" && (err != nil || got != tt.want):
			t.Errorf("%s: BreakerName = %q, %v; want %q", tt.url, got, err, tt.want)
		}
		if tt.allowed != "" && !errors.Is(err, httpstep.ErrHostTemplated) {
			t.Errorf("%s: %v; want it to wrap ErrHostTemplated", tt.url, err)
		}
	}
}

// TestDefaultBreaker: a nameless breaker gets the step's host, on a copy;
// a named one, or none, is left alone; a host-templated URL is an error
// that says why.
func TestDefaultBreaker(t *testing.T) {
	t.Parallel()
	charges := mustNew(t, httpstep.Spec{Method: "POST", URL: "https://pay.example.com/charges"}, httpstep.Options{})
	users := mustNew(t, httpstep.Spec{Method: "GET", URL: "https://users.example.com/u/{{.input.id}}"}, httpstep.Options{})

	nameless := &workflow.CircuitBreaker{FailureThreshold: 3, Cooldown: time.Second}
	in := workflow.Policy{MaxAttempts: 2, CircuitBreaker: nameless}
	p1, err := charges.DefaultBreaker(in)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := users.DefaultBreaker(in)
	if err != nil {
		t.Fatal(err)
	}
	want1 := workflow.Policy{MaxAttempts: 2, CircuitBreaker: &workflow.CircuitBreaker{Name: "pay.example.com",
		FailureThreshold: 3, Cooldown: time.Second}}
	if !p1.Equal(want1) {
		t.Errorf("charges: %+v, want %+v", p1, want1)
	}
	if p2.CircuitBreaker == nil || p2.CircuitBreaker.Name != "users.example.com" {
		t.Errorf("users: breaker %+v, want users.example.com", p2.CircuitBreaker)
	}
	if nameless.Name != "" {
		t.Errorf("the given breaker was modified: %+v", nameless)
	}
	for _, p := range []workflow.Policy{p1, p2} {
		if err := p.Validate(); err != nil {
			t.Errorf("defaulted policy %+v: %v", p, err)
		}
	}

	named := workflow.Policy{CircuitBreaker: &workflow.CircuitBreaker{Name: "billing"}}
	if p, err := charges.DefaultBreaker(named); err != nil || !p.Equal(named) {
		t.Errorf("named: %+v, %v; want it unchanged", p, err)
	}
	if p, err := charges.DefaultBreaker(workflow.Policy{MaxAttempts: 1}); err != nil || p.CircuitBreaker != nil {
		t.Errorf("no breaker: %+v, %v; want none", p, err)
	}

	anyHost := mustNew(t, httpstep.Spec{Method: "GET", URL: "https://{{.input.host}}/x",
		AllowedHosts: []string{"*.example.com"}}, httpstep.Options{})
	_, err = anyHost.DefaultBreaker(in)
	if !errors.Is(err, httpstep.ErrHostTemplated) || !strings.Contains(err.Error(), "name is required") ||
		!strings.Contains(err.Error(), "known only at run time") {
		t.Errorf("host-templated: %v; want a name-is-required error wrapping ErrHostTemplated", err)
	}
}
