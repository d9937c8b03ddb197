package httpstep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cairnhq/cairn/workflow"
)

// Defaults and limits of Options.
const (
	// DefaultMaxBodyBytes caps a response: its headers and body together
	// (see Options.MaxBodyBytes).
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxRetryAfter caps the delay a Retry-After header asks for.
	DefaultMaxRetryAfter = time.Hour
	// ErrorBodyBytes is how much of an error response's body goes into the
	// error.
	ErrorBodyBytes = 512
	// MaxRedirects is how many redirects a request follows.
	MaxRedirects = 5
)

// Error codes (see workflow.Code) of the step's own failures. Each is
// permanent.
const (
	// CodeBodyTooLarge: the response body alone is over
	// Options.MaxBodyBytes.
	CodeBodyTooLarge = "http_body_too_large"
	// CodeResponseTooLarge: the response's headers, or its headers and
	// body together, are over Options.MaxBodyBytes (the body alone is
	// not).
	CodeResponseTooLarge = "http_response_too_large"
	// CodeTemplateError: a field's template failed to render.
	CodeTemplateError = "template_error"
	// CodeHostNotAllowed: a host-templated URL rendered a host (and port)
	// that Spec.AllowedHosts does not list, userinfo, or a value in the
	// host that is not a host name.
	CodeHostNotAllowed = "http_host_not_allowed"
	// CodeRedirectRefused: a redirect to another scheme, host or port
	// that Spec.AllowedHosts does not list, from https to http, or past
	// MaxRedirects.
	CodeRedirectRefused = "http_redirect_refused"
	// CodeInvalidURL: the rendered URL does not parse, is not http(s),
	// has no host, or has a "." or ".." path segment.
	CodeInvalidURL = "http_invalid_url"
)

// Spec describes an http step. Method, URL, the header values and Body are
// templates (see the package documentation).
type Spec struct {
	// Method is the request method, like GET or POST (upper-cased when
	// rendered). Required.
	Method string
	// URL is the request URL, http or https. Required.
	URL string
	// Headers are the request headers: name -> value template.
	Headers map[string]string
	// Body is the request body; empty sends none. Unless Headers sets
	// Content-Type, a body that is valid JSON is sent as application/json,
	// any other as text/plain; charset=utf-8.
	Body string
	// Steps names the earlier steps of the workflow, whose outputs the
	// templates read as .steps.NAME. New keeps the slice as it is, without
	// a copy (the steps of a workflow may share one list): do not change
	// its elements afterwards.
	Steps []string
	// AllowedHosts lists the hosts besides the URL's literal one that the
	// step may reach: the hosts a host-templated URL may render, and the
	// hosts redirects may go to. An entry is a host name
	// (api.example.com), a wildcard (*.example.com: any name under
	// example.com, not example.com itself), an IPv4 address or an IPv6
	// address in brackets, each optionally with a port (:8443); without
	// one it allows only the scheme's default port (443 for https, 80 for
	// http). Names match exactly, ignoring case and a trailing dot.
	//
	// A URL template is host-templated when an action renders into its
	// scheme, userinfo, host or port, or when the literal text before its
	// first action does not hold scheme://host[:port] and a "/", "?" or
	// "#" after it. Without AllowedHosts New refuses such a template.
	AllowedHosts []string
	// Poll, when set, repeats the request until a template over its
	// response is true (see Poll).
	Poll *Poll
	// Compensation marks the spec as a compensation's
	// (workflow.Step.Compensate): its templates may read .compensation
	// (see the package documentation). Without it, New refuses a template
	// that reads .compensation, which only a compensation's attempts have.
	Compensation bool
}

// Poll repeats an http step's request until it reports done: after each
// successful (2xx) response, Until is rendered with the template data plus
// .output, the response as the step's output (status, headers, body); "true"
// is done and the response is the step's output, "false" snoozes the step
// (workflow.Snooze) for Interval, after which it sends the request again. Any
// other rendering fails the step permanently (code http_poll_invalid). Each
// request counts against the run's max_iterations.
type Poll struct {
	// Until is the template that tells the step is done, like
	// {{eq .output.body.status "done"}}. Required.
	Until string
	// Interval is the delay between requests. Required, positive.
	Interval time.Duration
}

// CodePollInvalid is the code of the error of a poll whose until template
// rendered neither "true" nor "false", or failed to render.
const CodePollInvalid = "http_poll_invalid"

// Options configure how http steps send requests. A zero field takes the
// default in its comment.
type Options struct {
	// Client sends the requests. Default: a client with no timeout of its
	// own (the step's context bounds each request) whose transport reads
	// at most max(MaxBodyBytes, 64 KiB) bytes of response headers
	// (http.Transport.MaxResponseHeaderBytes). The step sends with a copy
	// of the client whose CheckRedirect applies the step's redirect rules
	// (see the package documentation) before the client's own, if any;
	// the client itself is not modified.
	Client *http.Client
	// MaxBodyBytes caps a response: its header names and values and its
	// body, counted together. A body over it fails the step permanently
	// with code http_body_too_large; headers over it, or headers and body
	// together, with code http_response_too_large. The name stays from
	// when it capped the body alone. Default DefaultMaxBodyBytes (the
	// worker: CAIRN_HTTP_STEP_MAX_BODY).
	MaxBodyBytes int64
	// MaxRetryAfter caps the delay a Retry-After header may ask for.
	// Default DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// Now tells the time, to turn a Retry-After date into a delay. Default
	// workflow.SystemClock.Now.
	Now func() time.Time
}

// minHeaderBytes is the least the default client's transport reads of
// response headers, so that a small MaxBodyBytes fails with the step's own
// error rather than the transport's.
const minHeaderBytes = 64 << 10

// defaultClients are the default clients, by their header limit.
var defaultClients sync.Map // int64 -> *http.Client

// defaultClient returns the default client of a response cap.
func defaultClient(maxBytes int64) *http.Client {
	limit := max(maxBytes, minHeaderBytes)
	if c, ok := defaultClients.Load(limit); ok {
		return c.(*http.Client) //nolint:forcetypeassert // defaultClients holds only *http.Client
	}
	var tr *http.Transport
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		tr = dt.Clone()
	} else {
		tr = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	}
	tr.MaxResponseHeaderBytes = limit
	c, _ := defaultClients.LoadOrStore(limit, &http.Client{Transport: tr})
	return c.(*http.Client) //nolint:forcetypeassert // as above
}

func (o Options) withDefaults() Options {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Client == nil {
		o.Client = defaultClient(o.MaxBodyBytes)
	}
	if o.MaxRetryAfter <= 0 {
		o.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if o.Now == nil {
		o.Now = workflow.SystemClock.Now
	}
	return o
}

// FieldError is an error in one field of a Spec: "method", "url", "body",
// "headers.NAME" or "allowed_hosts".
type FieldError struct {
	Field string
	Err   error
}

// Error returns "FIELD: problem".
func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the problem.
func (e *FieldError) Unwrap() error { return e.Err }

// Step is a parsed http step. Its Run method is a workflow.StepFunc.
type Step struct {
	method, url, body *Template
	urlConstant       bool
	urlInfo           urlTemplate // of a url that is not constant
	origin            *url.URL    // the URL's literal scheme and host; nil when host-templated
	headers           []header    // sorted by name
	steps             []string
	allowed           allowList
	until             *Template // Poll.Until; nil without a poll
	interval          time.Duration
	opts              Options
	client            *http.Client // opts.Client with the step's redirect rules
}

type header struct {
	name string // canonical
	tmpl *Template
}

// New parses spec. Its error joins a *FieldError for each bad field: a
// missing method or URL, a template that does not parse, a constant method
// that is not an HTTP token, a URL whose literal scheme is not http(s) or
// that has no host, a host-templated URL (wrapping ErrHostTemplated)
// without AllowedHosts, a bad AllowedHosts entry, a bad header name, or a
// template reading .steps.NAME for a NAME not in spec.Steps, or reading
// .compensation (wrapping ErrNotCompensation) when spec is not a
// compensation's.
func New(spec Spec, opts Options) (*Step, error) {
	b := &stepBuilder{spec: spec, s: &Step{steps: slices.Clip(spec.Steps), opts: opts.withDefaults()}}
	b.method()
	b.url()
	b.allowedHosts()
	b.s.body = b.parse("body", spec.Body)
	b.poll()
	b.headers()
	if len(b.errs) > 0 {
		return nil, errors.Join(b.errs...)
	}
	s := b.s
	s.client = s.withRedirectRules(s.opts.Client)
	return s, nil
}

// stepBuilder builds a Step from its Spec for New, one part at a time,
// collecting a *FieldError for each bad field.
type stepBuilder struct {
	spec Spec
	s    *Step
	errs []error
}

// bad records the error of a field.
func (b *stepBuilder) bad(field string, err error) {
	b.errs = append(b.errs, &FieldError{Field: field, Err: err})
}

// parse parses the template of a field; it may read only earlier steps,
// and .compensation only in a compensation's spec. It returns nil when the
// template does not parse.
func (b *stepBuilder) parse(field, text string) *Template {
	t, err := ParseTemplate(field, text)
	if err != nil {
		b.bad(field, err)
		return nil
	}
	for _, ref := range t.StepRefs() {
		if !slices.Contains(b.spec.Steps, ref) {
			b.bad(field, fmt.Errorf("reads .steps.%s, but %q is not an earlier step", ref, ref))
		}
	}
	if !b.spec.Compensation && t.Reads("compensation") {
		b.bad(field, ErrNotCompensation)
	}
	return t
}

// method parses the method, required; a constant one must be an HTTP
// token.
func (b *stepBuilder) method() {
	s := b.s
	if strings.TrimSpace(b.spec.Method) == "" {
		b.bad("method", errors.New("missing (GET, POST, ...)"))
	} else if s.method = b.parse("method", b.spec.Method); s.method != nil && s.method.IsConstant() {
		if err := checkMethod(constant(s.method)); err != nil {
			b.bad("method", err)
		}
	}
}

// url parses the URL, required: a constant one is checked whole, a
// templated one must have its host as literal text unless the spec has
// allowed hosts. It sets the step's origin when the host is known.
func (b *stepBuilder) url() {
	s, spec := b.s, b.spec
	if strings.TrimSpace(spec.URL) == "" {
		b.bad("url", errors.New("missing"))
	} else if s.url = b.parse("url", spec.URL); s.url != nil && s.url.IsConstant() {
		s.urlConstant = true
		u, err := checkURL(constant(s.url))
		if err != nil {
			b.bad("url", err)
		}
		s.origin = u
	} else if s.url != nil {
		ut, err := prepareURL(s.url)
		switch {
		case err != nil:
			b.bad("url", err)
		case ut.hostTemplated && len(spec.AllowedHosts) == 0:
			b.bad("url", fmt.Errorf("%s %w: run input must not choose where the request goes. Write "+
				"scheme://host[:port] as literal text, ended by /, ? or #, before the first {{...}}, or list "+
				"the hosts the step may reach in allowed_hosts", hostActionText(ut), ErrHostTemplated))
		}
		s.urlInfo = ut
		if !ut.hostTemplated {
			s.origin = ut.origin
		}
	}
}

// allowedHosts parses the patterns of the allowed hosts.
func (b *stepBuilder) allowedHosts() {
	for _, h := range b.spec.AllowedHosts {
		p, err := parseHostPattern(h)
		if err != nil {
			b.bad("allowed_hosts", err)
			continue
		}
		b.s.allowed = append(b.s.allowed, p)
	}
}

// poll parses the poll, if any: its until template and its interval are
// required.
func (b *stepBuilder) poll() {
	poll := b.spec.Poll
	if poll == nil {
		return
	}
	if strings.TrimSpace(poll.Until) == "" {
		b.bad("poll.until", errors.New(`missing (a template that is true when done, like {{eq .output.body.status "done"}})`))
	} else {
		b.s.until = b.parse("poll.until", poll.Until)
	}
	if poll.Interval <= 0 {
		b.bad("poll.interval", fmt.Errorf("want a positive duration, like 30s, got %s", poll.Interval))
	}
	b.s.interval = poll.Interval
}

// headers parses the headers in the order of their names, which must be
// HTTP tokens; the step keeps them under their canonical names.
func (b *stepBuilder) headers() {
	names := make([]string, 0, len(b.spec.Headers))
	for name := range b.spec.Headers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		field := "headers." + name
		if !isToken(name) {
			b.bad(field, fmt.Errorf("%q %w", name, ErrBadHeaderName))
			continue
		}
		if t := b.parse(field, b.spec.Headers[name]); t != nil {
			b.s.headers = append(b.s.headers, header{name: http.CanonicalHeaderKey(name), tmpl: t})
		}
	}
}

// hostActionText names the action of a host-templated URL template that
// renders into its scheme or authority.
func hostActionText(ut urlTemplate) string {
	a := ut.hostAction
	if a == "" {
		return "the template"
	}
	if len(a) > 60 {
		a = a[:57] + "..."
	}
	return a
}

// constant returns what a constant template renders (its text, without
// comments).
func constant(t *Template) string {
	out, _ := t.Execute(nil)
	return out
}

func checkMethod(m string) error {
	if !isToken(strings.TrimSpace(m)) {
		return fmt.Errorf("%q is not an HTTP method", m)
	}
	return nil
}

func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, urlParseError(err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q: want an http:// or https:// URL", redactURL(u))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%q has no host", redactURL(u))
	}
	return u, nil
}

// isToken reports whether s is an HTTP token (RFC 9110), as methods and
// header names are.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if c >= 0x80 || c <= ' ' || strings.IndexByte("\"(),/:;<=>?@[\\]{}\x7f", c) >= 0 {
			return false
		}
	}
	return true
}

// Response is the output of a successful http step.
type Response struct {
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Headers maps lower-case header names to their values, joined with
	// ", ".
	Headers map[string]string `json:"headers"`
	// Body is the decoded JSON body (numbers as json.Number), or the body
	// as a string when it is not JSON.
	Body any `json:"body"`
}

// Run sends the request of the attempt sc describes and returns its
// *Response. It is a workflow.StepFunc.
func (s *Step) Run(ctx context.Context, sc *workflow.StepContext) (any, error) {
	a := AttemptOf(sc, s.steps)
	resp, err := s.Do(ctx, a)
	if err != nil {
		return nil, err
	}
	if s.until != nil {
		done, err := s.Done(a, resp)
		if err != nil {
			return nil, err
		}
		if !done {
			sc.Logger().Info("poll: not done yet; snoozing", "interval", s.interval)
			return nil, workflow.Snooze(s.interval)
		}
	}
	return resp, nil
}

// Done tells whether resp, a response of attempt a, ends the step's poll:
// its until template renders "true" (done) or "false". A step without a
// poll is always done.
func (s *Step) Done(a Attempt, resp *Response) (bool, error) {
	if s.until == nil {
		return true, nil
	}
	data, err := a.Data()
	if err != nil {
		return false, err
	}
	// .output is the response as the step's output JSON would read, so
	// numbers in the body are json.Number as everywhere else.
	data["output"] = map[string]any{"status": resp.Status, "headers": resp.Headers, "body": resp.Body}
	out, err := s.until.Execute(data)
	if err != nil {
		return false, workflow.WithCode(workflow.Permanent(fmt.Errorf("poll.until: %w", err)), CodePollInvalid)
	}
	switch strings.TrimSpace(out) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, workflow.WithCode(workflow.Permanent(fmt.Errorf("poll.until rendered %q, want true or false",
		truncateText(out, 100))), CodePollInvalid)
}

// truncateText cuts s to at most n bytes, marking the cut.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Do renders the request for attempt a, sends it and returns the response
// of a 2xx, or an error classified as the package documentation says.
func (s *Step) Do(ctx context.Context, a Attempt) (*Response, error) {
	data, err := a.Data()
	if err != nil {
		return nil, err
	}
	render := func(t *Template) (string, error) {
		out, err := t.Execute(data)
		if err != nil {
			return "", workflow.WithCode(workflow.Permanent(err), CodeTemplateError)
		}
		return out, nil
	}
	method, err := render(s.method)
	if err != nil {
		return nil, err
	}
	method = strings.ToUpper(strings.TrimSpace(method))
	if err := checkMethod(method); err != nil {
		return nil, workflow.Permanent(fmt.Errorf("method: %w", err))
	}
	rawURL, err := s.url.Execute(data)
	if err != nil {
		if hv, ok := errors.AsType[*errHostValue](err); ok {
			return nil, workflow.WithCode(workflow.Permanent(fmt.Errorf("url: %w", hv)), CodeHostNotAllowed)
		}
		return nil, workflow.WithCode(workflow.Permanent(err), CodeTemplateError)
	}
	u, err := s.checkRenderedURL(rawURL)
	if err != nil {
		return nil, err
	}
	body, err := render(s.body)
	if err != nil {
		return nil, err
	}
	var rd io.Reader = http.NoBody
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, workflow.Permanent(redactError(err))
	}
	for _, h := range s.headers {
		v, err := render(h.tmpl)
		if err != nil {
			return nil, err
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, workflow.Permanent(fmt.Errorf("header %s: value contains a line break or NUL", h.name))
		}
		req.Header.Set(h.name, v)
	}
	if req.Header.Get("Idempotency-Key") == "" && a.IdempotencyKey != "" {
		req.Header.Set("Idempotency-Key", a.IdempotencyKey)
	}
	if body != "" && req.Header.Get("Content-Type") == "" {
		if json.Valid([]byte(body)) {
			req.Header.Set("Content-Type", "application/json")
		} else {
			req.Header.Set("Content-Type", "text/plain; charset=utf-8")
		}
	}

	what := method + " " + redactURL(u)
	resp, err := s.client.Do(req)
	if err != nil {
		err = fmt.Errorf("%s: %w", what, redactError(err))
		var re *redirectError
		switch {
		case errors.As(err, &re):
			return nil, workflow.WithCode(workflow.Permanent(err), CodeRedirectRefused)
		case strings.Contains(err.Error(), "server response headers exceeded"):
			// The transport's MaxResponseHeaderBytes.
			return nil, workflow.WithCode(workflow.Permanent(err), CodeResponseTooLarge)
		}
		return nil, workflow.Transient(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return s.success(what, resp)
	}
	return nil, s.failure(what, resp)
}

// HeaderBytes returns the size of h as a response cap counts it: the
// lengths of its names and values.
func HeaderBytes(h http.Header) int64 {
	var n int64
	for k, vs := range h {
		for _, v := range vs {
			n += int64(len(k) + len(v))
		}
	}
	return n
}

func (s *Step) success(what string, resp *http.Response) (*Response, error) {
	limit := s.opts.MaxBodyBytes
	tooLarge := func(code, format string, args ...any) error {
		return workflow.WithCode(workflow.Permanent(fmt.Errorf("%s: %s: "+format+
			" (the limit of %d bytes counts the header names and values and the body; CAIRN_HTTP_STEP_MAX_BODY)",
			append(append([]any{what, resp.Status}, args...), limit)...)), code)
	}
	hb := HeaderBytes(resp.Header)
	if hb > limit {
		return nil, tooLarge(CodeResponseTooLarge, "response headers of %d bytes, over the limit", hb)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, workflow.Transient(fmt.Errorf("%s: reading the response body: %w", what, redactError(err)))
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(CodeBodyTooLarge, "response body larger than the limit")
	}
	if hb+int64(len(b)) > limit {
		return nil, tooLarge(CodeResponseTooLarge, "response headers (%d bytes) and body (%d bytes) larger than the limit",
			hb, len(b))
	}
	out := &Response{Status: resp.StatusCode, Headers: make(map[string]string, len(resp.Header))}
	for k, v := range resp.Header {
		out.Headers[strings.ToLower(k)] = strings.Join(v, ", ")
	}
	var v any
	if json.Valid(b) && decodeJSON(b, &v) == nil {
		out.Body = v
	} else {
		out.Body = string(b)
	}
	return out, nil
}

// failure builds the error of a non-2xx response.
func (s *Step) failure(what string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, ErrorBodyBytes))
	// Drain a little more so the connection can be reused.
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	msg := fmt.Sprintf("%s: %s", what, resp.Status)
	if snippet := strings.TrimSpace(strings.ToValidUTF8(string(b), string(utf8.RuneError))); snippet != "" {
		msg += ": " + snippet
	}
	err := workflow.WithCode(errors.New(msg), "http_"+strconv.Itoa(resp.StatusCode))
	code := resp.StatusCode
	if code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500 {
		if d, ok := s.retryAfter(resp.Header.Get("Retry-After")); ok {
			return workflow.RetryAfter(err, d)
		}
		return workflow.Transient(err)
	}
	return workflow.Permanent(err)
}

// retryAfter parses a Retry-After value: delay-seconds or an HTTP date.
func (s *Step) retryAfter(v string) (time.Duration, bool) {
	return ParseRetryAfter(v, s.opts.Now(), s.opts.MaxRetryAfter)
}

// ParseRetryAfter parses a Retry-After header value, delay-seconds or an
// HTTP date (a date in the past is no delay), capped at limit. It reports
// false for an empty or malformed value.
func ParseRetryAfter(v string, now time.Time, limit time.Duration) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if strings.Trim(v, "0123456789") == "" { // delay-seconds
		secs, err := strconv.ParseInt(v, 10, 64)           // digits only, so not negative
		if err != nil || secs > int64(limit/time.Second) { // err: too many digits
			return limit, true
		}
		return min(time.Duration(secs)*time.Second, limit), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), limit), true
}
