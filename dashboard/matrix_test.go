package dashboard_test

import (
	"context"
	"maps"
	"net/url"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/workflow"
)

type caller struct {
	name  string
	token string
}

// The callers of the matrix, in the order of endpoint.want. Runs belong
// to alice, the owner.
var callers = []caller{
	{"no token", ""},
	{"wrong token", wrongToken},
	{"owner", aliceToken},
	{"other user", bobToken},
	{"admin", rootToken},
}

// TestAuthorizationMatrix calls every endpoint as each caller and checks the
// status, and that a refused request changes nothing: not the run (its JSON
// and journal length), not the number of runs, not the audit stream.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	shared := e.failedRun("alice") // for the endpoints that change nothing

	type endpoint struct {
		method, path string // {id} is replaced by the run's ID
		body         string
		stream       bool
		// run returns the run the request is about: a fresh one for the
		// endpoints that change it, so that each caller finds it as new.
		run  func() *workflow.Run
		want [5]int // by caller
		// changes: a successful request changes the run (it is then an
		// admin action on alice's run, which is audited).
		changes bool
	}
	sharedRun := func() *workflow.Run { return shared }
	failed := func() *workflow.Run { return e.failedRun("alice") }
	running := func() *workflow.Run { return e.runningRun("alice") }
	awaiting := func() *workflow.Run { return e.waitingRun("alice") }
	retrying := func() *workflow.Run { return e.retryingRun() }
	holding := func() *workflow.Run { return e.holdingRun() }
	paused := func() *workflow.Run { return e.pausedRun("alice") }
	const (
		unauth    = 401
		forbidden = 403
		notFound  = 404
	)
	endpoints := []endpoint{
		{method: "GET", path: "/healthz", want: [5]int{200, 200, 200, 200, 200}},
		{method: "GET", path: "/readyz", want: [5]int{200, 200, 200, 200, 200}},
		{method: "GET", path: "/metrics", want: [5]int{unauth, unauth, 200, 200, 200}},
		{method: "GET", path: "/api/v1/me", want: [5]int{unauth, unauth, 200, 200, 200}},
		{method: "GET", path: "/api/v1/workflows", want: [5]int{unauth, unauth, 200, 200, 200}},
		{method: "POST", path: "/api/v1/workflows", body: `{"workflow":"demo"}`, want: [5]int{unauth, unauth, 201, 201, 201}},
		// Search: alice's run by its ID and by its input is found by its
		// owner and an admin only (TestSearchMatrix); bad syntax is a 400
		// for anyone signed in.
		{method: "GET", path: "/api/v1/workflows?id_prefix={id}&input=input.fail_step%3Dtransform&since=1h", run: sharedRun,
			want: [5]int{unauth, unauth, 200, 200, 200}},
		{method: "GET", path: "/api/v1/workflows?input=input.fail_step!%3Dx", want: [5]int{unauth, unauth, 400, 400, 400}},
		// A search's bound is the admins' to set.
		{method: "GET", path: "/api/v1/workflows?input=input.fail_step%3Dx&scan_limit=5",
			want: [5]int{unauth, unauth, forbidden, forbidden, 200}},
		{method: "GET", path: "/api/v1/workflows/{id}", run: sharedRun, want: [5]int{unauth, unauth, 200, notFound, 200}},
		{method: "GET", path: "/api/v1/workflows/{id}/events", run: sharedRun, want: [5]int{unauth, unauth, 200, notFound, 200}},
		{method: "POST", path: "/api/v1/workflows/{id}/recover", run: failed, changes: true,
			want: [5]int{unauth, unauth, 200, notFound, 200}},
		{method: "POST", path: "/api/v1/workflows/{id}/cancel", run: running, changes: true,
			want: [5]int{unauth, unauth, 200, notFound, 200}},
		{method: "POST", path: "/api/v1/workflows/{id}/cancel?compensate=true", run: holding, changes: true,
			want: [5]int{unauth, unauth, 200, notFound, 200}},
		// A failed run with a compensation: compensated, keeping its code.
		{method: "POST", path: "/api/v1/workflows/{id}/cancel?compensate=true", run: e.compensableFailedRun, changes: true,
			want: [5]int{unauth, unauth, 200, notFound, 200}},
		// A malformed compensate is refused before the run is looked up.
		{method: "POST", path: "/api/v1/workflows/{id}/cancel?compensate=yes", run: holding,
			want: [5]int{unauth, unauth, 400, 400, 400}},
		// The demo's failed run has nothing to compensate: it has ended.
		{method: "POST", path: "/api/v1/workflows/{id}/cancel?compensate=true", run: sharedRun,
			want: [5]int{unauth, unauth, 409, notFound, 409}},
		{method: "POST", path: "/api/v1/workflows/{id}/steps/transform/retry", run: failed, changes: true,
			want: [5]int{unauth, unauth, 200, notFound, 200}},
		{method: "POST", path: "/api/v1/workflows/{id}/steps/call/retry-now", run: retrying, changes: true,
			want: [5]int{unauth, unauth, 200, notFound, 200}},
		// A step that does not wait out a backoff: refused by the run's state.
		{method: "POST", path: "/api/v1/workflows/{id}/steps/transform/retry-now", run: sharedRun,
			want: [5]int{unauth, unauth, 409, notFound, 409}},
		// transform is not optional: the owner and the admin are refused
		// by the run's state, the others before they learn of it.
		{method: "POST", path: "/api/v1/workflows/{id}/steps/transform/skip", run: sharedRun,
			want: [5]int{unauth, unauth, 409, notFound, 409}},
		{method: "POST", path: "/api/v1/workflows/{id}/pause", run: running, changes: true,
			want: [5]int{unauth, unauth, 200, notFound, 200}},
		{method: "POST", path: "/api/v1/workflows/{id}/resume", run: paused, changes: true,
			want: [5]int{unauth, unauth, 200, notFound, 200}},
		// A run that ended is neither paused nor resumed.
		{method: "POST", path: "/api/v1/workflows/{id}/pause", run: sharedRun,
			want: [5]int{unauth, unauth, 409, notFound, 409}},
		{method: "GET", path: "/api/v1/workflows?paused=true", want: [5]int{unauth, unauth, 200, 200, 200}},
		{method: "GET", path: "/api/v1/ordering-keys/k1", want: [5]int{unauth, unauth, 200, 200, 200}},
		// Ordering keys are scoped by owner: a user reads only their own
		// line of a key (owner=alice is alice's own), an admin any line.
		{method: "GET", path: "/api/v1/ordering-keys/k1?owner=alice", want: [5]int{unauth, unauth, 200, forbidden, 200}},
		{method: "GET", path: "/api/v1/ordering-keys/k1?shared=true", want: [5]int{unauth, unauth, forbidden, forbidden, 200}},
		{method: "POST", path: "/api/v1/workflows", body: `{"workflow":"demo","ordering_key":"k1","shared_ordering":true}`,
			want: [5]int{unauth, unauth, forbidden, forbidden, 201}},
		{method: "GET", path: "/api/v1/breakers", want: [5]int{unauth, unauth, 200, 200, 200}},
		// Latencies are summed over every owner's runs and name none: every
		// user sees them, as /metrics.
		{method: "GET", path: "/api/v1/latency?window=7d", want: [5]int{unauth, unauth, 200, 200, 200}},
		{method: "GET", path: "/api/v1/latency?window=2h", want: [5]int{unauth, unauth, 400, 400, 400}},
		{method: "POST", path: "/api/v1/admin/breakers/none/reset", want: [5]int{unauth, unauth, forbidden, forbidden, notFound}},
		{method: "POST", path: "/api/v1/workflows/{id}/signals/approved", body: `{"ok":true}`, run: awaiting, changes: true,
			want: [5]int{unauth, unauth, 200, notFound, 200}},
		// No step of the run awaits "rejected": refused by the run's state.
		{method: "POST", path: "/api/v1/workflows/{id}/signals/rejected", run: awaiting,
			want: [5]int{unauth, unauth, 409, notFound, 409}},
		{method: "GET", path: "/api/v1/events", stream: true, want: [5]int{unauth, unauth, 200, 200, 200}},
		{method: "GET", path: "/api/v1/admin/workflows/failed", want: [5]int{unauth, unauth, forbidden, forbidden, 200}},
		{method: "POST", path: "/api/v1/admin/workflows/{id}/restore", body: `{"from_step":"fetch"}`, run: failed, changes: true,
			want: [5]int{unauth, unauth, forbidden, forbidden, 200}},
		{method: "GET", path: "/api/v1/admin/audit", want: [5]int{unauth, unauth, forbidden, forbidden, 200}},
		{method: "GET", path: "/api/v1/workers", want: [5]int{unauth, unauth, forbidden, forbidden, 200}},
		{method: "GET", path: "/monitoring/", want: [5]int{unauth, unauth, forbidden, forbidden, 200}},
		{method: "GET", path: "/monitoring/api/queues", want: [5]int{unauth, unauth, forbidden, forbidden, 200}},
	}
	for _, ep := range endpoints {
		for i, c := range callers {
			name := ep.method + " " + ep.path + " as " + c.name
			want := ep.want[i]
			path := ep.path
			var run *workflow.Run
			var before snapshot
			if ep.run != nil {
				run = ep.run()
				path = strings.ReplaceAll(path, "{id}", run.ID)
				before = e.snapshot(run.ID)
			}
			runsBefore, auditBefore := e.countRuns(), len(e.audit())

			resp := e.do(req{method: ep.method, path: path, token: c.token, body: ep.body, stream: ep.stream})

			if resp.status != want {
				t.Errorf("%s: status %d, want %d: %s", name, resp.status, want, resp.body)
				continue
			}
			if want == unauth && !strings.HasPrefix(resp.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: WWW-Authenticate %q, want Bearer", name, resp.header.Get("WWW-Authenticate"))
			}
			if want >= 400 {
				if got := resp.problem(t); got.Status != want || got.CorrelationID == "" ||
					got.CorrelationID != resp.header.Get("X-Request-ID") {
					t.Errorf("%s: problem %+v (X-Request-ID %q)", name, got, resp.header.Get("X-Request-ID"))
				}
				if run != nil {
					if after := e.snapshot(run.ID); after != before {
						t.Errorf("%s: refused request changed the run:\nbefore %+v\nafter  %+v", name, before, after)
					}
				}
				if n := e.countRuns(); n != runsBefore {
					t.Errorf("%s: refused request changed the number of runs: %d, then %d", name, runsBefore, n)
				}
			}
			audited := len(e.audit()) - auditBefore
			wantAudit := 0
			if ep.changes && c.name == "admin" {
				wantAudit = 1 // an admin acted on alice's run
			}
			if audited != wantAudit {
				t.Errorf("%s: %d audit entries recorded, want %d", name, audited, wantAudit)
			}
			if ep.run != nil && want < 300 && ep.changes {
				if after := e.snapshot(run.ID); after == before {
					t.Errorf("%s: request succeeded but changed nothing", name)
				}
			}
			if run != nil && ep.run != nil {
				// Let the worker go: the slow run's step sleeps a minute
				// (also when a pause or resume left it running).
				if now, err := e.client.Get(context.Background(), run.ID); err == nil && now.Status == workflow.StatusRunning {
					_, _ = e.client.Cancel(context.Background(), run.ID, nil)
				}
			}
		}
	}
}

// TestListShowsUsersTheirOwnRuns checks the filter behind GET
// /api/v1/workflows: users see their own runs, admins everyone's, and the
// owner and workflow filters page correctly.
func TestListShowsUsersTheirOwnRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true})
	mine := map[string]bool{}
	for i := range 5 {
		mine[e.start("alice", inputOK).ID] = true
		e.start("bob", inputOK)
		if i%2 == 0 {
			e.start("root", inputOK)
		}
	}
	list := func(token, query string) (ids []string, owners map[string]int) {
		t.Helper()
		owners = map[string]int{}
		cursor := ""
		for page := 0; ; page++ {
			if page > 20 {
				t.Fatal("too many pages")
			}
			q := "?limit=2" + query
			if cursor != "" {
				q += "&cursor=" + cursor
			}
			resp := e.do(req{method: "GET", path: "/api/v1/workflows" + q, token: token})
			if resp.status != 200 {
				t.Fatalf("list %s: %d %s", q, resp.status, resp.body)
			}
			var l struct {
				Runs       []workflow.Run `json:"runs"`
				NextCursor string         `json:"next_cursor"`
			}
			resp.decode(t, &l)
			if len(l.Runs) > 2 {
				t.Fatalf("page of %d runs, limit 2", len(l.Runs))
			}
			for _, r := range l.Runs {
				ids = append(ids, r.ID)
				owners[r.Owner]++
			}
			if l.NextCursor == "" {
				return ids, owners
			}
			cursor = l.NextCursor
		}
	}
	ids, owners := list(aliceToken, "")
	if len(ids) != 5 || owners["alice"] != 5 {
		t.Errorf("alice lists %v (owners %v), want her 5 runs", ids, owners)
	}
	for _, id := range ids {
		if !mine[id] {
			t.Errorf("alice lists run %s, not hers", id)
		}
	}
	if _, owners := list(rootToken, ""); owners["alice"] != 5 || owners["bob"] != 5 || owners["root"] != 3 {
		t.Errorf("admin lists owners %v, want every run", owners)
	}
	if _, owners := list(rootToken, "&owner=bob"); len(owners) != 1 || owners["bob"] != 5 {
		t.Errorf("admin lists owner=bob: %v", owners)
	}
	if ids, _ := list(aliceToken, "&workflow=other"); len(ids) != 0 {
		t.Errorf("workflow=other lists %v", ids)
	}
	if ids, _ := list(aliceToken, "&workflow=demo&status=pending"); len(ids) != 5 {
		t.Errorf("workflow=demo&status=pending lists %d runs, want 5", len(ids))
	}
	if resp := e.do(req{method: "GET", path: "/api/v1/workflows?owner=bob", token: aliceToken}); resp.status != 403 {
		t.Errorf("alice lists owner=bob: %d, want 403", resp.status)
	}
}

// TestRunOutputsMatrix: a run's step outputs, through the run page (and its
// live fragment) and through the API, as each caller: the owner and an
// admin see them, another user gets a 404 that shows nothing of them, and
// a caller without a valid token is sent to sign in (the page) or refused
// (the fragment, the API). That the two show the same outputs:
// TestUIRunPageOutputsAsTheAPI.
func TestRunOutputsMatrix(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	run := e.outputsRun()
	const signIn = 303
	for _, c := range []struct {
		path   string
		page   bool
		want   [5]int // by caller
		secret [5]bool
	}{
		{path: "/runs/{id}", page: true, want: [5]int{signIn, signIn, 200, 404, 200}, secret: [5]bool{2: true, 4: true}},
		// The live fragment answers 401: the page's script then reloads.
		{path: "/runs/{id}?fragment=1", page: true, want: [5]int{401, 401, 200, 404, 200}, secret: [5]bool{2: true, 4: true}},
		{path: "/api/v1/workflows/{id}", want: [5]int{401, 401, 200, 404, 200}, secret: [5]bool{2: true, 4: true}},
	} {
		path := strings.ReplaceAll(c.path, "{id}", run.ID)
		for i, cl := range callers {
			r := req{method: "GET", path: path, token: cl.token}
			if c.page {
				r = req{method: "GET", path: path, cookie: cl.token}
			}
			resp := e.do(r)
			name := path + " as " + cl.name
			if resp.status != c.want[i] {
				t.Errorf("%s: status %d, want %d", name, resp.status, c.want[i])
			}
			if got := strings.Contains(string(resp.body), outputSecret); got != c.secret[i] {
				t.Errorf("%s: shows the step's output: %v, want %v", name, got, c.secret[i])
			}
			if c.page && c.secret[i] && !strings.Contains(string(resp.body), `data-output="step:secret"`) {
				t.Errorf("%s: no output block of step secret", name)
			}
		}
	}
}

// TestFormsMatrix: the run page's forms that work without JavaScript
// (ui_retrynow.go), posted as each caller with the cookie and the form's
// CSRF token: a caller without a valid token is sent to sign in, another
// user gets a 404 page, a user an admin's form a 403, the owner and an
// admin are sent back to the run page and the run changed (an admin's
// action on alice's run audited). A cookie without the form's CSRF token,
// a restore without its confirmation: refused, nothing written.
func TestFormsMatrix(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	const signIn, forbidden, notFound = 303, 403, 404
	done := 303 // back to the run page
	retrying := func() *workflow.Run { return e.retryingRun() }
	finished := func() *workflow.Run { return e.wait(e.startWF(demo.Name, "alice", inputOK).ID) }
	for _, c := range []struct {
		name string
		path string // {id} is replaced by the run's ID
		form url.Values
		run  func() *workflow.Run
		want [5]int
		// noCSRF leaves the CSRF token out of the form.
		noCSRF bool
		// audits: an admin's success is audited (restore audits itself).
		audits bool
	}{
		{name: "retry now", path: "/runs/{id}/steps/call/retry-now", run: retrying, audits: true,
			want: [5]int{signIn, signIn, done, notFound, done}},
		{name: "retry now without CSRF", path: "/runs/{id}/steps/call/retry-now", run: retrying, noCSRF: true,
			want: [5]int{signIn, signIn, forbidden, forbidden, forbidden}},
		{name: "retry now of a finished run", path: "/runs/{id}/steps/deliver/retry-now", run: finished,
			want: [5]int{signIn, signIn, 409, notFound, 409}},
		{name: "restore", path: "/runs/{id}/restore", run: finished, audits: true,
			form: url.Values{"from_step": {"transform"}, "confirm": {"yes"}},
			want: [5]int{signIn, signIn, forbidden, forbidden, done}},
		{name: "restore unconfirmed", path: "/runs/{id}/restore", run: finished,
			form: url.Values{"from_step": {"transform"}}, want: [5]int{signIn, signIn, forbidden, forbidden, 400}},
		{name: "restore from a hostile step", path: "/runs/{id}/restore", run: finished,
			form: url.Values{"from_step": {`<script>alert(1)</script>`}, "confirm": {"yes"}},
			want: [5]int{signIn, signIn, forbidden, forbidden, 409}},
	} {
		for i, cl := range callers {
			name := c.name + " as " + cl.name
			run := c.run()
			path := strings.ReplaceAll(c.path, "{id}", run.ID)
			form := url.Values{}
			maps.Copy(form, c.form)
			if !c.noCSRF && cl.token != "" {
				form.Set("csrf", e.srv.CSRFToken(cl.token))
			}
			before, auditBefore := e.snapshot(run.ID), len(e.audit())
			resp := e.do(req{method: "POST", path: path, cookie: cl.token, body: form.Encode(),
				header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
			if resp.status != c.want[i] {
				t.Errorf("%s: status %d, want %d: %.300s", name, resp.status, c.want[i], resp.body)
				continue
			}
			loc := resp.header.Get("Location")
			switch {
			case c.want[i] == signIn && i < 2:
				if !strings.HasPrefix(loc, "/signin?next=") {
					t.Errorf("%s: sent to %q, want the sign-in page", name, loc)
				}
			case c.want[i] == done:
				if loc != "/runs/"+run.ID {
					t.Errorf("%s: sent to %q, want the run page", name, loc)
				}
			}
			changed := e.snapshot(run.ID) != before
			if ok := c.want[i] == done && i >= 2; changed != ok {
				t.Errorf("%s: changed the run: %v, want %v", name, changed, ok)
			}
			if c.want[i] >= 400 && strings.Contains(string(resp.body), "<script>alert") {
				t.Errorf("%s: the error page echoes markup unescaped", name)
			}
			wantAudit := 0
			if c.audits && c.want[i] == done && cl.name == "admin" {
				wantAudit = 1
			}
			if n := len(e.audit()) - auditBefore; n != wantAudit {
				t.Errorf("%s: %d audit entries, want %d", name, n, wantAudit)
			}
			if r, err := e.client.Get(context.Background(), run.ID); err == nil && !r.Terminal() {
				_, _ = e.client.Cancel(context.Background(), run.ID, nil)
			}
		}
	}
}

// TestWorkersMatrix: the Workers page, its live fragment and GET
// /api/v1/workers as each caller: host names and pids are the admins'
// (a user gets 403; without a valid token, the sign-in page or 401). The
// no-worker notice of a run's page reaches whoever may see the run (its
// owner, an admin) and no one else (TestNoWorkerNotice).
func TestWorkersMatrix(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true, ui: true})
	e.fakeWorker("host:9:matrix", "secret-host", []string{e.queue})
	const signIn = 303
	for _, c := range []struct {
		path  string
		page  bool
		want  [5]int // by caller
		hosts [5]bool
	}{
		{path: dashboard.WorkersPath, page: true, want: [5]int{signIn, signIn, 403, 403, 200}, hosts: [5]bool{4: true}},
		{path: dashboard.WorkersPath + "?fragment=1", page: true, want: [5]int{401, 401, 403, 403, 200},
			hosts: [5]bool{4: true}},
		{path: "/api/v1/workers", want: [5]int{401, 401, 403, 403, 200}, hosts: [5]bool{4: true}},
	} {
		for i, cl := range callers {
			r := req{method: "GET", path: c.path, token: cl.token}
			if c.page {
				r = req{method: "GET", path: c.path, cookie: cl.token}
			}
			resp := e.do(r)
			name := c.path + " as " + cl.name
			if resp.status != c.want[i] {
				t.Errorf("%s: status %d, want %d", name, resp.status, c.want[i])
			}
			if got := strings.Contains(string(resp.body), "secret-host"); got != c.hosts[i] {
				t.Errorf("%s: shows the worker's host: %v, want %v", name, got, c.hosts[i])
			}
		}
	}
}

// TestSearchMatrix: a search for alice's run, by its ID, an ID prefix or
// its input, through the API and the runs page, as each caller: the owner
// and an admin find it, another user gets an empty answer that shows
// nothing of it, a caller without a valid token is refused or sent to
// sign in.
func TestSearchMatrix(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true, ui: true})
	const secret = "s3cr3t-of-alice"
	run := e.start("alice", `{"customer":{"id":7,"email":"`+secret+`"}}`)
	e.start("bob", `{"customer":{"id":7}}`)
	const signIn = 303
	for _, query := range []string{
		"id_prefix=" + run.ID,
		"id_prefix=" + run.ID[:20],
		"input=" + url.QueryEscape(`input.customer.email="`+secret+`"`),
		"input=" + url.QueryEscape(`input.customer.id=7`) + "&since=1h",
	} {
		for _, c := range []struct {
			path  string
			page  bool
			want  [5]int
			found [5]bool
		}{
			{path: "/?" + query, page: true, want: [5]int{signIn, signIn, 200, 200, 200}, found: [5]bool{2: true, 4: true}},
			{path: "/?fragment=1&" + query, page: true, want: [5]int{401, 401, 200, 200, 200}, found: [5]bool{2: true, 4: true}},
			{path: "/api/v1/workflows?" + query, want: [5]int{401, 401, 200, 200, 200}, found: [5]bool{2: true, 4: true}},
		} {
			for i, cl := range callers {
				r := req{method: "GET", path: c.path, token: cl.token}
				if c.page {
					r = req{method: "GET", path: c.path, cookie: cl.token}
				}
				resp := e.do(r)
				name := c.path + " as " + cl.name
				if resp.status != c.want[i] {
					t.Errorf("%s: status %d, want %d", name, resp.status, c.want[i])
				}
				// The page echoes the query, which may hold the run's ID:
				// a run found is a row, or an object of the API's list.
				mark := `data-run="` + run.ID + `"`
				if !c.page {
					mark = `"id":"` + run.ID + `"`
				}
				if got := strings.Contains(string(resp.body), mark); got != c.found[i] {
					t.Errorf("%s: shows alice's run: %v, want %v", name, got, c.found[i])
				}
				if !c.found[i] && !strings.Contains(query, "s3cr3t") && strings.Contains(string(resp.body), secret) {
					t.Errorf("%s: shows alice's input", name)
				}
			}
		}
	}
}
