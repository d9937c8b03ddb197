package dashboard_test

import (
	"context"
	"errors"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// Workflows of the UI tests, besides the demo.
const (
	// optionalWF fails permanently at its optional first step "try", then
	// runs "after".
	optionalWF = "optional"
	// flakyWF's one step "call" always fails transiently, and waits an
	// hour before each retry: its run stays "retrying".
	flakyWF = "flaky"
	// snoozyWF's one step "poll" snoozes for an hour on every visit.
	snoozyWF = "snoozy"
)

var errFlaky = errors.New("upstream answered 503")

func uiDefinitions() []workflow.Definition {
	ok := func(context.Context, *workflow.StepContext) (any, error) { return map[string]bool{"ok": true}, nil }
	return append(append(sagaDefinitions(), outputDefinitions()...),
		demo.Definition(demoPolicy), backoffDefinition(),
		workflow.Definition{Name: optionalWF, Policy: demoPolicy, Steps: []workflow.Step{
			{Name: "try", Optional: true, Run: func(context.Context, *workflow.StepContext) (any, error) {
				return nil, workflow.Permanent(errors.New("no such customer"))
			}},
			{Name: "after", Run: ok},
		}},
		workflow.Definition{Name: flakyWF, Policy: workflow.Policy{MaxAttempts: 10, InitialInterval: time.Hour, MaxInterval: time.Hour,
			Jitter: workflow.JitterNone}, Steps: []workflow.Step{
			{Name: "call", Run: func(context.Context, *workflow.StepContext) (any, error) { return nil, errFlaky }},
		}},
		approvalDefinition(),
		workflow.Definition{Name: snoozyWF, Steps: []workflow.Step{
			{Name: "poll", Run: func(context.Context, *workflow.StepContext) (any, error) {
				return nil, workflow.Snooze(time.Hour)
			}},
		}},
	)
}

// newUIEnv is newEnv with the web UI and a worker of the demo, optional
// and flaky workflows.
func newUIEnv(t *testing.T, noTokens bool) *env {
	t.Helper()
	return newEnv(t, envOptions{noTokens: noTokens, ui: true})
}

func (e *env) startUIWorker(log *slog.Logger) {
	e.t.Helper()
	testkit.StartWorker(e.t, e.rdb, workerConfig(e.queue, log), uiDefinitions()...)
}

// startWF starts a run of a workflow owned by owner.
func (e *env) startWF(name, owner, input string) *workflow.Run {
	e.t.Helper()
	run, err := e.client.Start(context.Background(), name, []byte(input), &workflow.StartOptions{Owner: owner})
	if err != nil {
		e.t.Fatal(err)
	}
	return run
}

// page GETs a page with the cookie of token ("" for none).
func (e *env) page(path, token string) response {
	e.t.Helper()
	return e.do(req{method: "GET", path: path, cookie: token})
}

func (r response) html() string { return string(r.body) }

var csrfMetaRE = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

// csrfOf returns the CSRF token a page embeds.
func csrfOf(t *testing.T, r response) string {
	t.Helper()
	m := csrfMetaRE.FindStringSubmatch(r.html())
	if m == nil {
		t.Fatalf("no csrf-token meta tag in the page:\n%s", r.body)
	}
	return html.UnescapeString(m[1])
}

// actionsOf returns the data-action values of a page's buttons, in order.
var actionRE = regexp.MustCompile(`data-action="([a-z]+)" data-action-url="([^"]+)"`)

func actionsOf(r response) []string {
	var out []string
	for _, m := range actionRE.FindAllStringSubmatch(r.html(), -1) {
		out = append(out, m[1]+" "+html.UnescapeString(m[2]))
	}
	return out
}

func cookiesOf(r response) []*http.Cookie {
	return (&http.Response{Header: r.header}).Cookies()
}

func TestUISignIn(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)

	// A page without credentials redirects to the sign-in form, which
	// remembers where the browser was going.
	resp := e.page("/runs/"+workflow.NewRunID(time.Now())+"?x=1", "")
	loc := resp.header.Get("Location")
	if resp.status != http.StatusSeeOther || !strings.HasPrefix(loc, dashboard.SignInPath+"?next=") {
		t.Fatalf("page without a cookie: %d Location %q, want 303 to the sign-in form", resp.status, loc)
	}
	resp = e.page(loc, "")
	if resp.status != 200 || !strings.Contains(resp.html(), `name="token"`) || !strings.Contains(resp.html(), `name="next" value="/runs/`) {
		t.Fatalf("sign-in form: %d\n%s", resp.status, resp.body)
	}
	if strings.Contains(resp.html(), "csrf-token") {
		t.Error("the sign-in form carries a CSRF token of no cookie")
	}

	form := func(v url.Values) req {
		return req{method: "POST", path: dashboard.SignInPath, body: v.Encode(),
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}
	}
	// A wrong token: the form again, 401, with the error, and no cookie.
	resp = e.do(form(url.Values{"token": {wrongToken}, "next": {"/"}}))
	if resp.status != http.StatusUnauthorized || !strings.Contains(resp.html(), "That token is not valid.") ||
		!strings.Contains(resp.html(), `name="token"`) {
		t.Fatalf("wrong token: %d\n%s", resp.status, resp.body)
	}
	if cs := cookiesOf(resp); len(cs) != 0 {
		t.Fatalf("wrong token set cookies: %v", cs)
	}
	if strings.Contains(resp.html(), wrongToken) {
		t.Error("the form echoes the wrong token")
	}

	// The right one: the cookie, and on to the page asked for.
	resp = e.do(form(url.Values{"token": {aliceToken}, "next": {"/?status=failed"}}))
	if resp.status != http.StatusSeeOther || resp.header.Get("Location") != "/?status=failed" {
		t.Fatalf("sign-in: %d Location %q", resp.status, resp.header.Get("Location"))
	}
	cs := cookiesOf(resp)
	if len(cs) != 1 {
		t.Fatalf("sign-in set %d cookies, want 1", len(cs))
	}
	c := cs[0]
	if c.Name != dashboard.CookieName || c.Value != aliceToken || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode ||
		c.Path != "/" || c.Secure {
		t.Fatalf("cookie %+v: want %s=<token>, HttpOnly, SameSite=Strict, Path=/, not Secure over plain HTTP", c, dashboard.CookieName)
	}
	resp = e.page("/", c.Value)
	if resp.status != 200 || !strings.Contains(resp.html(), `<span class="subject">alice</span>`) {
		t.Fatalf("runs page with the cookie: %d\n%s", resp.status, resp.body)
	}
	if got := csrfOf(t, resp); got != e.srv.CSRFToken(aliceToken) {
		t.Fatalf("page CSRF token %q, want Server.CSRFToken of the cookie", got)
	}
	// Signed in, the form sends the browser on.
	if resp := e.page(dashboard.SignInPath+"?next=/attention", aliceToken); resp.status != http.StatusSeeOther ||
		resp.header.Get("Location") != "/attention" {
		t.Errorf("sign-in form when signed in: %d %q", resp.status, resp.header.Get("Location"))
	}

	// next never leads off the site.
	for _, next := range []string{"//evil.example/x", "https://evil.example/", "/\\evil.example", "evil", ""} {
		resp := e.do(form(url.Values{"token": {aliceToken}, "next": {next}}))
		if resp.status != http.StatusSeeOther || resp.header.Get("Location") != "/" {
			t.Errorf("next %q: %d Location %q, want /", next, resp.status, resp.header.Get("Location"))
		}
	}

	// Sign-out needs the page's CSRF token, then clears the cookie.
	signOut := func(csrf string) response {
		return e.do(req{method: "POST", path: dashboard.SignOutPath, cookie: aliceToken, body: url.Values{"csrf": {csrf}}.Encode(),
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
	}
	if resp := signOut(""); resp.status != http.StatusForbidden || len(cookiesOf(resp)) != 0 {
		t.Errorf("sign-out without the CSRF token: %d, cookies %v", resp.status, cookiesOf(resp))
	}
	resp = signOut(e.srv.CSRFToken(aliceToken))
	cs = cookiesOf(resp)
	if resp.status != http.StatusSeeOther || resp.header.Get("Location") != dashboard.SignInPath || len(cs) != 1 ||
		cs[0].Name != dashboard.CookieName || cs[0].MaxAge >= 0 || cs[0].Value != "" {
		t.Fatalf("sign-out: %d %q, cookies %+v", resp.status, resp.header.Get("Location"), cs)
	}
}

func TestUIListShowsOwnRuns(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	aliceFailed := e.failedRun("alice")
	aliceOK := e.wait(e.start("alice", inputOK).ID)
	bobs := e.failedRun("bob")

	resp := e.page("/", aliceToken)
	if resp.status != 200 {
		t.Fatalf("runs page: %d\n%s", resp.status, resp.body)
	}
	for _, id := range []string{aliceFailed.ID, aliceOK.ID} {
		if !strings.Contains(resp.html(), `href="/runs/`+id+`"`) {
			t.Errorf("alice's list lacks her run %s", id)
		}
	}
	if strings.Contains(resp.html(), bobs.ID) {
		t.Errorf("alice's list shows bob's run %s", bobs.ID)
	}
	if !strings.Contains(resp.html(), `<span class="badge attention">needs attention</span>`) {
		t.Error("the failed run has no needs-attention badge")
	}
	// An owner filter is the admin's; a user's is ignored.
	if resp := e.page("/?owner=bob", aliceToken); strings.Contains(resp.html(), bobs.ID) || !strings.Contains(resp.html(), aliceOK.ID) {
		t.Errorf("alice with ?owner=bob: status %d; sees bob's run or not her own", resp.status)
	}

	// Filters.
	resp = e.page("/?status=failed&workflow=demo", aliceToken)
	if !strings.Contains(resp.html(), aliceFailed.ID) || strings.Contains(resp.html(), aliceOK.ID) {
		t.Errorf("status=failed: want only %s", aliceFailed.ID)
	}
	if !strings.Contains(resp.html(), `<option value="failed" selected>`) || !strings.Contains(resp.html(), `<option value="demo" selected>`) {
		t.Error("the filter form does not show the filters in use")
	}
	resp = e.page("/?workflow="+optionalWF, aliceToken)
	if strings.Contains(resp.html(), aliceFailed.ID) || strings.Contains(resp.html(), aliceOK.ID) || !strings.Contains(resp.html(), "No runs match") {
		t.Errorf("workflow=%s: shows demo runs", optionalWF)
	}
	if resp := e.page("/?status=bogus", aliceToken); resp.status != http.StatusBadRequest {
		t.Errorf("status=bogus: %d, want 400", resp.status)
	}

	// The admin sees every run, with owners.
	resp = e.page("/", rootToken)
	for _, id := range []string{aliceFailed.ID, aliceOK.ID, bobs.ID} {
		if !strings.Contains(resp.html(), id) {
			t.Errorf("admin's list lacks %s", id)
		}
	}
	if !strings.Contains(resp.html(), `<td data-label="Owner">bob</td>`) || !strings.Contains(resp.html(), `href="/attention"`) ||
		!strings.Contains(resp.html(), `href="/monitoring/"`) {
		t.Error("admin's list lacks the owner column or the admin links")
	}
	if resp := e.page("/?owner=bob", rootToken); strings.Contains(resp.html(), aliceOK.ID) || !strings.Contains(resp.html(), bobs.ID) {
		t.Error("admin with ?owner=bob: want bob's runs only")
	}
	// A user's pages have no admin links.
	if resp := e.page("/", bobToken); strings.Contains(resp.html(), `href="/attention"`) || strings.Contains(resp.html(), "/monitoring") {
		t.Error("a user's page links to the admin pages")
	}

	// The live part alone, for the script.
	resp = e.page("/?status=failed&fragment=1", aliceToken)
	if resp.status != 200 || strings.Contains(resp.html(), "<html") || !strings.Contains(resp.html(), aliceFailed.ID) ||
		strings.Contains(resp.html(), aliceOK.ID) {
		t.Errorf("fragment: %d\n%s", resp.status, resp.body)
	}
	if resp := e.page("/?fragment=1", ""); resp.status != http.StatusUnauthorized {
		t.Errorf("fragment without a cookie: %d, want 401", resp.status)
	}
}

func TestUIRunPageAuthorization(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	bobs := e.failedRun("bob")

	for _, path := range []string{"/runs/" + bobs.ID, "/runs/" + workflow.NewRunID(time.Now()), "/runs/not-a-run-id",
		"/runs/" + bobs.ID + "?fragment=1"} {
		resp := e.page(path, aliceToken)
		if resp.status != http.StatusNotFound || strings.Contains(resp.html(), "transform") {
			t.Errorf("%s as alice: %d, want 404 that shows nothing of the run\n%s", path, resp.status, resp.body)
		}
	}
	for _, token := range []string{bobToken, rootToken} {
		resp := e.page("/runs/"+bobs.ID, token)
		if resp.status != 200 || !strings.Contains(resp.html(), bobs.ID) {
			t.Errorf("bob's run as %s: %d", token, resp.status)
		}
	}

	// The needs-attention page is the admins'.
	if resp := e.page(dashboard.AttentionPath, bobToken); resp.status != http.StatusForbidden || strings.Contains(resp.html(), bobs.ID) {
		t.Errorf("attention page as a user: %d, want 403", resp.status)
	}
	resp := e.page(dashboard.AttentionPath, rootToken)
	if resp.status != 200 || !strings.Contains(resp.html(), bobs.ID) || !strings.Contains(resp.html(), workflow.CodePermanentError) {
		t.Errorf("attention page as admin: %d, want bob's failed run with its code\n%s", resp.status, resp.body)
	}
	if got := actionsOf(resp); len(got) != 1 || got[0] != "recover /api/v1/workflows/"+bobs.ID+"/recover" {
		t.Errorf("attention page actions %v, want recover of bob's run", got)
	}
}

func TestUIButtonsOnlyWhenAllowed(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	api := func(id string) string { return "/api/v1/workflows/" + id }

	failed := e.failedRun("alice")
	resp := e.page("/runs/"+failed.ID, aliceToken)
	want := []string{"recover " + api(failed.ID) + "/recover", "retry " + api(failed.ID) + "/steps/transform/retry"}
	if got := actionsOf(resp); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("failed run (transform not optional): actions %v, want %v", got, want)
	}
	if !strings.Contains(resp.html(), "permanent") || !strings.Contains(resp.html(), `data-status="failed"`) {
		t.Error("the failed run's page lacks its status or its error")
	}

	succeeded := e.wait(e.start("alice", inputOK).ID)
	resp = e.page("/runs/"+succeeded.ID, aliceToken)
	if got := actionsOf(resp); len(got) != 0 || resp.status != 200 || !strings.Contains(resp.html(), `data-status="succeeded"`) {
		t.Errorf("succeeded run: %d, actions %v, want none", resp.status, got)
	}

	running := e.runningRun("alice")
	if got := actionsOf(e.page("/runs/"+running.ID, aliceToken)); len(got) != 2 || got[0] != "cancel "+api(running.ID)+"/cancel" ||
		got[1] != "pause "+api(running.ID)+"/pause" {
		t.Errorf("running run: actions %v, want cancel and pause (its steps have no compensation)", got)
	}
	// Let its step go now, not when the worker stops at the end of the test:
	// a step stopped then records its failure after the test's Redis
	// client is closed, retrying past the test (and goleak's check).
	if _, err := e.client.Cancel(context.Background(), running.ID, nil); err != nil {
		t.Fatal(err)
	}

	opt := e.wait(e.startWF(optionalWF, "alice", `{}`).ID)
	if opt.Status != workflow.StatusFailed {
		t.Fatalf("optional run: %s", opt.Status)
	}
	resp = e.page("/runs/"+opt.ID, aliceToken)
	want = []string{"recover " + api(opt.ID) + "/recover", "retry " + api(opt.ID) + "/steps/try/retry",
		"skip " + api(opt.ID) + "/steps/try/skip"}
	if got := actionsOf(resp); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("failed optional step: actions %v, want %v", got, want)
	}
	// The skip button's request, as the script sends it, is accepted.
	skip := e.do(req{method: "POST", path: api(opt.ID) + "/steps/try/skip", cookie: aliceToken, body: "{}",
		header: map[string]string{dashboard.CSRFHeader: csrfOf(t, resp), "Content-Type": "application/json"}})
	if skip.status != 200 {
		t.Fatalf("skip with the page's CSRF token: %d %s", skip.status, skip.body)
	}
	if r := e.wait(opt.ID); r.Status != workflow.StatusSucceeded || r.Step("try").Status != workflow.StepSkipped {
		t.Errorf("after skip: %s, try %s", r.Status, r.Step("try").Status)
	}
}

func TestUIActionWithoutCSRFChangesNothing(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	run := e.failedRun("alice")
	page := e.page("/runs/"+run.ID, aliceToken)
	csrf := csrfOf(t, page)
	before := e.snapshot(run.ID)
	for _, path := range []string{"/recover", "/cancel", "/steps/transform/retry", "/steps/transform/skip"} {
		resp := e.do(req{method: "POST", path: "/api/v1/workflows/" + run.ID + path, cookie: aliceToken, body: "{}",
			header: map[string]string{"Content-Type": "application/json"}})
		if resp.status != http.StatusForbidden || resp.problem(t).Type != dashboard.ProblemType(dashboard.ProblemCSRF) {
			t.Errorf("POST %s without the CSRF header: %d %s", path, resp.status, resp.body)
		}
	}
	if after := e.snapshot(run.ID); after != before {
		t.Fatalf("refused actions changed the run:\nbefore %+v\nafter  %+v", before, after)
	}
	resp := e.do(req{method: "POST", path: "/api/v1/workflows/" + run.ID + "/recover", cookie: aliceToken, body: "{}",
		header: map[string]string{dashboard.CSRFHeader: csrf, "Content-Type": "application/json"}})
	if resp.status != 200 {
		t.Fatalf("recover with the page's CSRF token: %d %s", resp.status, resp.body)
	}
	if after := e.snapshot(run.ID); after == before {
		t.Fatal("recover with the CSRF token changed nothing")
	}
}

// TestUISnoozedRunShowsCountdown: a snoozed step shows a "snoozed" badge
// and the countdown to its next visit, not a retry.
func TestUISnoozedRunShowsCountdown(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	run := e.startWF(snoozyWF, "alice", `{}`)
	testkit.Eventually(e.t, 10*time.Second, "a snooze", func() bool {
		r, err := e.client.Get(context.Background(), run.ID)
		return err == nil && r.Steps[0].Snoozed
	})
	page := e.page("/runs/"+run.ID, aliceToken).html()
	if !strings.Contains(page, `<span class="badge retrying">snoozed</span>`) || strings.Contains(page, ">retrying<") {
		t.Error("no snoozed badge, or a retrying one")
	}
	if m := regexp.MustCompile(`runs again in (\d+)s`).FindStringSubmatch(page); m == nil || m[1] == "0" {
		t.Errorf("countdown text %v, want about an hour in seconds", m)
	}
	if !strings.Contains(page, "snoozed (1 so far)") {
		t.Error("the run's summary does not say the step snoozed")
	}
}

func TestUIRetryingRunShowsCountdown(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	run := e.startWF(flakyWF, "alice", `{}`)
	var due time.Time
	testkit.Eventually(e.t, 10*time.Second, "a scheduled retry", func() bool {
		r, err := e.client.Get(context.Background(), run.ID)
		if err != nil || r.Warning != workflow.WarningRetryPending || r.Steps[0].NextAttemptAt == nil {
			return false
		}
		due = *r.Steps[0].NextAttemptAt
		return true
	})
	resp := e.page("/runs/"+run.ID, aliceToken)
	page := resp.html()
	if !strings.Contains(page, `<span class="badge retrying">retrying</span>`) {
		t.Error("no retrying badge")
	}
	wantDue := `data-due="` + due.Format(time.RFC3339Nano) + `"`
	if !strings.Contains(page, wantDue) {
		t.Errorf("no countdown %s", wantDue)
	}
	if m := regexp.MustCompile(`retry in (\d+)s`).FindStringSubmatch(page); m == nil || m[1] == "0" {
		t.Errorf("countdown text %v, want about an hour in seconds", m)
	}
	if !strings.Contains(page, errFlaky.Error()) || !strings.Contains(page, `data-run-id="`+run.ID+`"`) ||
		!regexp.MustCompile(`data-events-after="\d+-\d+"`).MatchString(page) {
		t.Error("the page lacks the last error, or what its script needs (run ID, event cursor)")
	}
	if got := actionsOf(resp); len(got) != 2 || !strings.HasPrefix(got[0], "cancel ") || !strings.HasPrefix(got[1], "pause ") {
		t.Errorf("retrying run: actions %v, want cancel and pause", got)
	}
	if list := e.page("/", aliceToken); !strings.Contains(list.html(), `<span class="badge retrying">retrying</span>`) {
		t.Error("the list has no retrying badge")
	}
}

func TestUIEscapesRunData(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	run := e.wait(e.start("alice", `{"note":"<script>alert(1)</script>","q":"\" onmouseover=\"x"}`).ID)
	resp := e.page("/runs/"+run.ID, aliceToken)
	if resp.status != 200 {
		t.Fatalf("run page: %d", resp.status)
	}
	if strings.Contains(resp.html(), "<script>alert") || strings.Contains(resp.html(), `" onmouseover="x`) {
		t.Fatal("run input reached the page unescaped")
	}
	if !strings.Contains(resp.html(), "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the escaped input is not shown")
	}
	csp := resp.header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || resp.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("security headers: CSP %q", csp)
	}
}

func TestUIAuthDisabledBanner(t *testing.T) {
	t.Parallel()
	open := newUIEnv(t, true)
	run := open.failedRun("")
	for _, path := range []string{"/", "/runs/" + run.ID, dashboard.AttentionPath} {
		resp := open.page(path, "")
		if resp.status != 200 || !strings.Contains(resp.html(), `id="auth-disabled"`) ||
			!strings.Contains(resp.html(), "Authentication disabled.") {
			t.Errorf("%s without tokens: %d, want the page with the banner", path, resp.status)
		}
		if strings.Contains(resp.html(), `action="/signout"`) {
			t.Errorf("%s without tokens offers to sign out", path)
		}
	}
	if resp := open.page(dashboard.SignInPath, ""); resp.status != http.StatusSeeOther || resp.header.Get("Location") != "/" {
		t.Errorf("sign-in without tokens: %d %q, want 303 to /", resp.status, resp.header.Get("Location"))
	}

	closed := newUIEnv(t, false)
	if resp := closed.page("/", aliceToken); resp.status != 200 || strings.Contains(resp.html(), "auth-disabled") {
		t.Errorf("with tokens: %d; the banner is shown", resp.status)
	}
}

func TestUIStaticAssets(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	for name, ctype := range map[string]string{
		"cairn.css":   "text/css; charset=utf-8",
		"cairn.js":    "text/javascript; charset=utf-8",
		"favicon.svg": "image/svg+xml",
	} {
		want, err := os.ReadFile("static/" + name)
		if err != nil {
			t.Fatal(err)
		}
		resp := e.page("/static/"+name, "")
		if resp.status != 200 || resp.header.Get("Content-Type") != ctype || string(resp.body) != string(want) {
			t.Errorf("%s: %d %q, %d bytes; want 200 %q with the file", name, resp.status, resp.header.Get("Content-Type"),
				len(resp.body), ctype)
			continue
		}
		etag := resp.header.Get("ETag")
		again := e.do(req{method: "GET", path: "/static/" + name, header: map[string]string{"If-None-Match": etag}})
		if etag == "" || again.status != http.StatusNotModified {
			t.Errorf("%s: ETag %q, conditional GET %d, want 304", name, etag, again.status)
		}
	}
	if resp := e.page("/static/nope.js", ""); resp.status != http.StatusNotFound {
		t.Errorf("missing asset: %d", resp.status)
	}
	// The pages link the assets by versioned URLs that resolve, and are
	// immutable.
	signin := e.page(dashboard.SignInPath, "")
	links := regexp.MustCompile(`(?:href|src)="(/static/[^"]+)"`).FindAllStringSubmatch(signin.html(), -1)
	if len(links) < 3 {
		t.Fatalf("the page links %d assets, want the CSS, the script and the icon", len(links))
	}
	for _, l := range links {
		resp := e.page(html.UnescapeString(l[1]), "")
		if resp.status != 200 || !strings.Contains(resp.header.Get("Cache-Control"), "immutable") {
			t.Errorf("%s: %d, Cache-Control %q", l[1], resp.status, resp.header.Get("Cache-Control"))
		}
	}
}
