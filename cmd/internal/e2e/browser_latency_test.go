package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestBrowserLatency runs demo runs of known step sleeps on a worker
// binary, waits for the worker's flush of their latencies, and opens the
// Latency page from the navigation: a row per step with its percentiles,
// the windows as links. A step name that holds markup, written straight
// to Redis, shows as text. The screenshot "latency" is the one in
// docs/images/latency.png (copy it from $CAIRN_TEST_ARTIFACTS to update
// it).
func TestBrowserLatency(t *testing.T) {
	testkit.SkipShort(t, needsBrowser)
	browser := findChromium(t)
	shots := artifactsDir(t)
	srv := redistest.Start(t, nil)
	bin := proctest.Build(t, workerPkg)
	const queue = "latency"
	_, base, client := startAPIWorker(t, bin, srv, queue)

	// 12 runs, steps sleeping 20 to 130ms; two of them retry transform once.
	const runs = 12
	var ids []string
	for i := range runs {
		input := fmt.Sprintf(`{"step_sleep_ms":%d}`, 20+10*i)
		if i%6 == 0 {
			input = fmt.Sprintf(`{"step_sleep_ms":%d,"fail_step":"transform","fail_times":1}`, 20+10*i)
		}
		ids = append(ids, startRun(t, base, browserUserToken, `{"workflow":"demo","input":`+input+`}`).ID)
	}
	testkit.Premise(t, 60*time.Second, "the runs to succeed", func() bool {
		for _, id := range ids {
			if r, err := client.Get(ctxb, id); err != nil || r.Status != workflow.StatusSucceeded {
				return false
			}
		}
		return true
	})
	// The worker writes what it counted every few seconds.
	var deliver workflow.LatencySeries
	testkit.Premise(t, 60*time.Second, "the worker to flush the latencies", func() bool {
		rep, err := client.Latency(ctxb, time.Hour, "demo")
		if err != nil {
			return false
		}
		for _, s := range rep.Series {
			if s.Step == "deliver" {
				deliver = s
			}
		}
		return deliver.Duration.Count == runs && deliver.Wait.Count == runs
	})
	// The slowest deliver slept 130ms: its p99 bucket is above that.
	if deliver.Duration.P99 < 130*time.Millisecond || deliver.Duration.P50 < 20*time.Millisecond {
		t.Errorf("deliver's run times %+v: want p50 above 20ms and p99 above 130ms", deliver.Duration)
	}

	b := newBrowser(t, browser, shots)
	b.signIn("sign in", base+"/", browserUserToken,
		chromedp.WaitVisible(chromedp.CSS(".who .subject")))
	b.do("open Latency from the navigation", 10*time.Second, chromedp.Click(chromedp.CSS(`header nav a[href="/latency"]`)),
		chromedp.WaitVisible(chromedp.CSS("#latency-table")))
	if n := eval[int](b, `document.querySelectorAll("#latency-table tbody tr").length`); n != 3 {
		t.Errorf("%d rows, want demo's 3 steps", n)
	}
	if got := b.text(`#latency-table tbody tr:nth-child(3)`); !strings.Contains(got, "transform") ||
		!strings.Contains(got, fmt.Sprint(runs+2)) {
		t.Errorf("transform's row %q, want its %d attempts", got, runs+2)
	}
	b.shot("latency")

	b.do("the 7 days' window", 10*time.Second, chromedp.Click(chromedp.CSS(`a[data-window="7d"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[data-window="7d"][aria-current="true"]`)),
		chromedp.WaitVisible(chromedp.CSS("#latency-table")))
	if loc := b.location(); !strings.HasSuffix(loc, "/latency?window=7d") {
		t.Errorf("7d link went to %s", loc)
	}

	// A step name with markup (no definition may have one: written
	// straight to Redis) shows as text, and nothing of it runs.
	hour := time.Now().Unix() / 3600
	if err := srv.Client(t).HSet(ctxb, fmt.Sprintf("cairn:{%s}:lat:%d", queue, hour),
		`d|demo|<img src=x onerror="window.cairnXSS=1">|30`, 1).Err(); err != nil {
		t.Fatal(err)
	}
	b.do("reload", 10*time.Second, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#latency-table")))
	if n := eval[int](b, `document.querySelectorAll("#latency-table tbody tr").length`); n != 4 {
		t.Errorf("%d rows, want 4 with the hostile one", n)
	}
	if eval[bool](b, `window.cairnXSS === 1 || document.querySelectorAll("#latency-table img").length > 0`) {
		t.Error("markup of a step name ran in the page")
	}
	if got := b.text(`#latency-table tbody tr:nth-child(1) td:nth-child(2)`); got != `<img src=x onerror="window.cairnXSS=1">` {
		t.Errorf("the hostile step's cell shows %q", got)
	}
}
