package dashboard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"

	"github.com/cairnhq/cairn/workflow"
)

// Problem is an error response, RFC 7807 application/problem+json. Type is
// a URN, "urn:cairn:problem:<kind>", one per kind of error (the README lists
// them); CorrelationID is the request's, also in the X-Request-ID response
// header and on the server's log lines about the request.
type Problem struct {
	Type          string `json:"type"`
	Title         string `json:"title"`
	Status        int    `json:"status"`
	Detail        string `json:"detail,omitempty"`
	CorrelationID string `json:"correlation_id"`
}

// Problem kinds: the last part of Problem.Type.
const (
	ProblemUnauthorized     = "unauthorized"       // 401: missing or unknown token
	ProblemForbidden        = "forbidden"          // 403: not allowed for the caller's role
	ProblemCSRF             = "csrf"               // 403: cookie-authenticated change without a valid X-CSRF-Token
	ProblemCrossOrigin      = "cross-origin"       // 403: a browser's cross-origin state change
	ProblemNotFound         = "not-found"          // 404: no such route, or no such run visible to the caller
	ProblemMethodNotAllowed = "method-not-allowed" // 405
	ProblemInvalidRequest   = "invalid-request"    // 400: malformed JSON, unknown fields, bad parameters
	ProblemInvalidRunID     = "invalid-run-id"     // 400: not the form of a run ID
	ProblemInvalidInput     = "invalid-input"      // 400: a run input the client refuses
	ProblemBodyTooLarge     = "body-too-large"     // 413
	ProblemUnknownWorkflow  = "unknown-workflow"   // 422: no worker has registered the workflow
	ProblemActionRefused    = "action-refused"     // 409: the run's state refuses the action
	ProblemConflict         = "conflict"           // 409: idempotency key used otherwise
	ProblemTooManyStreams   = "too-many-streams"   // 429: the subject has too many event streams open
	ProblemUnavailable      = "unavailable"        // 503: Redis unreachable
	ProblemInternal         = "internal"           // 500
)

// ProblemType returns the Type of a problem kind.
func ProblemType(kind string) string { return "urn:cairn:problem:" + kind }

// apiError is an error with the problem it becomes.
type apiError struct {
	status int
	kind   string
	detail string
}

func (e *apiError) Error() string { return e.detail }

func problemf(status int, kind, format string, args ...any) *apiError {
	return &apiError{status: status, kind: kind, detail: fmt.Sprintf(format, args...)}
}

// UnavailableRetryAfter is the Retry-After, in seconds, of every 503
// (problem unavailable): of /readyz, and of any request that found Redis
// unavailable (see workflow.IsRedisUnavailable).
const UnavailableRetryAfter = 5

// errorProblem maps an error of the workflow client to its problem; nil
// for an unexpected error (a 500). ctx is the context the call ran under:
// once it is done, its own deadline is not taken for Redis being
// unavailable.
func errorProblem(ctx context.Context, err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, workflow.ErrInvalidRunID):
		return problemf(http.StatusBadRequest, ProblemInvalidRunID, "%v", err)
	case errors.Is(err, workflow.ErrBreakerNotFound):
		return problemf(http.StatusNotFound, ProblemNotFound, "%v", err)
	case errors.Is(err, workflow.ErrRunNotFound):
		return problemf(http.StatusNotFound, ProblemNotFound, "%v", err)
	case errors.Is(err, workflow.ErrUnknownWorkflow):
		return problemf(http.StatusUnprocessableEntity, ProblemUnknownWorkflow, "%v", err)
	case errors.Is(err, workflow.ErrInvalidInput):
		return problemf(http.StatusBadRequest, ProblemInvalidInput, "%v", err)
	case errors.Is(err, workflow.ErrInvalidStatus), errors.Is(err, workflow.ErrInvalidCursor),
		errors.Is(err, workflow.ErrInvalidSearch):
		return problemf(http.StatusBadRequest, ProblemInvalidRequest, "%v", err)
	case errors.Is(err, workflow.ErrActionRefused), errors.Is(err, workflow.ErrRunFinished),
		errors.Is(err, workflow.ErrMailboxFull):
		return problemf(http.StatusConflict, ProblemActionRefused, "%v", err)
	case errors.Is(err, workflow.ErrIdempotencyConflict):
		return problemf(http.StatusConflict, ProblemConflict, "%v", err)
	case ctx.Err() == nil && workflow.IsRedisUnavailable(err):
		// The cause (an address, say) is for the log, not the caller.
		return problemf(http.StatusServiceUnavailable, ProblemUnavailable,
			"Redis is unavailable; retry in %d seconds", UnavailableRetryAfter)
	}
	return nil
}

// fail writes the problem of err. An unexpected error is logged with the
// request's correlation ID and answered with a 500 that does not show it.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if ae := errorProblem(r.Context(), err); ae != nil {
		if ae.kind == ProblemUnavailable {
			reqLog(r).Warn("request refused: Redis is unavailable", "error", err)
		}
		writeProblem(w, r, ae.status, ae.kind, ae.detail)
		return
	}
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		reqState(r).status = 499 // the client went away; nobody reads the answer
		return
	}
	reqLog(r).Error("request failed", "error", err)
	writeProblem(w, r, http.StatusInternalServerError, ProblemInternal,
		"internal error; the server log has the details under correlation_id "+reqState(r).id)
}

// apiCSP is the Content-Security-Policy of the API's JSON answers: a
// document that loads nothing and may not be framed.
const apiCSP = "default-src 'none'; frame-ancestors 'none'"

func writeProblem(w http.ResponseWriter, r *http.Request, status int, kind, detail string) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", apiCSP)
	h.Del("Content-Length")
	switch status {
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", `Bearer realm="cairn"`)
	case http.StatusServiceUnavailable:
		h.Set("Retry-After", strconv.Itoa(UnavailableRetryAfter))
	}
	w.WriteHeader(status)
	//nolint:errchkjson // the status is sent: a write error is the client going away, with no one to tell
	_ = json.NewEncoder(w).Encode(Problem{Type: ProblemType(kind), Title: http.StatusText(status), Status: status,
		Detail: detail, CorrelationID: reqState(r).id})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", apiCSP)
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) //nolint:errchkjson // as in writeProblem; v is one of the API's response types
}

// requestState is what the request middleware keeps about a request: its
// correlation ID, logger, caller and final status.
type requestState struct {
	id      string
	log     *slog.Logger
	subject string
	status  int
}

type stateKey struct{}

func reqState(r *http.Request) *requestState {
	if st, ok := r.Context().Value(stateKey{}).(*requestState); ok {
		return st
	}
	return &requestState{log: slog.Default()}
}

// reqLog returns the logger of a request: the server's, with its
// correlation_id.
func reqLog(r *http.Request) *slog.Logger { return reqState(r).log }

// CorrelationID returns the correlation ID of a request served by a Server.
func CorrelationID(r *http.Request) string { return reqState(r).id }

// saneRequestID is what an incoming X-Request-ID must look like to be used
// as the correlation ID.
var saneRequestID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/+=-]{0,127}$`)

func newCorrelationID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// statusWriter records the status of a response. Unwrap lets
// http.ResponseController reach the connection (flush, deadlines).
type statusWriter struct {
	http.ResponseWriter
	st *requestState
}

func (w *statusWriter) WriteHeader(code int) {
	if w.st.status == 0 {
		w.st.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.st.status == 0 {
		w.st.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// observe is the outermost middleware: it gives each request its
// correlation ID (X-Request-ID when sane, else a new one; echoed in the
// response), sets X-Content-Type-Options: nosniff and X-Frame-Options:
// DENY on every response, gives the request a logger carrying its ID, turns a panic into a 500, refuses
// browsers' cross-origin state changes, and logs one line per request.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.clock.Now()
		id := r.Header.Get("X-Request-ID")
		if !saneRequestID.MatchString(id) {
			id = newCorrelationID()
		}
		st := &requestState{id: id, log: s.log.With("correlation_id", id)}
		r = r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
		h := w.Header()
		h.Set("X-Request-ID", id)
		// Every response: no MIME sniffing, no framing (pages and
		// asynqmon's set their own Content-Security-Policy too).
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		sw := &statusWriter{ResponseWriter: w, st: st}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler { //nolint:errorlint // recover's value itself, compared as net/http compares it
					panic(v)
				}
				st.log.Error("panic serving request", "panic", v, "method", r.Method, "path", r.URL.Path)
				if st.status == 0 {
					writeProblem(sw, r, http.StatusInternalServerError, ProblemInternal,
						"internal error; the server log has the details under correlation_id "+id)
				}
			}
			level := slog.LevelInfo
			if st.status >= 500 {
				level = slog.LevelError
			}
			st.log.Log(r.Context(), level, "http request", "method", r.Method, "path", r.URL.Path,
				"status", st.status, "subject", st.subject, "duration", s.clock.Now().Sub(start))
		}()
		if err := s.crossOrigin.Check(r); err != nil {
			writeProblem(sw, r, http.StatusForbidden, ProblemCrossOrigin, "cross-origin request refused: "+err.Error())
			return
		}
		next.ServeHTTP(sw, r)
	})
}
