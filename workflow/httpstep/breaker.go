package httpstep

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/cairnhq/cairn/workflow"
)

// ErrBreakerHost is wrapped by the error of BreakerName and DefaultBreaker
// when the step's host cannot name its circuit breaker: the URL is
// host-templated (the host is known only at run time), or its host is an
// IPv6 address (a breaker name cannot hold its brackets).
var ErrBreakerHost = errors.New("the target host cannot name the circuit breaker")

// BreakerName returns the default name of the step's circuit breaker: the
// host of its URL, lower-cased, without a trailing dot, and with its port
// unless that is the scheme's default ("api.example.com",
// "api.example.com:8443", "10.0.0.7:8080"); never the userinfo. So two
// steps that call one host share a breaker, and steps that call two hosts
// have one each. The error wraps ErrBreakerHost (and ErrHostTemplated for
// a host-templated URL).
func (s *Step) BreakerName() (string, error) {
	if s.origin == nil {
		return "", fmt.Errorf("%w: the URL %w, so the host is known only at run time", ErrBreakerHost, ErrHostTemplated)
	}
	return breakerName(s.origin)
}

// breakerName is BreakerName for a URL whose host is literal.
func breakerName(u *url.URL) (string, error) {
	e, err := endpointOf(u)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBreakerHost, err)
	}
	if strings.Contains(e.host, ":") {
		return "", fmt.Errorf("%w: %s is an IPv6 address", ErrBreakerHost, e.host)
	}
	name := e.host
	if e.port != defaultPort(e.scheme) {
		name += ":" + strconv.Itoa(e.port)
	}
	return name, nil
}

// DefaultBreaker returns p with the step's default circuit breaker name:
// when p has a CircuitBreaker without a Name, a copy of it named
// BreakerName. Any other p is returned as it is. Give the result to the
// workflow.Step whose Run is the step's:
//
//	pol, err := step.DefaultBreaker(workflow.Policy{CircuitBreaker: &workflow.CircuitBreaker{FailureThreshold: 3}})
//	// ... workflow.Step{Name: "charge", Run: step.Run, Policy: pol}
//
// A breaker inherited from the workflow or the worker's defaults is not
// seen here: a nameless one there is refused by Policy.Validate, so give
// each http step its own.
func (s *Step) DefaultBreaker(p workflow.Policy) (workflow.Policy, error) {
	if p.CircuitBreaker == nil || p.CircuitBreaker.Name != "" {
		return p, nil
	}
	name, err := s.BreakerName()
	if err != nil {
		return p, fmt.Errorf("circuit_breaker: name is required: %w", err)
	}
	cb := *p.CircuitBreaker
	cb.Name = name
	p.CircuitBreaker = &cb
	return p, nil
}
