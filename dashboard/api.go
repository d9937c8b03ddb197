package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/cairnhq/cairn/workflow"
)

// routes registers every endpoint on the mux, through handle.
func (s *Server) routes() {
	user := func(h http.HandlerFunc) http.Handler { return s.RequireAuth(false, h) }
	admin := func(h http.HandlerFunc) http.Handler { return s.RequireAuth(true, h) }

	s.handle("GET /healthz", http.HandlerFunc(s.healthz))
	s.handle("GET /readyz", http.HandlerFunc(s.readyz))
	s.handle("GET "+OpenAPIPath, http.HandlerFunc(s.openAPI))
	s.handle("GET /metrics", user(s.cfg.Metrics.ServeHTTP))

	s.handle("GET /api/v1/me", user(s.me))
	s.handle("POST /api/v1/workflows", user(s.startRun))
	s.handle("GET /api/v1/workflows", user(s.listRuns))
	s.handle("GET /api/v1/workflows/{id}", user(s.getRun))
	s.handle("GET /api/v1/workflows/{id}/events", user(s.runEvents))
	s.handle("POST /api/v1/workflows/{id}/recover", user(s.action(actionRecover)))
	s.handle("POST /api/v1/workflows/{id}/cancel", user(s.action(actionCancel)))
	s.handle("POST /api/v1/workflows/{id}/steps/{step}/retry", user(s.action(actionRetry)))
	s.handle("POST /api/v1/workflows/{id}/steps/{step}/skip", user(s.action(actionSkip)))
	s.handle("POST /api/v1/workflows/{id}/pause", user(s.action(actionPause)))
	s.handle("POST /api/v1/workflows/{id}/resume", user(s.action(actionResume)))
	s.handle("POST /api/v1/workflows/{id}/steps/{step}/retry-now", user(s.action(actionRetryNow)))
	s.handle("GET /api/v1/ordering-keys/{key}", user(s.orderingKey))
	s.handle("GET /api/v1/breakers", user(s.breakers))
	s.handle("GET /api/v1/latency", user(s.latency))
	s.handle("POST /api/v1/admin/breakers/{name}/reset", admin(s.resetBreaker))
	s.handle("POST /api/v1/workflows/{id}/signals/{name}", user(s.signal))
	s.handle("GET /api/v1/events", user(s.events))
	s.handle("GET /api/v1/workers", admin(s.workers))

	s.handle("GET /api/v1/admin/workflows/failed", admin(s.attention))
	s.handle("POST /api/v1/admin/workflows/{id}/restore", admin(s.restore))
	s.handle("POST "+BulkPath, admin(s.bulk))
	s.handle("GET /api/v1/admin/audit", admin(s.audit))

	s.mountMonitoring()
}

// handle registers h for pattern on the mux and records the pattern in
// s.patterns, so that the routes can be listed (the OpenAPI document's test
// checks it against them). Every route of routes and mountMonitoring goes
// through it; the web UI's pages (Config.UI) do not.
func (s *Server) handle(pattern string, h http.Handler) {
	s.patterns = append(s.patterns, pattern)
	s.mux.Handle(pattern, h)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers ready when the Redis node that holds the queue's keys
// serves them (workflow.PingQueue, on Config.Redis): on a Redis Cluster the master
// that owns the slot of the queue's hash tag, so a cluster that is down, a
// failed or unreachable master, or a node that no longer owns the slot is
// not ready (another node answering is not enough); otherwise the server
// (for Sentinel, the current master).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	err := workflow.PingQueue(ctx, s.cfg.Redis, s.cfg.Client.Queue())
	switch {
	case errors.Is(err, workflow.ErrQueueNodeUnknown):
		reqLog(r).Warn("not ready: no Redis Cluster master is known for the queue's slot", "error", err)
		writeProblem(w, r, http.StatusServiceUnavailable, ProblemUnavailable,
			"no Redis Cluster master is known for the queue's slot")
	case err != nil:
		reqLog(r).Warn("not ready: Redis does not serve the queue's keys", "error", err)
		writeProblem(w, r, http.StatusServiceUnavailable, ProblemUnavailable, "Redis does not serve the queue's keys")
	default:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	}
}

// principal returns the caller; RequireAuth put it in the context.
func principal(r *http.Request) Principal {
	p, _ := PrincipalFrom(r.Context())
	return p
}

func (s *Server) me(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	writeJSON(w, http.StatusOK, map[string]any{"subject": p.Subject, "role": p.Role, "auth_disabled": s.AuthDisabled()})
}

// decodeBody decodes a JSON object from the request body into dst,
// strictly: at most MaxBodyBytes (413), well-formed, no unknown fields,
// nothing after the object, and nothing readers take differently (invalid
// UTF-8, a lone surrogate, a duplicate key, anywhere in the body, run input
// included: workflow.CheckJSON) (400). An empty body is allowed unless
// required.
func decodeBody(w http.ResponseWriter, r *http.Request, dst any, required bool) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if tooLarge, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return problemf(http.StatusRequestEntityTooLarge, ProblemBodyTooLarge, "request body larger than %d bytes", tooLarge.Limit)
	}
	if err != nil {
		return problemf(http.StatusBadRequest, ProblemInvalidRequest, "reading the request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if required {
			return problemf(http.StatusBadRequest, ProblemInvalidRequest, "a JSON object is required as the request body")
		}
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return problemf(http.StatusBadRequest, ProblemInvalidRequest, "malformed request body: %v", jsonError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return problemf(http.StatusBadRequest, ProblemInvalidRequest, "malformed request body: data after the JSON object")
	}
	if err := workflow.CheckJSON(body); err != nil {
		return problemf(http.StatusBadRequest, ProblemInvalidRequest, "request body: %v", err)
	}
	return nil
}

func jsonError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("field %q: want %s, got %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("want %s, got %s", te.Type, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected end of JSON"
	}
	return err.Error()
}

// loadRun returns the run named in the path, if the caller may see it: a
// run of another user is "not found" to a user, so that run IDs cannot be
// probed.
func (s *Server) loadRun(r *http.Request) (*workflow.Run, error) {
	id := r.PathValue("id")
	run, err := s.client.Get(r.Context(), id)
	if err != nil {
		return nil, err
	}
	p := principal(r)
	if !p.CanSee(run.Owner) {
		return nil, fmt.Errorf("%w: %s", workflow.ErrRunNotFound, id)
	}
	return visibleRun(p, run), nil
}

// visibleRun leaves out of run what its owner may not see: in an ordering
// key's shared line (where an admin or a trusted client put the run), the
// runs that hold the line are other owners' business, shown to admins
// only. In the owner's own line they are the owner's runs.
func visibleRun(p Principal, run *workflow.Run) *workflow.Run {
	if w := run.WaitingFor; w != nil && w.Shared && !p.IsAdmin() {
		w.HeldBy = nil
	}
	return run
}

// traceContext reads the W3C trace context of a request that starts a run.
var traceContext = propagation.TraceContext{}

type startRequest struct {
	Workflow       string          `json:"workflow"`
	Input          json.RawMessage `json:"input"`
	IdempotencyKey string          `json:"idempotency_key"`
	OrderingKey    string          `json:"ordering_key"`
	// SharedOrdering puts the run in the shared line of OrderingKey, which
	// runs of every owner join (admins only); otherwise the key's line is
	// the caller's own.
	SharedOrdering bool `json:"shared_ordering"`
}

func (s *Server) startRun(w http.ResponseWriter, r *http.Request) {
	var req startRequest
	if err := decodeBody(w, r, &req, true); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Workflow == "" {
		s.fail(w, r, problemf(http.StatusBadRequest, ProblemInvalidRequest, "field \"workflow\" is required"))
		return
	}
	p := principal(r)
	if req.SharedOrdering {
		if req.OrderingKey == "" {
			s.fail(w, r, problemf(http.StatusBadRequest, ProblemInvalidRequest,
				"field \"shared_ordering\" needs an \"ordering_key\""))
			return
		}
		if !p.IsAdmin() {
			s.fail(w, r, problemf(http.StatusForbidden, ProblemForbidden,
				"only admins start runs in an ordering key's shared line; without shared_ordering the key's line is yours"))
			return
		}
	}
	var input any // absent or null: {}
	if len(req.Input) > 0 && string(req.Input) != "null" {
		input = req.Input
	}
	// The caller's W3C trace context (traceparent, tracestate), if any: the
	// run joins its trace (workflow.ClientConfig.TracerProvider). A header
	// that is not a valid one is ignored.
	ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	run, err := s.client.Start(ctx, req.Workflow, input,
		&workflow.StartOptions{IdempotencyKey: req.IdempotencyKey, OrderingKey: req.OrderingKey, Owner: p.Subject,
			SharedOrdering: req.SharedOrdering})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !p.CanSee(run.Owner) {
		// Keys are scoped by owner, so a key finds only the caller's own
		// runs; should one name another subject's run all the same, do not
		// show it (nothing was written).
		s.fail(w, r, problemf(http.StatusConflict, ProblemConflict,
			"idempotency key %q is already used by another subject", req.IdempotencyKey))
		return
	}
	reqLog(r).Info("run started", workflow.AttrRunID, run.ID, workflow.AttrWorkflow, run.Workflow)
	w.Header().Set("Location", "/api/v1/workflows/"+run.ID)
	writeJSON(w, http.StatusCreated, run)
}

// orderingKey answers GET /api/v1/ordering-keys/{key}[?owner=S|?shared=true]:
// a line of the key, its active runs and its waiting runs in the order they
// will start (a workflow.KeyRuns). Keys are scoped by owner: without a
// parameter it is the caller's own line. An admin reads another subject's
// line with owner, and the key's shared line with shared=true; a user may
// name only themselves.
func (s *Server) orderingKey(w http.ResponseWriter, r *http.Request) {
	_, limit, err := pageParams(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if r.URL.Query().Get("limit") == "" {
		limit = 1000
	}
	line, err := keyLine(principal(r), r.PathValue("key"), r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	runs, err := s.client.OrderingKey(r.Context(), line, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, runs)
}

// keyLine is the line of an ordering key that a request names (owner, shared
// in q), if p may read it: its own line by default; another subject's or
// the shared line, for admins only.
func keyLine(p Principal, key string, q url.Values) (workflow.KeyLine, error) {
	line := workflow.KeyLine{Key: key, Owner: p.Subject}
	owner, shared := q.Get("owner"), q.Get("shared")
	switch shared {
	case "", "false", "0":
	case "true", "1":
		line.Shared, line.Owner = true, ""
	default:
		return line, problemf(http.StatusBadRequest, ProblemInvalidRequest, "shared %q: want true or false", shared)
	}
	if owner != "" {
		if line.Shared {
			return line, problemf(http.StatusBadRequest, ProblemInvalidRequest, "give owner or shared, not both")
		}
		line.Owner = owner
	}
	if !p.IsAdmin() && (line.Shared || line.Owner != p.Subject) {
		return line, problemf(http.StatusForbidden, ProblemForbidden,
			"only admins read another subject's line or a key's shared line; your line of a key holds your runs only")
	}
	return line, nil
}

// RunList is the answer of GET /api/v1/workflows and GET
// /api/v1/admin/workflows/failed.
type RunList struct {
	Runs []*workflow.Run `json:"runs"`
	// NextCursor continues the listing ("" after the last page).
	NextCursor string `json:"next_cursor"`
	// Scanned is the number of runs a filtered page examined, for an
	// admin (absent when it needed no filter, and for a user: it counts
	// other owners' runs too).
	Scanned int `json:"scanned,omitempty"`
	// ScanLimited: the bound of the scan ended the page before it held
	// limit runs; next_cursor goes on from where it stopped.
	ScanLimited bool `json:"scan_limited,omitempty"`
}

var workflowNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// pageParams reads the cursor and limit query parameters.
func pageParams(r *http.Request) (cursor string, limit int, err error) {
	q := r.URL.Query()
	cursor = q.Get("cursor")
	if len(cursor) > 200 {
		return "", 0, problemf(http.StatusBadRequest, ProblemInvalidRequest, "cursor longer than 200 bytes")
	}
	limit = 50
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return "", 0, problemf(http.StatusBadRequest, ProblemInvalidRequest, "limit %q: want an integer from 1 to 1000", v)
		}
		limit = n
	}
	return cursor, limit, nil
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	cursor, limit, err := pageParams(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	opts := workflow.ListOptions{Status: workflow.RunStatus(q.Get("status")), Workflow: q.Get("workflow"),
		Owner: q.Get("owner"), Cursor: cursor, Limit: limit}
	switch v := q.Get("paused"); v {
	case "", "false", "0":
	case "true", "1":
		opts.Paused = true
	default:
		if len(v) > 32 {
			v = v[:32] + "..."
		}
		s.fail(w, r, problemf(http.StatusBadRequest, ProblemInvalidRequest, "query parameter \"paused\" is %q: want true or false", v))
		return
	}
	if opts.Workflow != "" && !workflowNameRE.MatchString(opts.Workflow) {
		s.fail(w, r, problemf(http.StatusBadRequest, ProblemInvalidRequest, "workflow %q: not a workflow name", opts.Workflow))
		return
	}
	if _, err := s.searchParams(q, &opts, principal(r).IsAdmin()); err != nil {
		s.fail(w, r, err)
		return
	}
	if p := principal(r); !p.IsAdmin() {
		if opts.Owner != "" && opts.Owner != p.Subject {
			s.fail(w, r, problemf(http.StatusForbidden, ProblemForbidden, "only admins list other subjects' runs"))
			return
		}
		opts.Owner = p.Subject
	}
	page, err := s.client.ListPage(r.Context(), opts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if page.Runs == nil {
		page.Runs = []*workflow.Run{}
	}
	scanned := page.Scanned
	if !principal(r).IsAdmin() {
		scanned = 0 // it counts other owners' runs too
	}
	writeJSON(w, http.StatusOK, RunList{Runs: page.Runs, NextCursor: page.Next, Scanned: scanned, ScanLimited: page.Limited})
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	run, err := s.loadRun(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}

// EventList is the answer of GET /api/v1/workflows/{id}/events: the run's
// journal, oldest first.
type EventList struct {
	RunID  string           `json:"run_id"`
	Events []workflow.Event `json:"events"`
}

func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	run, err := s.loadRun(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	evs, err := s.client.Events(r.Context(), run.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if evs == nil {
		evs = []workflow.Event{}
	}
	writeJSON(w, http.StatusOK, EventList{RunID: run.ID, Events: evs})
}

// Operator actions of the run endpoints.
const (
	actionRecover = "recover"
	actionCancel  = "cancel"
	actionRetry   = "retry"
	actionSkip    = "skip"
	// actionPause and actionResume: a paused run begins no new attempt
	// (workflow.Client.Pause); both are idempotent.
	actionPause  = "pause"
	actionResume = "resume"
	// actionRetryNow makes a step's scheduled retry due now
	// (workflow.Client.RetryNow).
	actionRetryNow = "retry_now"
)

// emptyBody is the body of an action: none, or an empty JSON object.
type emptyBody struct{}

// compensateParam reads the query parameter compensate of an action: of
// cancel only, once, "true" or "false" (or "1" or "0"); absent is false. A
// malformed query string is refused, rather than read without the pairs it
// garbles (a cancel meant to compensate would otherwise just cancel).
func compensateParam(r *http.Request, action string) (bool, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return false, problemf(http.StatusBadRequest, ProblemInvalidRequest, "malformed query string: %v", err)
	}
	vs, ok := q["compensate"]
	switch {
	case !ok:
		return false, nil
	case action != actionCancel:
		return false, problemf(http.StatusBadRequest, ProblemInvalidRequest,
			"query parameter \"compensate\" applies to cancel only")
	case len(vs) != 1:
		return false, problemf(http.StatusBadRequest, ProblemInvalidRequest,
			"query parameter \"compensate\" given %d times: give it once", len(vs))
	}
	switch vs[0] {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	v := vs[0]
	if len(v) > 32 {
		v = v[:32] + "..."
	}
	return false, problemf(http.StatusBadRequest, ProblemInvalidRequest,
		"query parameter \"compensate\" is %q: want true or false", v)
}

// action returns the handler of an operator action on a run. The actor is
// the caller; an admin's action on another subject's run is also recorded
// in the audit stream. Cancel takes the query parameter compensate=true:
// cancel, then run the compensations of the run's succeeded steps
// (workflow.ActionOptions.Compensate).
func (s *Server) action(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := decodeBody(w, r, &emptyBody{}, false); err != nil {
			s.fail(w, r, err)
			return
		}
		compensate, err := compensateParam(r, name)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		step := r.PathValue("step")
		if len(step) > 128 {
			s.fail(w, r, problemf(http.StatusBadRequest, ProblemInvalidRequest, "step name longer than 128 bytes"))
			return
		}
		run, err := s.loadRun(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		p := principal(r)
		opts := &workflow.ActionOptions{Actor: p.Subject, Compensate: compensate}
		ctx := r.Context()
		var after *workflow.Run
		switch name {
		case actionRecover:
			after, err = s.client.Recover(ctx, run.ID, opts)
		case actionCancel:
			after, err = s.client.Cancel(ctx, run.ID, opts)
		case actionRetry:
			after, err = s.client.RetryStep(ctx, run.ID, step, opts)
		case actionSkip:
			after, err = s.client.SkipStep(ctx, run.ID, step, opts)
		case actionPause:
			after, err = s.client.Pause(ctx, run.ID, opts)
		case actionResume:
			after, err = s.client.Resume(ctx, run.ID, opts)
		case actionRetryNow:
			after, err = s.client.RetryNow(ctx, run.ID, step, opts)
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		reqLog(r).Info("operator action applied", workflow.AttrRunID, run.ID, workflow.AttrActor, p.Subject,
			"action", name, workflow.AttrStep, step, "compensate", compensate)
		if p.IsAdmin() && run.Owner != p.Subject {
			detail := "action on another subject's run"
			if compensate {
				detail += "; compensate: its compensations run"
			}
			s.recordAudit(r, workflow.AuditEntry{Actor: p.Subject, Action: name, RunID: run.ID, Workflow: run.Workflow,
				Owner: run.Owner, Step: step, Detail: detail})
		}
		writeJSON(w, http.StatusOK, visibleRun(p, after))
	}
}

// recordAudit records an applied admin action. The action has happened: a
// failure to record it is logged, not answered.
func (s *Server) recordAudit(r *http.Request, e workflow.AuditEntry) {
	// The request's context may end with the response; the record should not.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if _, err := s.client.RecordAudit(ctx, e); err != nil {
		reqLog(r).Error("audit entry not recorded", "error", err, workflow.AttrRunID, e.RunID, "action", e.Action,
			workflow.AttrActor, e.Actor)
	}
}

func (s *Server) attention(w http.ResponseWriter, r *http.Request) {
	cursor, limit, err := pageParams(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	runs, next, err := s.client.NeedingAttention(r.Context(), cursor, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if runs == nil {
		runs = []*workflow.Run{}
	}
	writeJSON(w, http.StatusOK, RunList{Runs: runs, NextCursor: next})
}

type restoreRequest struct {
	FromStep string `json:"from_step"`
}

func (s *Server) restore(w http.ResponseWriter, r *http.Request) {
	var req restoreRequest
	if err := decodeBody(w, r, &req, true); err != nil {
		s.fail(w, r, err)
		return
	}
	if strings.TrimSpace(req.FromStep) == "" || len(req.FromStep) > 128 {
		s.fail(w, r, problemf(http.StatusBadRequest, ProblemInvalidRequest, "field \"from_step\" is required (a step name)"))
		return
	}
	p := principal(r)
	run, err := s.client.Restore(r.Context(), r.PathValue("id"), req.FromStep, &workflow.ActionOptions{Actor: p.Subject})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	reqLog(r).Info("run restored", workflow.AttrRunID, run.ID, workflow.AttrActor, p.Subject, workflow.AttrStep, req.FromStep)
	writeJSON(w, http.StatusOK, run)
}

// AuditList is the answer of GET /api/v1/admin/audit.
type AuditList struct {
	Entries []workflow.AuditEntry `json:"entries"`
	// Next is the after parameter of the next page: the last entry's ID,
	// or the after given when there was none.
	Next string `json:"next"`
}

// audit serves GET /api/v1/admin/audit?after=&limit=. after is an entry ID
// <ms>-<seq> (see parseStreamID); the largest, 18446744073709551615 twice,
// is valid and has nothing after it.
func (s *Server) audit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after := q.Get("after")
	if after != "" {
		id, err := streamIDParam("after", after)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		after = id.String()
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			s.fail(w, r, problemf(http.StatusBadRequest, ProblemInvalidRequest, "limit %q: want an integer from 1 to 1000", v))
			return
		}
		limit = n
	}
	es, err := s.client.Audit(r.Context(), after, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if es == nil {
		es = []workflow.AuditEntry{}
	}
	next := after
	if len(es) > 0 {
		next = es[len(es)-1].ID
	}
	writeJSON(w, http.StatusOK, AuditList{Entries: es, Next: next})
}
