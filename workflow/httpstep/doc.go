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
// with the function json, which writes its argument as JSON. JSON numbers
// stay as they were written (json.Number), so IDs never turn into 1e+06.
// A reference to a missing key is an error, not an empty string.
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
//   - a response body over Options.MaxBodyBytes (code http_body_too_large)
//     and a template that fails to render (a missing key, say; code
//     template_error) are permanent too.
//
// Every response error carries the code http_<status> (workflow.WithCode), so
// a policy's non_retryable_codes can name, say, http_409 or http_503.
// Each request carries the step's idempotency key (run:step:attempt) in an
// Idempotency-Key header, unless the spec sets that header itself.
package httpstep
