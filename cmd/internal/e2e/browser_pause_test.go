package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestBrowserPauseResume pauses a run from its page while its first step
// awaits a signal: the page says who paused it, without a reload; the
// signal completes the await, and the next step's dispatch is parked, not
// begun; Resume lets it go on, and the timeline keeps the pause as a gap of
// its own. The screenshot "paused" is docs/images/paused-run.png (copy it
// from $CAIRN_TEST_ARTIFACTS to update it).
func TestBrowserPauseResume(t *testing.T) {
	testkit.SkipShort(t, needsBrowser)
	browser := findChromium(t)
	shots := artifactsDir(t)
	srv := redistest.Start(t, nil)
	bin := proctest.Build(t, workerPkg)
	review := filepath.Join(t.TempDir(), "workflows.yaml")
	if err := os.WriteFile(review, []byte(reviewFile), 0o600); err != nil {
		t.Fatal(err)
	}
	_, base, client := startAPIWorker(t, bin, srv, "pause", "CAIRN_WORKFLOWS_FILE="+review)

	b := newBrowser(t, browser, shots)
	b.signIn("sign in", base+"/", browserUserToken,
		chromedp.WaitVisible(chromedp.CSS(".who .subject")))

	run := startRun(t, base, browserUserToken, `{"workflow":"review","input":{"order":"A-17"}}`)
	testkit.Premise(t, 20*time.Second, "the await to wait", func() bool {
		r, err := client.Get(ctxb, run.ID)
		return err == nil && r.Step("approval").Status == workflow.StepWaiting
	})
	b.do("open the run", 10*time.Second, chromedp.Navigate(base+"/runs/"+run.ID),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="pause"]`)), chromedp.WaitVisible(chromedp.CSS("#sse.open")))
	eval[bool](b, `(window.confirm = function (m) { window.cairnConfirm = m; return true; }, true)`)
	eval[bool](b, "window.cairnTestMark = true") // gone if the page reloads

	b.clickLive(`button[data-action="pause"]`)
	b.do("the page says paused", 20*time.Second, chromedp.WaitVisible(chromedp.CSS("#paused")),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="resume"]`)))
	if got := b.text("#paused"); !strings.Contains(got, "Paused by alice") {
		t.Errorf("the banner says %q", got)
	}
	if !eval[bool](b, "window.cairnTestMark === true") || !strings.Contains(eval[string](b, "window.cairnConfirm || ''"), "Pause this run?") {
		t.Error("the page reloaded, or the pause asked no confirmation")
	}

	// The signal completes the await; the report's dispatch is parked.
	if res, err := client.Signal(ctxb, run.ID, "approved", map[string]any{"approved": true}, nil); err != nil ||
		res.Outcome != workflow.SignalDelivered {
		t.Fatalf("signal approved: %+v %v", res, err)
	}
	testkit.Premise(t, 20*time.Second, "the report's dispatch to be parked", func() bool {
		r, err := client.Get(ctxb, run.ID)
		return err == nil && r.Paused != nil && r.Paused.Parked
	})
	r, err := client.Get(ctxb, run.ID)
	if err != nil || r.Step("report").Status != workflow.StepPending || r.Step("report").StartedAt != nil {
		t.Fatalf("the report began while paused: %+v %v", r.Step("report"), err)
	}
	b.do("reload the parked run", 10*time.Second, chromedp.Navigate(base+"/runs/"+run.ID),
		chromedp.WaitVisible(chromedp.CSS(`#paused[data-parked="true"]`)), chromedp.WaitVisible(chromedp.CSS("#sse.open")))
	if n := eval[int](b, `document.querySelectorAll("svg .t-paused.open").length`); n != 1 {
		t.Errorf("%d open paused gaps in the timeline, want 1", n)
	}
	b.shot("paused")

	b.clickLive(`button[data-action="resume"]`)
	b.do("resumed: the report waits for its signal", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`li[data-step="report"][data-step-status="waiting"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="pause"]`)))
	if eval[bool](b, `document.querySelector("#paused") !== null`) {
		t.Error("the banner is still shown after the resume")
	}
	if n := eval[int](b, `document.querySelectorAll("svg .t-paused:not(.open)").length`); n != 1 {
		t.Errorf("%d closed paused gaps in the timeline, want 1", n)
	}
	b.shot("resumed")
}
