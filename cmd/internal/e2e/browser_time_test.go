package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestBrowserDashboardTime drives the dashboard's views of time in a
// headless Chromium, as an admin: the runs list's counts by status (a
// count filters the list) and its countdown to a run's next retry; a bulk
// cancel of two selected runs, whose confirmation says how many; the
// activity charts; a run's timeline, where the error of a step that
// succeeded on its second attempt is history; the ordering keys in use.
// Screenshots of each page go to $CAIRN_TEST_ARTIFACTS.
func TestBrowserDashboardTime(t *testing.T) {
	testkit.SkipShort(t, needsBrowser)
	browser := findChromium(t)
	shots := artifactsDir(t)
	srv := redistest.Start(t, nil)
	bin := proctest.Build(t, workerPkg)

	const queue = "browser-time"
	// Two attempts, 4 s apart: a run that fails once waits 4 s for its
	// retry, long enough to see its countdown on the list.
	_, base, client := startAPIWorker(t, bin, srv, queue,
		"CAIRN_RETRY_MAX_ATTEMPTS=2", "CAIRN_RETRY_INITIAL_INTERVAL=4s", "CAIRN_RETRY_JITTER=none")

	b := newBrowser(t, browser, shots)
	b.signIn("sign in as admin", base+"/", browserAdminToken,
		chromedp.WaitVisible(chromedp.CSS(`#counts`)), chromedp.WaitVisible(chromedp.CSS("#sse.open")))

	const slow = `{"workflow":"demo","input":{"step_sleep_ms":600000}}`
	ok := startRun(t, base, browserUserToken, `{"workflow":"demo","input":{}}`)
	retried := startRun(t, base, browserUserToken, `{"workflow":"demo","input":{"fail_step":"transform","fail_times":1}}`)
	failed := startRun(t, base, browserUserToken, `{"workflow":"demo","input":{"fail_step":"fetch","permanent":true}}`)
	failedRoot := startRun(t, base, browserAdminToken, `{"workflow":"demo","input":{"fail_step":"deliver","permanent":true}}`)
	s1 := startRun(t, base, browserUserToken, slow)
	s2 := startRun(t, base, browserAdminToken, slow)
	o1 := startRun(t, base, browserUserToken, `{"workflow":"demo","input":{"step_sleep_ms":600000},"ordering_key":"acct-7"}`)
	o2 := startRun(t, base, browserUserToken, `{"workflow":"demo","input":{"step_sleep_ms":600000},"ordering_key":"acct-7"}`)
	const total = 8

	// The runs list: counts by status, live; the retried run's countdown.
	b.do("the runs list", 10*time.Second, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#sse.open")))
	poll[bool](b, "the counts to reach every run", 20*time.Second, fmt.Sprintf(
		`(function(){var e=document.querySelector('[data-count="all"] .n'); return !!e && e.textContent === "%d"})()`, total))
	countdown := poll[string](b, "the retried run's countdown on the list", 15*time.Second, fmt.Sprintf(
		`(function(){var e=document.querySelector('tr[data-run="%s"] .countdown');`+
			` return e && /^retry in \d+s$/.test(e.textContent) ? e.textContent : null})()`, retried.ID))
	if !regexp.MustCompile(`^retry in [1-4]s$`).MatchString(countdown) {
		t.Errorf("countdown %q, want \"retry in Ns\", N from 1 to 4", countdown)
	}
	poll[bool](b, "two failed runs counted", 20*time.Second,
		`(function(){var e=document.querySelector('[data-count="failed"] .n'); return !!e && e.textContent === "2"})()`)
	if got := b.text(fmt.Sprintf(`tr[data-run="%s"] .attempts`, retried.ID)); got != "1 / 2" && got != "2 / 2" {
		t.Errorf("retried run's attempts %q, want 1 / 2 (or 2 / 2 once retried)", got)
	}
	if got := b.text(fmt.Sprintf(`tr[data-run="%s"] .cur-step`, failed.ID)); !strings.HasPrefix(got, "fetch") {
		t.Errorf("failed run's step %q, want fetch", got)
	}
	since := b.text(fmt.Sprintf(`tr[data-run="%s"] .live-duration`, s1.ID))
	poll[bool](b, "a running run's duration to tick", 5*time.Second, fmt.Sprintf(
		`document.querySelector('tr[data-run="%s"] .live-duration').textContent !== %q`, s1.ID, since))
	b.shot("07-runs-counts")

	// A count filters the list.
	b.clickLive(`a[data-count="failed"]`)
	b.do("the failed count", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`a[data-count="failed"][aria-current]`)))
	if loc := b.location(); loc != base+"/?status=failed" {
		t.Errorf("the failed count led to %s", loc)
	}
	if n := eval[int](b, `document.querySelectorAll("tbody tr[data-run]").length`); n != 2 {
		t.Errorf("the failed list has %d runs, want 2", n)
	}

	// Bulk cancel of two selected runs (one of alice, one of root's).
	b.do("the running runs", 10*time.Second, chromedp.Navigate(base+"/?status=running"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run="`+s1.ID+`"] input.pick`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run="`+s2.ID+`"] input.pick`)), chromedp.WaitVisible(chromedp.CSS("#sse.open")))
	eval[bool](b, `(window.confirm = function (m) { window.cairnConfirm = m; return true; }, true)`)
	b.clickLive(`tr[data-run="` + s1.ID + `"] input.pick`)
	b.clickLive(`tr[data-run="` + s2.ID + `"] input.pick`)
	if got := b.text("#bulk-count"); got != "2 runs selected" {
		t.Errorf("selection: %q", got)
	}
	b.shot("08-bulk-selected")
	b.do("cancel them", 20*time.Second,
		chromedp.Click(chromedp.CSS(`button[data-bulk="cancel"][data-scope="selected"]`)),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
		chromedp.WaitNotPresent(chromedp.CSS(`tr[data-run="`+s1.ID+`"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`tr[data-run="`+s2.ID+`"]`)))
	if got := eval[string](b, "window.cairnConfirm || ''"); got != "Cancel 2 runs of the 2 selected?" {
		t.Errorf("confirmation %q, want it to say how many", got)
	}
	if got := b.text("#flash"); got != "Cancel: 2 runs done." {
		t.Errorf("flash %q", got)
	}
	b.shot("08-bulk-cancelled")
	for _, id := range []string{s1.ID, s2.ID} {
		r, err := client.Get(ctxb, id)
		if err != nil || r.Status != workflow.StatusCancelled {
			t.Fatalf("run %s after the bulk cancel: %v", id, err)
		}
	}
	audit, err := client.Audit(ctxb, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].RunID != s1.ID || audit[0].Actor != "root" || audit[0].Action != "cancel" {
		t.Errorf("audit %+v, want the cancel of alice's run by root (root's own run is not audited, as a single action)", audit)
	}

	// The activity charts.
	if r := testkit.WaitRun(t, client, retried.ID, 20*time.Second); r.Status != workflow.StatusSucceeded {
		t.Fatalf("the retried run %s", r.Status)
	}
	b.do("the activity page", 10*time.Second, chromedp.Navigate(base+"/activity"),
		chromedp.WaitVisible(chromedp.CSS("#runs-chart svg rect.s-succeeded")),
		chromedp.WaitVisible(chromedp.CSS(`#steps-chart g.step-row[data-workflow="demo"][data-step="transform"]`)))
	if got := eval[string](b, `document.getElementById("runs-chart-desc").textContent`); !strings.HasPrefix(got,
		strconv.Itoa(total)+" runs created in the last hour") {
		t.Errorf("runs chart description %q", got)
	}
	b.shot("09-activity")
	b.do("the last day", 10*time.Second, chromedp.Click(chromedp.CSS(`a[data-window="24h"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[data-window="24h"][aria-current]`)))
	if got := eval[string](b, `document.getElementById("runs-chart-title").textContent`); !strings.Contains(got, "last day") {
		t.Errorf("24h chart title %q", got)
	}

	// The retried run's timeline.
	b.do("the retried run", 10*time.Second, chromedp.Navigate(base+"/runs/"+retried.ID),
		chromedp.WaitVisible(chromedp.CSS("#timeline rect.t-succeeded")))
	for _, sel := range []string{`#timeline g[data-row="transform"] rect.t-failed`, `#timeline g[data-row="transform"] rect.t-backoff`,
		`li[data-step="transform"] details.history`} {
		if !eval[bool](b, fmt.Sprintf(`!!document.querySelector(%q)`, sel)) {
			t.Errorf("run page lacks %s", sel)
		}
	}
	if eval[bool](b, `!!document.querySelector('li[data-step="transform"] .error')`) {
		t.Error("transform succeeded on its second attempt, yet shows its first attempt's error as current")
	}
	// To scale: the 4 s backoff spans most of the run.
	if frac := eval[float64](b, `(function(){var g=document.querySelector('#timeline g[data-row="transform"] rect.t-backoff');`+
		` var svg=document.querySelector('#timeline svg'); return g.getBBox().width / svg.viewBox.baseVal.width})()`); frac < 0.5 {
		t.Errorf("the backoff spans %.2f of the timeline, want most of it", frac)
	}
	b.shot("10-timeline")

	// The ordering keys in use.
	b.do("the ordering page", 10*time.Second, chromedp.Navigate(base+"/ordering"),
		chromedp.WaitVisible(chromedp.CSS(`tr.gate[data-key="acct-7"]`)))
	if got := b.text(`tr.gate[data-key="acct-7"]`); !strings.Contains(got, "1 waiting") {
		t.Errorf("acct-7's gate %q, want 1 waiting", got)
	}
	b.clickLive(`tr.gate[data-key="acct-7"] a`)
	b.do("the key's line", 10*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#key-line tr[data-run="`+o2.ID+`"]`)))
	b.shot("11-ordering")

	// Let the sleeping steps go before the worker stops.
	for _, id := range []string{o2.ID, o1.ID} {
		if _, err := client.Cancel(ctxb, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = ok, failedRoot
}
