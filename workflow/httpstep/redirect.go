package httpstep

import (
	"fmt"
	"net/http"
)

// redirectError is the error of a refused redirect.
type redirectError struct{ msg string }

func (e *redirectError) Error() string { return e.msg }

// withRedirectRules returns a copy of c whose CheckRedirect applies the
// step's redirect rules, then c's own CheckRedirect, if any.
func (s *Step) withRedirectRules(c *http.Client) *http.Client {
	cp := *c
	own := c.CheckRedirect
	cp.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := s.checkRedirect(req, via); err != nil {
			return err
		}
		if own != nil {
			return own(req, via)
		}
		return nil
	}
	return &cp
}

// checkRedirect allows at most MaxRedirects redirects, each to the first
// request's scheme, host and port or to an allowed host, never from https
// to http, never with userinfo.
func (s *Step) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return &redirectError{fmt.Sprintf("stopped after %d redirects", MaxRedirects)}
	}
	from, to := via[0].URL, req.URL
	refuse := func(format string, args ...any) error {
		return &redirectError{fmt.Sprintf("redirect to %s refused: ", redactURL(to)) + fmt.Sprintf(format, args...)}
	}
	if to.Scheme != "http" && to.Scheme != "https" {
		return refuse("not an http or https URL")
	}
	if from.Scheme == "https" && to.Scheme == "http" {
		return refuse("from https to http")
	}
	if to.User != nil {
		return refuse("the URL has userinfo (user@)")
	}
	dst, err := endpointOf(to)
	if err != nil {
		return refuse("%v", err)
	}
	if src, err := endpointOf(from); err == nil && src == dst {
		return nil
	}
	if s.allowed.allows(dst) {
		return nil
	}
	if len(s.allowed) == 0 {
		return refuse("%s is not the request's scheme, host and port, and the step has no allowed_hosts", dst)
	}
	return refuse("%s is not the request's scheme, host and port, nor in allowed_hosts (%s)", dst, s.allowed)
}
