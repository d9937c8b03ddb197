package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// countOf returns the count the counts bar of a runs page shows for a
// status ("all" for the total), -1 if none.
func countOf(page, status string) int {
	m := regexp.MustCompile(`data-count="` + regexp.QuoteMeta(status) + `">\s*<span class="n">(\d+)</span>`).FindStringSubmatch(page)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// rowOf returns the <tr> of a run in a list page ("" if none).
func rowOf(page, id string) string {
	i := strings.Index(page, `<tr data-run="`+id+`"`)
	if i < 0 {
		return ""
	}
	j := strings.Index(page[i:], "</tr>")
	if j < 0 {
		return page[i:]
	}
	return page[i : i+j]
}

// stepOf returns the <li> of a step in a run page ("" if none).
func stepOf(page, step string) string {
	i := strings.Index(page, `data-step="`+step+`" data-step-status=`)
	if i < 0 {
		return ""
	}
	j := strings.Index(page[i:], "</li>")
	return page[i : i+j]
}

// waitRetrying waits for a run's first step to have a retry scheduled.
func (e *env) waitRetrying(id string) {
	e.t.Helper()
	testkit.Eventually(e.t, 10*time.Second, "a scheduled retry", func() bool {
		r, err := e.client.Get(context.Background(), id)
		return err == nil && r.Warning == workflow.WarningRetryPending && r.Steps[0].NextAttemptAt != nil
	})
}

// TestUIRunsListShowsTime: the runs list has counts by status, each a link
// filtering the list (the caller's runs for a user, every run for an
// admin), and per run its current step, attempts, a countdown to its next
// retry and its duration; only admins get the bulk actions.
func TestUIRunsListShowsTime(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	flaky := e.startWF(flakyWF, "alice", `{}`)
	e.waitRetrying(flaky.ID)
	failed := e.failedRun("alice")
	ok := e.wait(e.start("alice", inputOK).ID)
	bobs := e.failedRun("bob")

	page := e.page("/", aliceToken).html()
	if got := countOf(page, "all"); got != 3 {
		t.Errorf("alice's total %d, want 3 (her runs only)", got)
	}
	if got := countOf(page, "failed"); got != 1 {
		t.Errorf("alice's failed count %d, want 1", got)
	}
	if got := countOf(page, "succeeded"); got != 1 {
		t.Errorf("alice's succeeded count %d, want 1", got)
	}
	if !strings.Contains(page, `<a href="/?status=failed" class="count s-failed"`) {
		t.Error("the failed count does not link to the list filtered by failed")
	}
	if !strings.Contains(page, "your runs") {
		t.Error("the counts do not say whose runs they count")
	}
	row := rowOf(page, flaky.ID)
	if !strings.Contains(row, `<span class="mono">call</span>`) || !strings.Contains(row, `<td data-label="Attempts" class="attempts">1 / 10</td>`) {
		t.Errorf("flaky run's row lacks its step or attempts:\n%s", row)
	}
	if m := regexp.MustCompile(`<span class="countdown" data-due="[^"]+">retry in (\d+)s</span>`).FindStringSubmatch(row); m == nil || m[1] == "0" {
		t.Errorf("flaky run's row has no countdown to its retry in an hour:\n%s", row)
	}
	if !strings.Contains(row, `class="live-duration" data-since="`) {
		t.Errorf("a run under way has no ticking duration:\n%s", row)
	}
	row = rowOf(page, failed.ID)
	if !strings.Contains(row, `<span class="mono">transform</span>`) || strings.Contains(row, "data-due") ||
		strings.Contains(row, "data-since") {
		t.Errorf("failed run's row: want its step, no countdown, a fixed duration:\n%s", row)
	}
	if row := rowOf(page, ok.ID); !regexp.MustCompile(`<td data-label="Duration" class="duration">\d+(ms|s)</td>`).MatchString(row) {
		t.Errorf("succeeded run's row has no duration:\n%s", row)
	}
	if strings.Contains(page, `id="bulk"`) || strings.Contains(page, `class="pick"`) {
		t.Error("a user's list offers the bulk actions")
	}

	// The admin: exact counts of the whole queue, the bulk actions.
	page = e.page("/", rootToken).html()
	for status, want := range map[string]int{"all": 4, "failed": 2, "succeeded": 1, "running": 1, "needs_attention": 2} {
		if got := countOf(page, status); got != want {
			t.Errorf("admin's %s count %d, want %d", status, got, want)
		}
	}
	if !strings.Contains(page, `id="bulk"`) || !strings.Contains(rowOf(page, bobs.ID), `class="pick" value="`+bobs.ID+`"`) ||
		!strings.Contains(rowOf(page, bobs.ID), `data-can-recover="1"`) {
		t.Error("the admin's list lacks the bulk actions or a run's checkbox")
	}
	// Filtered by owner: counted among that owner's runs; the links keep
	// the filter.
	page = e.page("/?owner=bob", rootToken).html()
	if countOf(page, "all") != 1 || countOf(page, "failed") != 1 || !strings.Contains(page, `href="/?owner=bob&amp;status=failed"`) {
		t.Errorf("owner=bob: total %d, failed %d, or the links drop the filter", countOf(page, "all"), countOf(page, "failed"))
	}
	if resp := e.page("/?owner="+strings.Repeat("x", 129), rootToken); resp.status != http.StatusBadRequest {
		t.Errorf("a 129-byte owner filter: %d, want 400", resp.status)
	}
	// Let the flaky run go before the worker stops.
	if _, err := e.client.Cancel(context.Background(), flaky.ID, nil); err != nil {
		t.Fatal(err)
	}
}

var (
	descRE     = regexp.MustCompile(`<desc id="runs-chart-desc">(\d+) runs created in the (last hour|last day)`)
	stepsRowRE = func(wf, step string) *regexp.Regexp {
		return regexp.MustCompile(`<tr><td>` + wf + `</td><td class="mono">` + step + `</td><td>(\d+)</td><td>(\d+)</td></tr>`)
	}
)

// TestUIActivityPage: the activity page charts the runs of the window by
// status, and the retries and failures per workflow and step, as SVG with
// a title, a description and a table; a user's charts count their own
// runs; hostile query parameters are 400.
func TestUIActivityPage(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	flaky := e.startWF(flakyWF, "alice", `{}`)
	e.waitRetrying(flaky.ID)
	e.failedRun("alice")
	e.failedRun("bob")
	e.wait(e.start("bob", inputOK).ID)

	resp := e.page(dashboard.ActivityPath, rootToken)
	page := resp.html()
	if resp.status != 200 {
		t.Fatalf("activity page: %d\n%s", resp.status, page)
	}
	for _, want := range []string{`<svg class="chart-svg"`, `role="img" aria-labelledby="runs-chart-title runs-chart-desc"`,
		`<title id="runs-chart-title">Runs created in the last hour, per 2m 00s, by status</title>`,
		`aria-labelledby="steps-chart-title steps-chart-desc"`, `<summary>Table of this chart</summary>`,
		`class="s-failed"`, `data-workflow="flaky" data-step="call"`, `aria-current="page">Activity</a>`} {
		if !strings.Contains(page, want) {
			t.Errorf("activity page lacks %s", want)
		}
	}
	if m := descRE.FindStringSubmatch(page); m == nil || m[1] != "4" {
		t.Errorf("runs chart description %v, want 4 runs in the last hour", m)
	}
	if m := stepsRowRE("demo", "transform").FindStringSubmatch(page); m == nil || m[1] != "0" || m[2] != "2" {
		t.Errorf("demo transform row %v, want 0 retries, 2 failed runs", m)
	}
	if m := stepsRowRE("flaky", "call").FindStringSubmatch(page); m == nil || m[1] != "1" || m[2] != "0" {
		t.Errorf("flaky call row %v, want 1 retry", m)
	}
	// Within the strict CSP: no inline script or style.
	if strings.Contains(page, "<script>") || strings.Contains(page, ` style="`) || strings.Contains(page, "<style") {
		t.Error("the page has an inline script or style")
	}
	if csp := resp.header.Get("Content-Security-Policy"); strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "style-src 'self'") {
		t.Errorf("CSP %q", csp)
	}

	// A user: their own runs and steps.
	page = e.page(dashboard.ActivityPath, aliceToken).html()
	if m := descRE.FindStringSubmatch(page); m == nil || m[1] != "2" {
		t.Errorf("alice's runs chart %v, want her 2 runs", m)
	}
	if m := stepsRowRE("demo", "transform").FindStringSubmatch(page); m == nil || m[2] != "1" {
		t.Errorf("alice's demo transform row %v, want her 1 failed run", m)
	}

	// The last day.
	page = e.page(dashboard.ActivityPath+"?window=24h", rootToken).html()
	if m := descRE.FindStringSubmatch(page); m == nil || m[1] != "4" || m[2] != "last day" ||
		!strings.Contains(page, `aria-current="true" data-window="24h"`) {
		t.Errorf("window=24h: %v", m)
	}
	// The live part alone.
	if resp := e.page(dashboard.ActivityPath+"?window=24h&fragment=1", rootToken); resp.status != 200 ||
		strings.Contains(resp.html(), "<html") || !strings.Contains(resp.html(), `id="runs-chart"`) {
		t.Errorf("fragment: %d", resp.status)
	}
	for _, q := range []string{"?window=7d", "?window=1h&window=24h", "?foo=1", "?window=%zz", "?window=" + strings.Repeat("1", 5000)} {
		resp := e.page(dashboard.ActivityPath+q, rootToken)
		if resp.status != http.StatusBadRequest || strings.Contains(resp.html(), "<svg") {
			t.Errorf("activity%s: %d, want 400 and no chart", cutStr(q, 40), resp.status)
		}
	}
	if _, err := e.client.Cancel(context.Background(), flaky.ID, nil); err != nil {
		t.Fatal(err)
	}
}

func cutStr(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// TestUIRunTimeline: the run page draws a timeline of the run's attempts
// and the waits between them; a step that succeeded after an error shows
// it as history, not as a current error; an operator's recover is a mark.
func TestUIRunTimeline(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	run := e.wait(e.start("alice", `{"fail_step":"transform","fail_times":1}`).ID)
	if run.Status != workflow.StatusSucceeded || run.Step("transform").Attempts != 2 {
		t.Fatalf("run %s, transform attempts %d; want succeeded at attempt 2", run.Status, run.Step("transform").Attempts)
	}
	page := e.page("/runs/"+run.ID, aliceToken).html()
	for _, want := range []string{`id="timeline"`, `aria-labelledby="timeline-title timeline-desc"`, `data-row="transform"`,
		`class="t-failed attempt"`, `class="t-backoff gap"`, `class="t-succeeded attempt"`, `<summary>Table of this timeline</summary>`} {
		if !strings.Contains(page, want) {
			t.Errorf("run page lacks %s", want)
		}
	}
	// One wait of the run's own, its backoff; on a loaded machine an
	// attempt can also wait 10 ms or more for a worker, which is a wait of
	// its own kind (t-worker) and counted as well.
	desc := regexp.MustCompile(`<desc id="timeline-desc">4 attempts and (\d+) waits over `).FindStringSubmatch(page)
	if workerWaits := strings.Count(page, `class="t-worker gap"`); desc == nil || desc[1] != strconv.Itoa(1+workerWaits) {
		t.Errorf("timeline description: %s; want 4 attempts and 1 wait, and %d for a worker",
			regexp.MustCompile(`<desc id="timeline-desc">[^<]*`).FindString(page), workerWaits)
	}
	tr := stepOf(page, "transform")
	if strings.Contains(tr, `<div class="error">`) || !strings.Contains(tr, `data-history="1"`) ||
		!strings.Contains(tr, "History: got past 1 failed attempt") {
		t.Errorf("transform, succeeded after an error, shows it as a current error, or not as history:\n%s", tr)
	}

	// A failed run: its error is current; recovered, the recover is a
	// mark on the timeline.
	failed := e.failedRun("alice")
	tr = stepOf(e.page("/runs/"+failed.ID, aliceToken).html(), "transform")
	if !strings.Contains(tr, `<div class="error">`) || strings.Contains(tr, "data-history") {
		t.Errorf("a failed step's error is not current, or is history too:\n%s", tr)
	}
	if _, err := e.client.Recover(context.Background(), failed.ID, &workflow.ActionOptions{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	e.wait(failed.ID)
	page = e.page("/runs/"+failed.ID, aliceToken).html()
	if !strings.Contains(page, `<g class="mark m-operator"><title>recover by alice</title>`) {
		t.Error("the recover is not marked on the timeline")
	}
	if tr := stepOf(page, "transform"); !strings.Contains(tr, `<div class="error">`) || !strings.Contains(tr, "1 earlier failed attempt") {
		t.Errorf("after failing again: want the last error current and the first as history:\n%s", tr)
	}
}

// bulk posts a bulk action with a bearer token.
func (e *env) bulk(token, body string) response {
	e.t.Helper()
	return e.do(req{method: "POST", path: dashboard.BulkPath, token: token, body: body})
}

// TestBulkActions: admins recover or cancel runs by ID or by filter; a
// dry run counts them; the action needs the count confirmed and does
// nothing if it changed; each run is journaled and audited as its single
// action; anyone else, or a request without its CSRF token, gets 403, and
// a malformed request 400, with nothing written.
func TestBulkActions(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	a1, a2, b1 := e.failedRun("alice"), e.failedRun("alice"), e.failedRun("bob")
	ok := e.wait(e.start("alice", inputOK).ID)
	ids := []string{a1.ID, a2.ID, b1.ID, ok.ID}
	snaps := func() []snapshot {
		out := make([]snapshot, len(ids))
		for i, id := range ids {
			out[i] = e.snapshot(id)
		}
		return out
	}
	before := snaps()
	audits := len(e.audit())

	// Refused: a user (403), a cookie without the CSRF header (403), bad
	// requests (400), a count that is not the one confirmed (409).
	for _, token := range []string{aliceToken, bobToken} {
		for _, body := range []string{`{"action":"recover","ids":["` + a1.ID + `"],"expect":1}`,
			`{"action":"recover","filter":{},"dry_run":true}`} {
			resp := e.bulk(token, body)
			if resp.status != http.StatusForbidden || resp.problem(t).Type != dashboard.ProblemType(dashboard.ProblemForbidden) {
				t.Errorf("%s: %d %s, want 403", token[:5], resp.status, resp.body)
			}
		}
	}
	resp := e.do(req{method: "POST", path: dashboard.BulkPath, cookie: rootToken,
		body: `{"action":"recover","ids":["` + a1.ID + `"],"expect":1}`})
	if resp.status != http.StatusForbidden || resp.problem(t).Type != dashboard.ProblemType(dashboard.ProblemCSRF) {
		t.Errorf("cookie without the CSRF header: %d %s", resp.status, resp.body)
	}
	for _, body := range []string{
		``, `{}`, `{"action":"restore","ids":["` + a1.ID + `"],"expect":1}`,
		`{"action":"recover","expect":1}`,
		`{"action":"recover","ids":[],"expect":0}`,
		`{"action":"recover","ids":["` + a1.ID + `"],"filter":{},"expect":1}`,
		`{"action":"recover","ids":["../../etc"],"expect":1}`,
		`{"action":"recover","ids":["` + a1.ID + `"]}`,
		`{"action":"recover","filter":{"status":"bogus"},"expect":1}`,
		`{"action":"recover","filter":{"workflow":"<x>"},"expect":1}`,
		`{"action":"recover","filter":{"owner":"` + strings.Repeat("o", 129) + `"},"expect":1}`,
		`{"action":"recover","ids":["` + a1.ID + `"],"expect":1,"extra":1}`,
		`{"action":"recover","ids":["` + a1.ID + `"],"expect":"1"}`,
		`{"action":"recover","ids":["` + strings.Repeat(a1.ID+`","`, dashboard.MaxBulkRuns) + a1.ID + `"],"expect":1}`,
	} {
		resp := e.bulk(rootToken, body)
		if resp.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", cutStr(body, 80), resp.status, resp.body)
		}
	}
	resp = e.bulk(rootToken, `{"action":"recover","filter":{"status":"failed"},"expect":2}`)
	if resp.status != http.StatusConflict || !strings.Contains(resp.problem(t).Detail, "3 runs are eligible now, not the 2 confirmed") {
		t.Errorf("a count not confirmed: %d %s, want 409", resp.status, resp.body)
	}
	if after := snaps(); !slices.Equal(after, before) {
		t.Fatalf("refused bulk actions changed runs:\nbefore %+v\nafter  %+v", before, after)
	}
	if n := len(e.audit()); n != audits {
		t.Fatalf("refused bulk actions wrote %d audit entries", n-audits)
	}

	// Dry runs count, and write nothing.
	var res dashboard.BulkResult
	resp = e.bulk(rootToken, `{"action":"recover","filter":{"status":"failed"},"dry_run":true}`)
	resp.decode(t, &res)
	if resp.status != 200 || res.Matched != 3 || res.Eligible != 3 || len(res.Applied) != 0 {
		t.Errorf("dry run by filter: %d %+v", resp.status, res)
	}
	resp = e.bulk(rootToken, `{"action":"recover","dry_run":true,"ids":["`+a1.ID+`","`+ok.ID+`","`+a1.ID+`","`+
		workflow.NewRunID(time.Now())+`"]}`)
	res = dashboard.BulkResult{}
	resp.decode(t, &res)
	if resp.status != 200 || res.Matched != 2 || res.Eligible != 1 || res.IDs[0] != a1.ID {
		t.Errorf("dry run by IDs (one failed, one succeeded, a repeat, an unknown): %d %+v", resp.status, res)
	}
	resp = e.bulk(rootToken, `{"action":"cancel","filter":{"workflow":"demo"},"dry_run":true}`)
	res = dashboard.BulkResult{}
	resp.decode(t, &res)
	if res.Matched != 4 || res.Eligible != 0 {
		t.Errorf("cancel dry run of ended runs: %+v", res)
	}
	if after := snaps(); !slices.Equal(after, before) {
		t.Fatal("dry runs changed runs")
	}

	// Recover alice's failed runs by filter, as the page's script does:
	// the cookie and the CSRF header.
	resp = e.do(req{method: "POST", path: dashboard.BulkPath, cookie: rootToken,
		header: map[string]string{dashboard.CSRFHeader: e.srv.CSRFToken(rootToken), "Content-Type": "application/json"},
		body:   `{"action":"recover","filter":{"status":"failed","owner":"alice"},"expect":2}`})
	res = dashboard.BulkResult{}
	resp.decode(t, &res)
	if resp.status != 200 || len(res.Applied) != 2 || len(res.Refused) != 0 || !slices.Contains(res.Applied, a1.ID) ||
		!slices.Contains(res.Applied, a2.ID) {
		t.Fatalf("bulk recover: %d %s", resp.status, resp.body)
	}
	for _, id := range []string{a1.ID, a2.ID} {
		e.wait(id)
		evs, err := e.client.Events(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(evs, func(ev workflow.Event) bool {
			return ev.Type == workflow.EventRunRecovered && ev.Details["actor"] == "root"
		}) {
			t.Errorf("run %s: no run_recovered by root in its journal", id)
		}
	}
	if e.snapshot(b1.ID) != before[2] {
		t.Error("bob's failed run, not selected, changed")
	}
	var bulkAudits []workflow.AuditEntry
	for _, a := range e.audit() {
		if a.Action == "recover" && a.Actor == "root" && strings.Contains(a.Detail, "bulk") {
			bulkAudits = append(bulkAudits, a)
		}
	}
	if len(bulkAudits) != 2 || bulkAudits[0].Owner != "alice" {
		t.Errorf("audit entries %+v, want one per run recovered", bulkAudits)
	}

	// Cancel running runs by ID.
	r1, r2 := e.runningRun("alice"), e.runningRun("bob")
	body, _ := json.Marshal(dashboard.BulkRequest{Action: "cancel", IDs: []string{r1.ID, r2.ID, ok.ID}, Expect: new(2)})
	resp = e.bulk(rootToken, string(body))
	res = dashboard.BulkResult{}
	resp.decode(t, &res)
	if resp.status != 200 || len(res.Applied) != 2 || res.Matched != 3 {
		t.Fatalf("bulk cancel: %d %s", resp.status, resp.body)
	}
	for _, id := range []string{r1.ID, r2.ID} {
		if r, err := e.client.Get(context.Background(), id); err != nil || r.Status != workflow.StatusCancelled {
			t.Errorf("run %s after bulk cancel: %v %v", id, r.Status, err)
		}
	}
}

// TestUIOrderingPage: admins see the ordering keys and workflow limits in
// use, each key's line with its owner and its admitted and waiting counts;
// anyone may look up a key, seeing their own line of it; a key that is not
// one is 400.
func TestUIOrderingPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true, ui: true})
	start := func(token string) {
		t.Helper()
		resp := e.do(req{method: "POST", path: "/api/v1/workflows", token: token,
			body: `{"workflow":"` + demo.Name + `","ordering_key":"order/42"}`})
		if resp.status != 201 {
			t.Fatalf("start: %d %s", resp.status, resp.body)
		}
	}
	start(aliceToken)
	start(bobToken)
	start(aliceToken)

	page := e.page(dashboard.OrderingPath, rootToken).html()
	gates := regexp.MustCompile(`(?s)<tr class="gate" data-key="order/42">.*?</tr>`).FindAllString(page, -1)
	if len(gates) != 2 {
		t.Fatalf("admin's gates: %q, want alice's and bob's lines of order/42\n%s", gates, page)
	}
	slices.Sort(gates) // alice's first
	if g := gates[0]; !strings.Contains(g, `<a class="mono" href="/ordering?key=order%2F42&amp;owner=alice">order/42</a>`) ||
		!strings.Contains(g, `<td data-label="Admitted">1</td>`) || !strings.Contains(g, "1 waiting") {
		t.Errorf("alice's line in the admin's gates: %q", g)
	}
	if g := gates[1]; !strings.Contains(g, "owner=bob") || !strings.Contains(g, `<td data-label="Waiting">0</td>`) {
		t.Errorf("bob's line in the admin's gates: %q", g)
	}
	page = e.page(dashboard.OrderingPath+"?key=order%2F42", aliceToken).html()
	if strings.Contains(page, `id="gates"`) || !strings.Contains(page, `id="key-line"`) ||
		strings.Count(page, `<tr data-run="`) != 2 || !strings.Contains(page, "line of alice: 1 admitted, 1 waiting") {
		t.Errorf("alice's view of the key: want her 2 runs, no gates\n%s", page)
	}
	if page := e.page(dashboard.OrderingPath+"?key=order%2F42&owner=alice", rootToken).html(); strings.Count(page, `<tr data-run="`) != 2 {
		t.Error("the admin does not see alice's 2 runs in her line")
	}
	if page := e.page(dashboard.OrderingPath+"?key=order%2F42", rootToken).html(); strings.Count(page, `<tr data-run="`) != 0 {
		t.Error("the admin's own line of the key shows runs")
	}
	for _, q := range []string{"?key=%01", "?key=", "?key=a&key=b", "?key=" + strings.Repeat("k", 300), "?x=1"} {
		if resp := e.page(dashboard.OrderingPath+q, aliceToken); resp.status != http.StatusBadRequest {
			t.Errorf("ordering%s: %d, want 400", cutStr(q, 30), resp.status)
		}
	}
}
