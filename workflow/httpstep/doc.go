// Package httpstep is Cairn's built-in "http" step type: a workflow step
// that sends one HTTP request and returns the response.
//
// The method, URL, header values and body are Go text/templates (see
// ParseTemplate) rendered for each attempt from the run and its earlier
// steps:
//
//	.input        the run input, decoded from JSON
//	.steps.NAME   the output of the earlier step NAME (for an http step:
//	              {status, headers, body})
//	.run_id       the run ID
//	.workflow     the workflow name
//	.step         this step's name
//	.attempt      this step's attempt number, 1 for the first
//
// and, in the templates of a compensation (Spec.Compensation; see
// workflow.Step.Compensate), whose .step is "compensate:NAME":
//
//	.compensation.step            the name of the step it undoes
//	.compensation.output          that step's output (as .steps.NAME)
//	.compensation.failure_code    the run's failure code, like permanent_error
//	.compensation.failure_reason  the run's failure reason
//
// with the function json, which writes its argument as JSON. JSON numbers
// stay as they were written (json.Number), so IDs never turn into 1e+06.
// A reference to a missing key is an error, not an empty string.
//
// # Where a request may go
//
// Run input must not choose where the step sends its request, nor read the
// answer of a host the definition does not name. So:
//
//   - the scheme, userinfo, host and port come from the URL's literal text:
//     the text before the first {{...}} must hold scheme://host[:port] and
//     end it with "/", "?" or "#". New refuses a URL template that renders
//     into them, or whose host comes after an action (a FieldError on
//     "url" wrapping ErrHostTemplated), unless Spec.AllowedHosts lists the
//     hosts it may reach.
//   - what an action renders into the URL is escaped for where it lands:
//     in a path segment or the fragment every byte but A-Z a-z 0-9 - . _ ~
//     is percent-encoded, so "a/b" is the one segment a%2Fb and "/", "?",
//     "#", "@", "%" and "\" cannot change the URL's structure; in the query
//     url.QueryEscape (& = # + are escaped). An action that may land in
//     more than one of them (after an {{if}} that adds "?", say) gets the
//     path escaping, right in all three. An action ending in urlquery is
//     left alone (already escaped). A rendered path with a "." or ".."
//     segment fails the step (code http_invalid_url): a value must not
//     climb out of the path the definition gives.
//   - with AllowedHosts, a host-templated URL is accepted. A value
//     rendered into the host must be letters, digits and . - _ : [ ] (no
//     userinfo, no percent-encoding, no non-ASCII: write IDNs as xn--); the
//     rendered URL must have no userinfo, and its host and port must match
//     an entry (see Spec.AllowedHosts), or the step fails permanently with
//     code http_host_not_allowed before any connection is made. A whole
//     URL from the input ({{.input.url}}) is not escaped: it may choose any
//     path and query on an allowed host.
//   - redirects are followed at most MaxRedirects (5) times, each to the
//     scheme, host and port of the first request or to a host of
//     AllowedHosts, never from https to http, never with userinfo; any
//     other fails the step permanently with code http_redirect_refused.
//     This is the CheckRedirect of a copy of Options.Client, which runs the
//     client's own CheckRedirect after it.
//   - Options.MaxBodyBytes caps the response, its header names and values
//     and its body together; the default client's transport stops reading
//     headers there too.
//   - the URLs in the step's errors have no userinfo and no fragment, and
//     each query value replaced by REDACTED (keys kept): see RedactURL. So
//     do the net/http errors the step returns (their *url.Error is rebuilt).
//
// A 2xx response succeeds; the step's output is a Response: the status,
// the headers (lower-case names, values joined with ", ") and the body,
// decoded when it is JSON and a string otherwise. Failures are classified
// for the engine:
//
//   - timeouts, refused or reset connections and other transport errors,
//     408, 429 and 5xx are transient (workflow.Transient): the step is
//     retried under its policy. A Retry-After header (seconds or an HTTP
//     date) on those responses sets the next delay (workflow.RetryAfter), at
//     most Options.MaxRetryAfter (1h).
//   - any other status (4xx, an unfollowed 3xx) is permanent
//     (workflow.Permanent), with the first 512 bytes of the body in the
//     error.
//   - a response body over Options.MaxBodyBytes (code http_body_too_large),
//     headers over it or headers and body together over it (code
//     http_response_too_large), a template that fails to render (a missing
//     key, say; code template_error), a rendered URL that is not valid
//     (code http_invalid_url), a host that is not allowed (code
//     http_host_not_allowed) and a refused redirect (code
//     http_redirect_refused) are permanent too.
//
// Every response error carries the code http_<status> (workflow.WithCode), so
// a policy's non_retryable_codes can name, say, http_409 or http_503.
// Each request carries the step's idempotency key (run:step:attempt) in an
// Idempotency-Key header, unless the spec sets that header itself.
package httpstep
