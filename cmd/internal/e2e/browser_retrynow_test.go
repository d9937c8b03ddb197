package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// noScript switches the page's JavaScript off: what follows is what a
// browser without it does.
func noScript() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	})
}

// TestBrowserRetryNow: a run whose step waits an hour for its retry shows
// the step's "Retry now" form; clicked with JavaScript switched off (a
// plain form post, then the run page again), the retry begins at once and
// the run succeeds, journaled retry_now by the user. Then the admin
// restores the finished run from a checkpoint with the run page's form
// (its details opened, a step chosen, the confirmation ticked), still
// without JavaScript. The screenshots "retry-now" and "restore" are
// docs/images/retry-now.png and docs/images/restore.png (copy them from
// $CAIRN_TEST_ARTIFACTS to update them).
func TestBrowserRetryNow(t *testing.T) {
	testkit.SkipShort(t, needsBrowser)
	browser := findChromium(t)
	shots := artifactsDir(t)
	srv := redistest.Start(t, nil)
	bin := proctest.Build(t, workerPkg)
	// The demo's retries wait an hour: only a retry made due now ends the
	// run within the test's deadlines.
	_, base, client := startAPIWorker(t, bin, srv, "retrynow", "CAIRN_RETRY_INITIAL_INTERVAL=1h",
		"CAIRN_RETRY_MAX_INTERVAL=1h")

	b := newBrowser(t, browser, shots)
	signIn := func(token string) {
		b.signIn("sign in", base+"/signin", token,
			chromedp.WaitVisible(chromedp.CSS(".who .subject")))
	}
	signIn(browserUserToken)
	run := startRun(t, base, browserUserToken, `{"workflow":"demo","input":{"fail_step":"transform","fail_times":1}}`)
	testkit.Premise(t, 20*time.Second, "transform's retry scheduled", func() bool {
		r, err := client.Get(ctxb, run.ID)
		return err == nil && r.Step("transform").RetryState == workflow.RetryScheduled
	})
	form := `li[data-step="transform"] form.retry-now`
	b.do("open the run", 10*time.Second, chromedp.Navigate(base+"/runs/"+run.ID),
		chromedp.WaitVisible(chromedp.CSS(form+" button")))
	b.shot("retry-now")

	b.do("retry now, without JavaScript", 20*time.Second, noScript(), chromedp.Click(chromedp.CSS(form+" button")),
		chromedp.WaitVisible(chromedp.CSS("#run-status")))
	if loc := b.location(); loc != base+"/runs/"+run.ID {
		t.Errorf("after the form, the browser is at %s; want the run page", loc)
	}
	testkit.Eventually(t, 30*time.Second, "the run to succeed", func() bool {
		r, err := client.Get(ctxb, run.ID)
		return err == nil && r.Status == workflow.StatusSucceeded
	})
	evs, err := client.Events(ctxb, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	byAlice := false
	for _, ev := range evs {
		byAlice = byAlice || (ev.Type == workflow.EventRetryNow && ev.Details["actor"] == "alice" && ev.Step == "transform")
	}
	if !byAlice {
		t.Error("the journal has no retry_now by alice")
	}
	b.do("the run page, succeeded", 10*time.Second, chromedp.Navigate(base+"/runs/"+run.ID),
		chromedp.WaitVisible(chromedp.CSS(`#run-status[data-status="succeeded"]`)))
	if eval[bool](b, `document.querySelector("#restore") !== null`) {
		t.Error("the restore form is shown to a user")
	}

	b.do("sign out", 10*time.Second, chromedp.Click(chromedp.CSS(`form[action="/signout"] button`)),
		chromedp.WaitVisible(chromedp.CSS("#token")))
	signIn(browserAdminToken)
	b.do("open the restore form", 10*time.Second, chromedp.Navigate(base+"/runs/"+run.ID),
		chromedp.Click(chromedp.CSS("#restore summary")), chromedp.WaitVisible(chromedp.CSS("#restore-from")),
		chromedp.SetValue(chromedp.CSS("#restore-from"), "transform"),
		chromedp.Click(chromedp.CSS(`#restore input[name="confirm"]`)))
	b.shot("restore")
	b.do("restore, without JavaScript", 20*time.Second, chromedp.Click(chromedp.CSS(`#restore button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#run-status")))
	testkit.Eventually(t, 30*time.Second, "the restored run to succeed again", func() bool {
		r, err := client.Get(ctxb, run.ID)
		return err == nil && r.Status == workflow.StatusSucceeded && r.Step("transform").Attempts > 2
	})
	audit, err := client.Audit(ctxb, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].Action != workflow.ActionRestore || audit[0].Actor != "root" ||
		audit[0].RunID != run.ID {
		t.Errorf("audit stream %+v, want root's restore of the run", audit)
	}
}
