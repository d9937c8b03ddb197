package dashboard_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

func TestStartAndSteerARun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	resp := e.do(req{method: "POST", path: "/api/v1/workflows", token: aliceToken,
		body: `{"workflow":"demo","input":{"fail_step":"transform","permanent":true},"idempotency_key":"k1"}`})
	if resp.status != 201 {
		t.Fatalf("start: %d %s", resp.status, resp.body)
	}
	var run workflow.Run
	resp.decode(t, &run)
	if run.Owner != "alice" || run.Workflow != "demo" || resp.header.Get("Location") != "/api/v1/workflows/"+run.ID {
		t.Fatalf("started %+v (Location %q)", run, resp.header.Get("Location"))
	}
	// The same key again: the same run, nothing new.
	again := e.do(req{method: "POST", path: "/api/v1/workflows", token: aliceToken, body: `{"workflow":"demo","idempotency_key":"k1"}`})
	var same workflow.Run
	again.decode(t, &same)
	if again.status != 201 || same.ID != run.ID {
		t.Fatalf("repeat start: %d, run %s, want %s", again.status, same.ID, run.ID)
	}
	// Keys are scoped by owner: bob's k1 is not alice's. He starts a run of
	// his own, learns nothing of hers, and his k1 then finds his run.
	bob := e.do(req{method: "POST", path: "/api/v1/workflows", token: bobToken, body: `{"workflow":"demo","idempotency_key":"k1"}`})
	var bobs workflow.Run
	bob.decode(t, &bobs)
	if bob.status != 201 || bobs.Owner != "bob" || bobs.ID == run.ID || strings.Contains(string(bob.body), run.ID) {
		t.Fatalf("bob uses alice's key: %d %s", bob.status, bob.body)
	}
	bobAgain := e.do(req{method: "POST", path: "/api/v1/workflows", token: bobToken, body: `{"workflow":"demo","idempotency_key":"k1"}`})
	var bobsAgain workflow.Run
	bobAgain.decode(t, &bobsAgain)
	if bobAgain.status != 201 || bobsAgain.ID != bobs.ID {
		t.Fatalf("bob's repeat: %d %s, want his run %s", bobAgain.status, bobAgain.body, bobs.ID)
	}
	e.wait(run.ID)

	resp = e.do(req{method: "GET", path: "/api/v1/workflows/" + run.ID, token: aliceToken})
	var got workflow.Run
	resp.decode(t, &got)
	if got.Status != workflow.StatusFailed || got.Step("transform").Status != workflow.StepFailed || len(got.Steps) != 3 {
		t.Fatalf("failed run: %+v", got)
	}
	resp = e.do(req{method: "GET", path: "/api/v1/workflows/" + run.ID + "/events", token: aliceToken})
	var evs dashboard.EventList
	resp.decode(t, &evs)
	if evs.RunID != run.ID || len(evs.Events) == 0 || evs.Events[len(evs.Events)-1].Type != workflow.EventRunFailed {
		t.Fatalf("events: %+v", evs)
	}

	// Needing attention, with the reason.
	resp = e.do(req{method: "GET", path: "/api/v1/admin/workflows/failed", token: rootToken})
	var att dashboard.RunList
	resp.decode(t, &att)
	if len(att.Runs) != 1 || att.Runs[0].ID != run.ID || !strings.Contains(att.Runs[0].FailureReason, "permanent") {
		t.Fatalf("attention: %s", resp.body)
	}

	// Cancel is refused: the run has failed already.
	resp = e.do(req{method: "POST", path: "/api/v1/workflows/" + run.ID + "/cancel", token: aliceToken})
	if p := resp.problem(t); resp.status != 409 || p.Type != dashboard.ProblemType(dashboard.ProblemActionRefused) ||
		!strings.Contains(p.Detail, "failed") {
		t.Fatalf("cancel of a failed run: %d %+v", resp.status, p)
	}
	// Recover: the run runs again, journaled with alice as actor.
	resp = e.do(req{method: "POST", path: "/api/v1/workflows/" + run.ID + "/recover", token: aliceToken, body: `{}`})
	if resp.status != 200 {
		t.Fatalf("recover: %d %s", resp.status, resp.body)
	}
	e.wait(run.ID)
	var actor string
	for _, ev := range e.snapshotEvents(run.ID) {
		if ev.Type == workflow.EventRunRecovered {
			actor = ev.Details["actor"]
		}
	}
	if actor != "alice" {
		t.Errorf("recover journaled with actor %q, want alice", actor)
	}
	if es := e.audit(); len(es) != 0 {
		t.Errorf("the owner's own action was audited: %+v", es)
	}

	// An admin restores it from the first step: audited.
	resp = e.do(req{method: "POST", path: "/api/v1/admin/workflows/" + run.ID + "/restore", token: rootToken,
		body: `{"from_step":"fetch"}`})
	if resp.status != 200 {
		t.Fatalf("restore: %d %s", resp.status, resp.body)
	}
	resp = e.do(req{method: "GET", path: "/api/v1/admin/audit?limit=10", token: rootToken})
	var al dashboard.AuditList
	resp.decode(t, &al)
	if len(al.Entries) != 1 || al.Entries[0].Action != workflow.ActionRestore || al.Entries[0].Actor != "root" ||
		al.Entries[0].Owner != "alice" || al.Entries[0].RunID != run.ID || al.Next != al.Entries[0].ID {
		t.Fatalf("audit: %s", resp.body)
	}
	resp = e.do(req{method: "GET", path: "/api/v1/admin/audit?after=" + al.Next, token: rootToken})
	resp.decode(t, &al)
	if len(al.Entries) != 0 {
		t.Fatalf("audit after the last entry: %s", resp.body)
	}
}

func (e *env) snapshotEvents(id string) []workflow.Event {
	e.t.Helper()
	evs, err := e.client.Events(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// TestBadInput sends malformed requests: each gets its problem, and nothing
// is written.
func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	run := e.failedRun("alice")
	big := `{"workflow":"demo","input":{"pad":"` + strings.Repeat("x", dashboard.MaxBodyBytes) + `"}}`
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		kind   string
		detail string // a part of the problem's detail
	}{
		{"malformed JSON", "POST", "/api/v1/workflows", `{"workflow":"demo",`, 400, dashboard.ProblemInvalidRequest, "malformed"},
		{"not an object", "POST", "/api/v1/workflows", `["demo"]`, 400, dashboard.ProblemInvalidRequest, "malformed"},
		{"unknown field", "POST", "/api/v1/workflows", `{"workflow":"demo","owner":"bob"}`, 400, dashboard.ProblemInvalidRequest, "unknown field"},
		{"trailing data", "POST", "/api/v1/workflows", `{"workflow":"demo"} {}`, 400, dashboard.ProblemInvalidRequest, "after the JSON"},
		{"wrong type", "POST", "/api/v1/workflows", `{"workflow":5}`, 400, dashboard.ProblemInvalidRequest, "workflow"},
		{"empty body", "POST", "/api/v1/workflows", ``, 400, dashboard.ProblemInvalidRequest, "required"},
		{"no workflow", "POST", "/api/v1/workflows", `{"input":{}}`, 400, dashboard.ProblemInvalidRequest, "workflow"},
		{"oversize body", "POST", "/api/v1/workflows", big, 413, dashboard.ProblemBodyTooLarge, "larger than"},
		{"unknown workflow", "POST", "/api/v1/workflows", `{"workflow":"nope"}`, 422, dashboard.ProblemUnknownWorkflow, "nope"},
		{"bad workflow name", "POST", "/api/v1/workflows", `{"workflow":"no such/workflow"}`, 422, dashboard.ProblemUnknownWorkflow, ""},
		{"bad input", "POST", "/api/v1/workflows", `{"workflow":"demo","idempotency_key":"` + strings.Repeat("k", 300) + `"}`,
			400, dashboard.ProblemInvalidInput, "idempotency key"},
		{"duplicate key in the input", "POST", "/api/v1/workflows", `{"workflow":"demo","input":{"user":{"name":"a","name":"b"}}}`,
			400, dashboard.ProblemInvalidRequest, `request body: input.user.name: duplicate key "name" at byte 47`},
		{"duplicate field", "POST", "/api/v1/workflows", `{"workflow":"demo","workflow":"demo"}`,
			400, dashboard.ProblemInvalidRequest, `request body: workflow: duplicate key "workflow" at byte 19`},
		{"invalid UTF-8 in the input", "POST", "/api/v1/workflows", "{\"workflow\":\"demo\",\"input\":{\"n\":\"\xff\"}}",
			400, dashboard.ProblemInvalidRequest, `request body: input.n: invalid UTF-8 in a string (byte 0xff) at byte 33`},
		{"invalid UTF-8 in a key", "POST", "/api/v1/workflows", "{\"workflow\":\"demo\",\"idempotency_key\":\"k\xc3\"}",
			400, dashboard.ProblemInvalidRequest, `request body: idempotency_key: invalid UTF-8 in a string (byte 0xc3) at byte 39`},
		{"lone surrogate in the input", "POST", "/api/v1/workflows", `{"workflow":"demo","input":["\ud800"]}`,
			400, dashboard.ProblemInvalidRequest, `request body: input[0]: lone surrogate \ud800 in a string at byte 29`},
		{"duplicate key in an action body", "POST", "/api/v1/admin/workflows/" + run.ID + "/restore",
			`{"from_step":"fetch","from_step":"store"}`, 400, dashboard.ProblemInvalidRequest, `duplicate key "from_step"`},
		{"duplicate key in a signal", "POST", "/api/v1/workflows/" + run.ID + "/signals/approved", `{"ok":true,"ok":false}`,
			400, dashboard.ProblemInvalidInput, `signal payload: ok: duplicate key "ok" at byte 11`},
		{"bad run ID", "GET", "/api/v1/workflows/not-a-run-id", ``, 400, dashboard.ProblemInvalidRunID, "not-a-run-id"},
		{"bad run ID, action", "POST", "/api/v1/workflows/not-a-run-id/recover", ``, 400, dashboard.ProblemInvalidRunID, ""},
		{"unknown run", "GET", "/api/v1/workflows/" + strings.Repeat("0", 26), ``, 404, dashboard.ProblemNotFound, ""},
		{"bad status filter", "GET", "/api/v1/workflows?status=done", ``, 400, dashboard.ProblemInvalidRequest, "status"},
		{"bad workflow filter", "GET", "/api/v1/workflows?workflow=a%20b", ``, 400, dashboard.ProblemInvalidRequest, "workflow"},
		{"limit 0", "GET", "/api/v1/workflows?limit=0", ``, 400, dashboard.ProblemInvalidRequest, "limit"},
		{"limit too large", "GET", "/api/v1/workflows?limit=1001", ``, 400, dashboard.ProblemInvalidRequest, "limit"},
		{"limit not a number", "GET", "/api/v1/workflows?limit=ten", ``, 400, dashboard.ProblemInvalidRequest, "limit"},
		{"bad cursor", "GET", "/api/v1/workflows?cursor=nonsense", ``, 400, dashboard.ProblemInvalidRequest, "cursor"},
		{"action body with unknown field", "POST", "/api/v1/workflows/" + run.ID + "/recover", `{"force":true}`, 400,
			dashboard.ProblemInvalidRequest, "unknown field"},
		{"action body malformed", "POST", "/api/v1/workflows/" + run.ID + "/recover", `{`, 400, dashboard.ProblemInvalidRequest, ""},
		{"retry of an unknown step", "POST", "/api/v1/workflows/" + run.ID + "/steps/nope/retry", ``, 409,
			dashboard.ProblemActionRefused, "no step"},
		{"restore without from_step", "POST", "/api/v1/admin/workflows/" + run.ID + "/restore", `{}`, 400,
			dashboard.ProblemInvalidRequest, "from_step"},
		{"restore of an unknown step", "POST", "/api/v1/admin/workflows/" + run.ID + "/restore", `{"from_step":"nope"}`, 409,
			dashboard.ProblemActionRefused, "no step"},
		{"bad audit cursor", "GET", "/api/v1/admin/audit?after=x", ``, 400, dashboard.ProblemInvalidRequest, "after"},
		{"bad Last-Event-ID", "GET", "/api/v1/events?last_event_id=x", ``, 400, dashboard.ProblemInvalidRequest, "Last-Event-ID"},
		{"unknown endpoint", "GET", "/api/v1/nope", ``, 404, dashboard.ProblemNotFound, ""},
		{"wrong method", "DELETE", "/api/v1/workflows", ``, 405, dashboard.ProblemMethodNotAllowed, "DELETE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, runs := e.snapshot(run.ID), e.countRuns()
			resp := e.do(req{method: tt.method, path: tt.path, token: rootToken, body: tt.body})
			if resp.status != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tt.status, resp.body)
			}
			p := resp.problem(t)
			if p.Type != dashboard.ProblemType(tt.kind) || p.Status != tt.status || p.Title == "" ||
				!strings.Contains(p.Detail, tt.detail) || p.CorrelationID != resp.header.Get("X-Request-ID") {
				t.Errorf("problem %+v, want kind %s and detail with %q", p, tt.kind, tt.detail)
			}
			if after := e.snapshot(run.ID); after != before {
				t.Errorf("the run changed:\nbefore %+v\nafter  %+v", before, after)
			}
			if n := e.countRuns(); n != runs {
				t.Errorf("runs: %d, then %d", runs, n)
			}
		})
	}
	if allow := e.do(req{method: "DELETE", path: "/api/v1/workflows", token: rootToken}).header.Get("Allow"); !strings.Contains(allow, "GET") {
		t.Errorf("405 without Allow: %q", allow)
	}
}

func TestCorrelationID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true})
	resp := e.do(req{method: "GET", path: "/api/v1/workflows/" + strings.Repeat("0", 26), token: aliceToken,
		header: map[string]string{"X-Request-ID": "req-42.abc"}})
	if resp.header.Get("X-Request-ID") != "req-42.abc" || resp.problem(t).CorrelationID != "req-42.abc" {
		t.Errorf("X-Request-ID not echoed: %q %s", resp.header.Get("X-Request-ID"), resp.body)
	}
	if !strings.Contains(e.logs.String(), "correlation_id=req-42.abc") {
		t.Errorf("log lacks the correlation ID:\n%s", e.logs.String())
	}
	for _, insane := range []string{"has space", strings.Repeat("x", 200), "new\u2028line", "<script>"} {
		resp := e.do(req{method: "GET", path: "/healthz", header: map[string]string{"X-Request-ID": insane}})
		if id := resp.header.Get("X-Request-ID"); id == insane || id == "" {
			t.Errorf("X-Request-ID %q: answered %q, want a new one", insane, id)
		}
	}
	if a, b := e.do(req{method: "GET", path: "/healthz"}), e.do(req{method: "GET", path: "/healthz"}); a.header.Get("X-Request-ID") == b.header.Get("X-Request-ID") {
		t.Error("two requests got the same correlation ID")
	}
}

func TestCookieAuthAndCSRF(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	run := e.failedRun("alice")
	recoverPath := "/api/v1/workflows/" + run.ID + "/recover"
	before := e.snapshot(run.ID)

	if resp := e.do(req{method: "GET", path: "/api/v1/workflows/" + run.ID, cookie: aliceToken}); resp.status != 200 {
		t.Fatalf("GET with the cookie: %d %s", resp.status, resp.body)
	}
	if resp := e.do(req{method: "GET", path: "/api/v1/me", cookie: wrongToken}); resp.status != 401 {
		t.Fatalf("GET with a wrong cookie: %d", resp.status)
	}
	for name, csrf := range map[string]string{"no CSRF token": "", "wrong CSRF token": e.srv.CSRFToken(bobToken)} {
		h := map[string]string{}
		if csrf != "" {
			h[dashboard.CSRFHeader] = csrf
		}
		resp := e.do(req{method: "POST", path: recoverPath, cookie: aliceToken, header: h})
		if resp.status != 403 || resp.problem(t).Type != dashboard.ProblemType(dashboard.ProblemCSRF) {
			t.Fatalf("%s: %d %s", name, resp.status, resp.body)
		}
	}
	// A browser's cross-site request is refused even with the token.
	resp := e.do(req{method: "POST", path: recoverPath, cookie: aliceToken, header: map[string]string{
		dashboard.CSRFHeader: e.srv.CSRFToken(aliceToken), "Sec-Fetch-Site": "cross-site"}})
	if resp.status != 403 || resp.problem(t).Type != dashboard.ProblemType(dashboard.ProblemCrossOrigin) {
		t.Fatalf("cross-site: %d %s", resp.status, resp.body)
	}
	if after := e.snapshot(run.ID); after != before {
		t.Fatalf("refused requests changed the run")
	}
	resp = e.do(req{method: "POST", path: recoverPath, cookie: aliceToken, header: map[string]string{
		dashboard.CSRFHeader: e.srv.CSRFToken(aliceToken), "Sec-Fetch-Site": "same-origin"}})
	if resp.status != 200 {
		t.Fatalf("with the CSRF token: %d %s", resp.status, resp.body)
	}
	// A bearer token needs no CSRF token, and wins over a cookie.
	resp = e.do(req{method: "GET", path: "/api/v1/me", token: bobToken, cookie: aliceToken})
	var me map[string]any
	resp.decode(t, &me)
	if me["subject"] != "bob" || me["auth_disabled"] != false {
		t.Fatalf("me: %s", resp.body)
	}
	if e.srv.CSRFToken(aliceToken) == e.srv.CSRFToken(bobToken) || e.srv.CSRFToken(aliceToken) == "" {
		t.Fatal("CSRF tokens do not depend on the token")
	}
}

func TestWithoutTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noTokens: true, noWorker: true})
	if !e.srv.AuthDisabled() {
		t.Fatal("AuthDisabled() = false without tokens")
	}
	resp := e.do(req{method: "GET", path: "/api/v1/me"})
	var me map[string]any
	resp.decode(t, &me)
	if resp.status != 200 || me["subject"] != dashboard.AnonymousSubject || me["role"] != "admin" || me["auth_disabled"] != true {
		t.Fatalf("me without tokens: %d %s", resp.status, resp.body)
	}
	if resp := e.do(req{method: "GET", path: "/api/v1/admin/audit"}); resp.status != 200 {
		t.Fatalf("admin endpoint without tokens: %d", resp.status)
	}
}

func TestWithoutTokensOnlyLoopback(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noTokens: true, noWorker: true})
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "192.0.2.1:8080", "[::]:8080", "example.com:80", "nonsense"} {
		_, err := dashboard.New(dashboard.Config{Client: e.client, Redis: e.rdb, Addr: addr})
		var ce *dashboard.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "CAIRN_HTTP_ADDR") ||
			!strings.Contains(err.Error(), "CAIRN_API_TOKENS_FILE") {
			t.Errorf("addr %q without tokens: %v, want a ConfigError naming both variables", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:8080", "localhost:8080", "[::1]:0", ""} {
		s, err := dashboard.New(dashboard.Config{Client: e.client, Redis: e.rdb, Addr: addr})
		if err != nil {
			t.Errorf("addr %q without tokens: %v", addr, err)
			continue
		}
		s.Close()
	}
	toks, err := dashboard.ParseTokens(strings.NewReader(tokensFile), "tokens")
	if err != nil {
		t.Fatal(err)
	}
	s, err := dashboard.New(dashboard.Config{Client: e.client, Redis: e.rdb, Addr: "0.0.0.0:8080", Tokens: toks})
	if err != nil {
		t.Fatalf("with tokens, any address: %v", err)
	}
	s.Close()
}

func TestReadyzWhenRedisIsDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true})
	srv := redistest.Start(t, nil)
	down := srv.Client(t)
	s, err := dashboard.New(dashboard.Config{Client: e.client, Redis: down, Logger: testkit.LoggerTo(t, e.logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := s.Handler()
	get := func(path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	if code := get("/readyz"); code != 200 {
		t.Fatalf("readyz with Redis up: %d", code)
	}
	srv.Kill(t)
	if code := get("/readyz"); code != 503 {
		t.Fatalf("readyz with Redis down: %d, want 503", code)
	}
	if code := get("/healthz"); code != 200 {
		t.Fatalf("healthz with Redis down: %d, want 200", code)
	}
}

// TestReadyzOnCluster: on a Redis Cluster, /readyz reads a key of the
// queue's slot on the master that owns it. A node that answers but owns
// other slots (nothing serves the queue's) is not ready, though PING
// through the cluster client succeeds; a node that owns the slot is, until
// it dies.
func TestReadyzOnCluster(t *testing.T) {
	t.Parallel()
	const queue = "readyz"
	elsewhere := redistest.StartClusterNodeLater(t, nil, "{not-"+queue+"}")
	owner := redistest.StartClusterNodeLater(t, nil, "{"+queue+"}")
	readyz := func(node *redistest.Server) int {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{node.Addr()}, MaxRetries: -1})
		defer cc.Close()
		s, err := dashboard.New(dashboard.Config{Client: workflow.NewClient(cc, workflow.ClientConfig{Queue: queue}),
			Redis: cc, Logger: testkit.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code
	}

	other := elsewhere(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{other.Addr()}})
	defer cc.Close()
	if err := cc.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	if code := readyz(other); code != http.StatusServiceUnavailable {
		t.Errorf("readyz with no node for the queue's slot: %d, want 503", code)
	}
	node := owner(t)
	if code := readyz(node); code != http.StatusOK {
		t.Errorf("readyz with the queue's master up: %d, want 200", code)
	}
	node.Kill(t)
	if code := readyz(node); code != http.StatusServiceUnavailable {
		t.Errorf("readyz with the queue's master down: %d, want 503", code)
	}
}
