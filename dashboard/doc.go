// Package dashboard is Cairn's HTTP surface: a JSON API under /api/v1 to
// start, list, inspect and steer workflow runs, a Server-Sent Events stream
// of run transitions, health, readiness and metrics endpoints, asynqmon
// under /monitoring, and a hook (Config.UI) for the web UI's pages. The
// API's OpenAPI 3.1 document (openapi.json, embedded) is served to anyone
// at OpenAPIPath; the package's tests check it against the routes and
// against real answers.
//
// # Authentication and authorization
//
// Callers present a bearer token ("Authorization: Bearer <token>") or, from
// a browser, the HttpOnly cookie cairn_token. Tokens come from a file (see
// ParseTokens): "<token> <subject> <role>" per line, role user or admin.
// Tokens are kept as SHA-256 hashes and compared in constant time. A run is
// owned by the subject that started it: a user sees and steers only their
// own runs (another user's run is 404, so IDs cannot be probed); an admin
// sees and steers all, and alone reaches /api/v1/admin/... and /monitoring.
// A missing or unknown token is 401 (with WWW-Authenticate: Bearer), a role
// that does not allow the request 403. Every action is journaled with the
// caller as actor; an admin's action on another subject's run, and every
// restore, also goes to the audit stream (GET /api/v1/admin/audit).
//
// A state-changing request authenticated by the cookie must carry the
// header X-CSRF-Token with Server.CSRFToken(cookie token); on top of that,
// any browser request from another site that would change state is refused
// (http.CrossOriginProtection), which is what guards asynqmon's own write
// requests.
//
// Without tokens, authentication is disabled: every caller is the admin
// "anonymous", the server refuses to listen on anything but loopback, and
// Server.AuthDisabled tells the UI to show a banner.
//
// # Errors
//
// Errors are RFC 7807 problems (application/problem+json; see Problem) with
// a correlation ID, which is also in the X-Request-ID response header (the
// request's own X-Request-ID when it is sane) and on the server's log lines
// about the request. Request bodies are JSON objects of at most 1 MiB (413
// beyond), decoded strictly: malformed JSON, unknown fields or trailing data
// are 400, and nothing is written for a rejected request. An unknown
// workflow is 422 (the request is well-formed, but names nothing that can
// run; 404 is kept for resources in the URL). An action the run's state
// refuses is 409, with the reason.
//
// # Sagas
//
// POST /api/v1/workflows/{id}/cancel?compensate=true cancels a run and then
// runs the compensations of its succeeded steps, last first (it also takes
// a failed run, which keeps its failure code); compensate is true or false
// (1 or 0), given once, and only on cancel: anything else, or a malformed
// query string, is 400 before the run is looked up. A run stopped at a compensation that failed for good
// is 409: POST .../steps/compensate:<step>/retry (or .../recover) runs that
// compensation again. The run JSON carries the saga (on_failure,
// compensating, each step's group and compensation).
//
// # Bulk actions
//
// POST /api/v1/admin/workflows/bulk (admins only; see BulkRequest) recovers
// or cancels many runs: those listed by ID (at most MaxBulkRuns), or every
// run a filter (status, workflow, owner) selects. A dry run ("dry_run":
// true) answers how many runs the action applies to, and writes nothing;
// the action itself carries that count as "expect", and when the runs it
// applies to are no longer that many nothing is done (409), so that what
// the confirmation said is what happens. Each run is acted on as by its
// single action: journaled with the admin as actor, and audited when it is
// another subject's run. The web UI's runs list offers it to admins: tick
// runs, or act on every run matching the list's filters, after a
// confirmation that says how many.
//
// # Charts
//
// The web UI shows time as well as rows: counts by status above the runs
// list (each a link that filters it), each run's current step, attempts,
// countdown to its next retry and duration; an activity page (GET
// /activity?window=1h or 24h) with the runs created per bucket of the
// window by their status now, and the retries and failed runs per workflow
// and step; a timeline on each run's page, one bar per attempt and the
// waits between them (backoff, snooze, timer, signal, circuit breaker,
// ordering key or max_running) to scale, with crashes, repairs and
// operators' actions marked; and the ordering keys and workflow limits in
// use (GET /ordering, admins; anyone may look up a key and see their own
// runs in its line).
//
// Charts are SVG drawn on the server from the data the API reads, with no
// chart library and no script: they work under the pages' strict
// Content-Security-Policy (no inline script or style; colours come from the
// stylesheet), print, and scale with the page. Each has a <title> and a
// <desc> (its text alternative, named by aria-labelledby), a <title>
// tooltip on each shape, and a table with the same numbers.
//
// Their reads are bounded whatever the queue holds: an admin's runs chart
// is one ZCOUNT per status and bucket of the status indexes (which score
// runs by creation time); a user's, and the counts of a filtered list, read
// the newest runs' heads up to a cap (and say so when it is reached); the
// retries chart reads the window's notifications, newest first, up to a
// cap. Finished runs count until they expire.
//
// # Event stream
//
// GET /api/v1/events streams the queue's notifications (see
// workflow.Notification) of the caller's runs: step_failed (with can_retry
// and can_skip), run_failed, retry_scheduled, run_recovered, run_succeeded,
// run_cancelled, run_needs_attention, run_waiting, and a saga's
// run_compensating (its failure: step, code, reason, group),
// run_compensated (code, reason) and group_rolled_back (group, step, code,
// reason), and an operator's run_paused and run_resumed (actor). One
// goroutine per server waits on the
// stream (XREAD BLOCK) and wakes the open streams, so a transition reaches
// clients within milliseconds, and an open stream costs no Redis connection
// of its own. Last-Event-ID resumes a stream, replaying at most the newest
// 1,000 notifications and none older than 24h (a capped replay starts with
// a replay_capped event). A subject may have 8 streams open per server
// (429 beyond), and a client that stops reading is dropped after 30s; see
// Config for the settings.
package dashboard
