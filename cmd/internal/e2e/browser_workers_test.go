package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestBrowserWorkers: a dashboard (--dashboard-only) over a queue no
// worker serves: a user's run page and run list say that no live worker
// serves the queue; once a worker starts, the notice goes from the open
// run page without a reload. As the admin, the Workers page lists that
// worker, its run's attempt in flight. The screenshots "no-worker-notice"
// and "workers" are docs/images/no-worker-notice.png and
// docs/images/workers.png (copy them from $CAIRN_TEST_ARTIFACTS to update
// them).
func TestBrowserWorkers(t *testing.T) {
	testkit.SkipShort(t, needsBrowser)
	browser := findChromium(t)
	shots := artifactsDir(t)
	srv := redistest.Start(t, nil)
	bin := proctest.Build(t, workerPkg)
	const queue = "orders"

	// A worker publishes the demo workflow, then leaves cleanly: the queue
	// has no live worker.
	first := startWorker(t, bin, workerEnv(srv, queue))
	first.Signal(t, syscall.SIGTERM)
	if code := first.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the first worker exited %d", code)
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(browserUserToken+" alice user\n"+browserAdminToken+" root admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	dash := proctest.Start(t, bin, workerEnv(srv, queue, "CAIRN_HTTP_ADDR="+addr, "CAIRN_API_TOKENS_FILE="+tokens),
		"--dashboard-only")
	dash.WaitForOutput(t, "HTTP API listening", 30*time.Second)
	base := "http://" + addr
	client := workflow.NewClient(srv.Client(t), workflow.ClientConfig{Queue: queue})

	// Each step sleeps a minute: the attempt stays in flight.
	run := startRun(t, base, browserUserToken, `{"workflow":"demo","input":{"step_sleep_ms":60000}}`)
	t.Cleanup(func() { _, _ = client.Cancel(ctxb, run.ID, nil) })

	b := newBrowser(t, browser, shots)
	b.signIn("sign in", base+"/", browserUserToken,
		chromedp.WaitVisible(chromedp.CSS(".who .subject")))
	b.do("the run list says no worker serves the queue", 10*time.Second, chromedp.WaitVisible(chromedp.CSS("#no-worker")))
	if got := b.text("#no-worker"); !strings.Contains(got, `No live worker serves queue "orders"`) {
		t.Errorf("run list notice %q", got)
	}
	if eval[bool](b, `document.querySelector('a[href="/workers"]') !== null`) {
		t.Error("a user's nav links the Workers page")
	}
	b.do("open the run", 10*time.Second, chromedp.Navigate(base+"/runs/"+run.ID),
		chromedp.WaitVisible(chromedp.CSS("#no-worker")), chromedp.WaitVisible(chromedp.CSS("#sse.open")))
	if got := b.text("#no-worker"); got != `No live worker serves queue "orders": this run waits until one starts.` {
		t.Errorf("run page notice %q", got)
	}
	b.shot("no-worker-notice")
	eval[bool](b, "window.cairnTestMark = true") // gone if the page reloads

	// A worker starts: the notice goes, without a reload.
	startWorker(t, bin, workerEnv(srv, queue))
	poll[bool](b, "the notice to go", 30*time.Second, `document.getElementById("no-worker") === null`)
	if !eval[bool](b, "window.cairnTestMark === true") {
		t.Fatal("the run page reloaded; it should have updated in place")
	}

	// As the admin: the Workers page lists the worker, the run's attempt
	// in flight.
	b.do("sign out", 10*time.Second, chromedp.Click(chromedp.CSS(`form[action="/signout"] button`)),
		chromedp.WaitVisible(chromedp.CSS("#token")))
	b.do("sign in as admin", 10*time.Second,
		chromedp.SendKeys(chromedp.CSS("#token"), browserAdminToken),
		chromedp.Click(chromedp.CSS(`form[action="/signin"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/workers"]`)),
		chromedp.Click(chromedp.CSS(`a[href="/workers"]`)),
		chromedp.WaitVisible(chromedp.CSS("tr[data-worker]")))
	poll[bool](b, "the attempt in flight", 30*time.Second,
		`(function(){var e=document.querySelector("tr[data-worker] .in-flight"); return !!e && e.innerText.trim() === "1 / 10"})()`)
	if n := eval[int](b, `document.querySelectorAll("tr[data-worker]").length`); n != 1 {
		t.Errorf("%d workers listed, want 1", n)
	}
	if got := b.text(`tr[data-worker] td[data-label="Queues"]`); got != queue {
		t.Errorf("the worker's queues %q", got)
	}
	b.shot("workers")
}
