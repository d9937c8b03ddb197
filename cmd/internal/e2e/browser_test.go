package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// EnvTestArtifacts names the directory the browser test saves its
// screenshots in. Default: .artifacts/e2e at the repository root.
const EnvTestArtifacts = "CAIRN_TEST_ARTIFACTS"

// chromiumPath is where Debian's chromium package installs the browser.
const chromiumPath = "/usr/bin/chromium"

const (
	browserUserToken  = "browser-user-token-0001"
	browserAdminToken = "browser-admin-token-001"
)

// TestBrowserDashboard drives the web dashboard of the real worker binary
// in a headless Chromium: sign in; watch a run retry (badge, ticking
// countdown) and fail after its last attempt, live, without reloading the
// page (the run's events reach it over the event stream); recover it with
// the button and watch it succeed; then, as an admin, see a failing run
// arrive on the needs-attention page. Screenshots of each stage go to
// $CAIRN_TEST_ARTIFACTS.
//
// It is not parallel: its retry windows are a few seconds, and it should
// not share the two cores with the crash tests while it watches them.
func TestBrowserDashboard(t *testing.T) {
	testkit.SkipShort(t, needsBrowser)
	browser := findChromium(t)
	shots := artifactsDir(t)
	srv := redistest.Start(t, nil)
	bin := proctest.Build(t, workerPkg)

	const queue = "browser"
	// Three attempts, 2 s then 4 s apart: the run retries twice, then
	// fails; recovery runs attempt 4, which succeeds (fail_times 3).
	_, base, client := startAPIWorker(t, bin, srv, queue,
		"CAIRN_RETRY_MAX_ATTEMPTS=3", "CAIRN_RETRY_INITIAL_INTERVAL=2s", "CAIRN_RETRY_JITTER=none")

	b := newBrowser(t, browser, shots)

	// Sign in: a wrong token first, then the user's.
	b.do("open the dashboard", 20*time.Second, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	if loc := b.location(); !strings.HasPrefix(loc, base+"/signin?next=") {
		t.Fatalf("without a cookie the dashboard went to %s, want the sign-in page", loc)
	}
	b.shot("01-signin")
	b.do("sign in with a wrong token", 10*time.Second,
		chromedp.SendKeys(chromedp.CSS("#token"), "not-a-valid-token-000"),
		chromedp.Click(chromedp.CSS(`form[action="/signin"] button`)),
		chromedp.WaitVisible(chromedp.CSS("#signin-error")))
	b.do("sign in", 10*time.Second,
		chromedp.SendKeys(chromedp.CSS("#token"), browserUserToken),
		chromedp.Click(chromedp.CSS(`form[action="/signin"] button`)),
		chromedp.WaitVisible(chromedp.CSS(".who .subject")))
	if loc := b.location(); loc != base+"/" {
		t.Fatalf("after signing in: %s, want %s/", loc, base)
	}
	if c := eval[string](b, "document.cookie"); strings.Contains(c, browserUserToken) {
		t.Fatalf("the token cookie is readable by scripts (%q): it must be HttpOnly", c)
	}

	// A run that retries, then fails.
	run := startRun(t, base, browserUserToken, `{"workflow":"demo","input":{"fail_step":"transform","fail_times":3}}`)
	b.do("open the run", 10*time.Second, chromedp.Navigate(base+"/runs/"+run.ID),
		chromedp.WaitVisible(chromedp.CSS("#run-status")), chromedp.WaitVisible(chromedp.CSS("#sse.open")))
	eval[bool](b, "window.cairnTestMark = true") // gone if the page reloads
	b.do("the retrying badge and the countdown", 15*time.Second,
		chromedp.WaitVisible(chromedp.CSS("#run-status .badge.retrying")),
		chromedp.WaitVisible(chromedp.CSS(`li[data-step="transform"] .countdown`)))
	// The countdown says "retry in Ns" until the due time, then
	// "retrying now" until the page learns what the attempt did.
	first := poll[string](b, "a countdown in seconds", 10*time.Second,
		`(function(){var e=document.querySelector('li[data-step="transform"] .countdown');`+
			` return e && /^retry in \d+s$/.test(e.textContent) ? e.textContent : null})()`)
	if !regexp.MustCompile(`^retry in [1-4]s$`).MatchString(first) {
		t.Errorf("countdown %q, want \"retry in Ns\" with N from 1 to 4 (retries are 2s and 4s apart)", first)
	}
	b.shot("02-retrying")
	poll[bool](b, "the countdown to tick", 10*time.Second, fmt.Sprintf(
		`(function(){var e=document.querySelector('.countdown'); return !e || e.textContent !== %q})()`, first))

	b.do("the run fails, live", 30*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#run-status[data-status="failed"]`)),
		chromedp.WaitVisible(chromedp.CSS("#run-status .badge.attention")),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="recover"]`)),
		chromedp.WaitVisible(chromedp.CSS(`li[data-step="transform"] button[data-action="retry"]`)))
	if !eval[bool](b, "window.cairnTestMark === true") {
		t.Fatal("the page reloaded; it should have updated in place")
	}
	poll[bool](b, "the run's failure event to reach the page", 5*time.Second,
		`["step_failed", "run_failed", "run_needs_attention"].indexOf(document.body.dataset.lastEvent) >= 0`)
	if got := b.text(`#run-status`); strings.Contains(got, "retrying") {
		t.Errorf("failed run still shows %q", got)
	}
	if got := b.text(".summary .failure"); !strings.Contains(got, "retries_exhausted") || !strings.Contains(got, "transform") {
		t.Errorf("failure line %q, want retries_exhausted of transform", got)
	}
	if got := b.text(`li[data-step="transform"] .step-meta`); !strings.Contains(got, "attempt 3") {
		t.Errorf("transform's attempts: %q, want attempt 3", got)
	}
	b.shot("03-failed")

	// Recover with the button: attempt 4 succeeds.
	b.do("recover", 30*time.Second,
		chromedp.Click(chromedp.CSS(`button[data-action="recover"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#run-status[data-status="succeeded"]`)),
		chromedp.WaitNotPresent(chromedp.CSS("button[data-action]")),
		chromedp.WaitVisible(chromedp.CSS(`li[data-step="deliver"][data-step-status="succeeded"]`)))
	if !eval[bool](b, "window.cairnTestMark === true") {
		t.Fatal("the page reloaded after recover; it should have updated in place")
	}
	poll[bool](b, "run_succeeded to reach the page", 5*time.Second, `document.body.dataset.lastEvent === "run_succeeded"`)
	b.shot("04-recovered")
	final, err := client.Get(ctxb, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if tr := final.Step("transform"); final.Status != workflow.StatusSucceeded || tr.Attempts != 4 || final.NeedsAttention {
		t.Fatalf("after recover: %s, transform attempts %d, needs attention %v", final.Status, tr.Attempts, final.NeedsAttention)
	}
	evs, err := client.Events(ctxb, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	recovered := false
	for _, ev := range evs {
		recovered = recovered || (ev.Type == workflow.EventRunRecovered && ev.Details["actor"] == "alice")
	}
	if !recovered {
		t.Error("the journal has no run_recovered by alice")
	}

	// The list shows the run.
	b.do("the runs list", 10*time.Second, chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run="`+run.ID+`"] .badge.status-succeeded`)))
	b.shot("05-runs")
	b.do("a narrow screen", 10*time.Second, chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(base+"/runs/"+run.ID), chromedp.WaitVisible(chromedp.CSS("#run-status")))
	b.shotViewport("05-run-narrow")
	b.do("a wide screen again", 10*time.Second, chromedp.EmulateReset())

	// Sign out; as the admin, watch a failing run arrive on the
	// needs-attention page.
	b.do("sign out", 10*time.Second, chromedp.Click(chromedp.CSS(`form[action="/signout"] button`)),
		chromedp.WaitVisible(chromedp.CSS("#token")))
	b.do("sign in as admin", 10*time.Second,
		chromedp.SendKeys(chromedp.CSS("#token"), browserAdminToken),
		chromedp.Click(chromedp.CSS(`form[action="/signin"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/attention"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/monitoring/"]`)),
		chromedp.Navigate(base+"/attention"),
		chromedp.WaitVisible(chromedp.CSS("#sse.open")))
	eval[bool](b, "window.cairnTestMark = true")
	broken := startRun(t, base, browserUserToken, `{"workflow":"demo","input":{"fail_step":"fetch","permanent":true}}`)
	b.do("the failed run appears, live", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run="`+broken.ID+`"] button[data-action="recover"]`)))
	if !eval[bool](b, "window.cairnTestMark === true") {
		t.Fatal("the needs-attention page reloaded; it should have updated in place")
	}
	if got := b.text(`tr[data-run="` + broken.ID + `"] .why`); !strings.Contains(got, "permanent_error") {
		t.Errorf("needs-attention reason %q, want permanent_error", got)
	}
	b.shot("06-attention")
}

// findChromium returns the browser to drive; a machine without it fails
// the test with the command that installs it.
func findChromium(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err == nil {
		return chromiumPath
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Fatalf("chromium is not installed (looked for %s and chromium on PATH); the browser test needs it: apt-get install -y chromium", chromiumPath)
	return ""
}

// artifactsDir returns (and creates) the directory of the screenshots:
// $CAIRN_TEST_ARTIFACTS, or .artifacts/e2e at the repository root.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(EnvTestArtifacts)
	if dir == "" {
		root, err := filepath.Abs(filepath.Join("..", "..", ".."))
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, ".artifacts", "e2e")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("artifacts directory: %v", err)
	}
	return dir
}

// startRun starts a run through the HTTP API with a bearer token.
func startRun(t *testing.T, base, token, body string) *workflow.Run {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/workflows", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var run workflow.Run
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, &run) != nil || run.ID == "" {
		t.Fatalf("POST /api/v1/workflows: %d %s", resp.StatusCode, b)
	}
	return &run
}

// browser is one headless Chromium tab of a test.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string
}

func newBrowser(t *testing.T, path, shots string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	// Cleanups run last first: the browser ends before its profile
	// directory (t.TempDir above) is removed.
	t.Cleanup(cancelAlloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, bound to ctx
		t.Fatalf("starting %s: %v", path, err)
	}
	return &browser{t: t, ctx: ctx, shots: shots}
}

// do runs the actions within timeout; on failure it saves a screenshot and
// fails the test.
func (b *browser) do(what string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v (page %s)", what, err, b.location())
	}
}

// signIn opens url (the sign-in page, or a page that sends to it), signs
// in with token, and waits, within 20s, for then: what the signed-in page
// shows.
func (b *browser) signIn(what, url, token string, then ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	b.do(what, 20*time.Second, append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS(`form[action="/signin"] button`))}, then...)...)
}

func (b *browser) location() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	return loc
}

// text returns the visible text of the first element that matches the
// CSS selector.
func (b *browser) text(sel string) string {
	b.t.Helper()
	// One evaluation finds the element and reads its text: the live list
	// re-renders its rows on every event, so a node found by one DevTools
	// call can be gone by the next ("No node with given id found").
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	q, _ := json.Marshal(sel)
	s, err := chromedp.Run(ctx, chromedp.Poll[[]string](
		fmt.Sprintf(`(function(){var e=document.querySelector(%s); return e ? [e.innerText] : null})()`, q),
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(5*time.Second)))
	if err != nil || len(s) != 1 {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s[0])
}

// clickLive clicks the element sel in the page's live part, which is
// re-rendered on every event: one evaluation finds and clicks it, where a
// DevTools click (find the node, then click it) can lose the node between
// the two calls.
func (b *browser) clickLive(sel string) {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	poll[bool](b, "to click "+sel, 5*time.Second,
		fmt.Sprintf(`(function(){var e=document.querySelector(%s); if (!e) return false; e.click(); return true})()`, q))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// poll evaluates a JavaScript expression in the page every 50ms until it
// is truthy, and returns that value; it fails the test after timeout.
func poll[T any](b *browser, what string, timeout time.Duration, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout+5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Poll[T](expr, chromedp.WithPollingInterval(50*time.Millisecond),
		chromedp.WithPollingTimeout(timeout)))
	if err != nil {
		b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("waiting for %s: %v", what, err)
	}
	return v
}

// shot saves a screenshot of the whole page as <test>-<name>.png in the
// artifacts directory and logs its path.
func (b *browser) shot(name string) {
	b.t.Helper()
	b.save(name, chromedp.FullScreenshot(100))
}

// shotViewport is shot of the viewport only.
func (b *browser) shotViewport(name string) {
	b.t.Helper()
	b.save(name, chromedp.CaptureScreenshot())
}

func (b *browser) save(name string, capture chromedp.Action[[]byte]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, capture)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(b.shots, b.t.Name()+"-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	b.t.Logf("screenshot: %s", path)
}
