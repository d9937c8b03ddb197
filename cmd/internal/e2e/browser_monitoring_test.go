package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
)

// TestBrowserMonitoring opens asynqmon, mounted by the worker at
// /monitoring, as an admin in a headless Chromium under the
// Content-Security-Policy the server sends with it: the page runs (its
// inline scripts, allowed by hash, and its bundle), lists the worker's
// queue, is styled (Material-UI's run-time styles), and the browser
// reports no policy violation; the policy is in force (eval is refused).
// Its screenshot goes to $CAIRN_TEST_ARTIFACTS.
func TestBrowserMonitoring(t *testing.T) {
	testkit.SkipShort(t, needsBrowser)
	browser := findChromium(t)
	shots := artifactsDir(t)
	srv := redistest.Start(t, nil)
	bin := proctest.Build(t, workerPkg)

	const queue = "browser-monitoring"
	_, base, _ := startAPIWorker(t, bin, srv, queue)
	startRun(t, base, browserUserToken, `{"workflow":"demo","input":{}}`) // asynq knows the queue once it has had a task

	b := newBrowser(t, browser, shots)
	// Everything the page writes to the console, from before it loads.
	var (
		mu       sync.Mutex
		messages []string
	)
	cctx, stop := context.WithCancel(b.ctx)
	console := chromedp.Console(cctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range console {
			if err != nil {
				return
			}
			mu.Lock()
			messages = append(messages, m.String())
			mu.Unlock()
		}
	}()

	b.signIn("sign in as admin", base+"/", browserAdminToken,
		chromedp.WaitVisible(chromedp.CSS(`a[href="/monitoring/"]`)))
	b.do("open asynqmon", 20*time.Second, chromedp.Navigate(base+"/monitoring/"),
		chromedp.WaitVisible(chromedp.CSS("#root header")))
	poll[bool](b, "asynqmon to list the queue", 20*time.Second,
		`document.body.innerText.indexOf("`+queue+`") >= 0`)
	if bg := eval[string](b, `getComputedStyle(document.querySelector("#root header")).backgroundColor`); bg == "" ||
		bg == "rgba(0, 0, 0, 0)" {
		t.Errorf("asynqmon's app bar has no background (%q): its run-time styles did not apply", bg)
	}
	// (Runtime.evaluate itself is exempt from the page's policy, so the
	// probe is a script element the policy does not allow.)
	if eval[bool](b, `(function(){var s=document.createElement("script"); s.textContent="window.cairnInline=1";`+
		` document.head.appendChild(s); return window.cairnInline === 1})()`) {
		t.Error("an inline script ran in asynqmon's page: its Content-Security-Policy is not in force")
	}
	b.shot("01-monitoring")

	stop()
	<-done
	mu.Lock()
	defer mu.Unlock()
	violations := 0 // the probe's
	for _, m := range messages {
		t.Logf("console: %s", m)
		if strings.Contains(m, "Content Security Policy") || strings.Contains(m, "Refused to") {
			violations++
		}
	}
	if violations != 1 {
		t.Errorf("the browser reported %d policy violations, want 1 (the probe's)", violations)
	}
}
