package e2e

import (
	"fmt"
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

// reviewFile is a workflows file of two awaits (CAIRN_WORKFLOWS_FILE): each
// step's output is the payload of its signal.
const reviewFile = `workflows:
  review:
    steps:
      - {name: approval, type: await, with: {signal: approved, timeout: 1h}}
      - {name: report, type: await, with: {signal: report, timeout: 1h}}
`

// TestBrowserRunOutputs opens the run page of a run whose steps get their
// outputs while it is open: a signal's payload becomes the step's output,
// and each appears without a reload, pretty-printed; the small one is
// shown, the large one folded until its summary is clicked. An output that
// holds markup shows it as text. The screenshot "outputs" is the one in
// docs/images/run-outputs.png (copy it from $CAIRN_TEST_ARTIFACTS to update
// it).
func TestBrowserRunOutputs(t *testing.T) {
	testkit.SkipShort(t, needsBrowser)
	browser := findChromium(t)
	shots := artifactsDir(t)
	srv := redistest.Start(t, nil)
	bin := proctest.Build(t, workerPkg)
	review := filepath.Join(t.TempDir(), "workflows.yaml")
	if err := os.WriteFile(review, []byte(reviewFile), 0o600); err != nil {
		t.Fatal(err)
	}
	_, base, client := startAPIWorker(t, bin, srv, "outputs", "CAIRN_WORKFLOWS_FILE="+review)

	b := newBrowser(t, browser, shots)
	b.signIn("sign in", base+"/", browserUserToken,
		chromedp.WaitVisible(chromedp.CSS(".who .subject")))

	run := startRun(t, base, browserUserToken, `{"workflow":"review","input":{"order":"A-17","lines":3}}`)
	testkit.Premise(t, 20*time.Second, "the await to wait", func() bool {
		r, err := client.Get(ctxb, run.ID)
		return err == nil && r.Step("approval").Status == workflow.StepWaiting
	})
	b.do("open the run", 10*time.Second, chromedp.Navigate(base+"/runs/"+run.ID),
		chromedp.WaitVisible(chromedp.CSS(`details[data-output="input"] pre`)), chromedp.WaitVisible(chromedp.CSS("#sse.open")))
	if got := b.text(`details[data-output="input"] pre`); got != "{\n  \"order\": \"A-17\",\n  \"lines\": 3\n}" {
		t.Errorf("input shown as %q", got)
	}
	if n := eval[int](b, `document.querySelectorAll("details[data-output^='step:']").length`); n != 0 {
		t.Errorf("%d step outputs before any step ended", n)
	}
	eval[bool](b, "window.cairnTestMark = true") // gone if the page reloads

	// The approval: a small output, with markup in it, shown as text.
	payload := map[string]any{"approved": true, "by": "ann", "note": `<img src=x onerror="window.cairnXSS=1">`}
	if res, err := client.Signal(ctxb, run.ID, "approved", payload, nil); err != nil || res.Outcome != workflow.SignalDelivered {
		t.Fatalf("signal approved: %+v %v", res, err)
	}
	b.do("the approval's output, live", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`li[data-step="approval"] details[data-output="step:approval"][open] pre`)))
	if got := b.text(`li[data-step="approval"] details[data-output] pre`); !strings.Contains(got, `"by": "ann"`) ||
		!strings.Contains(got, `onerror=\"window.cairnXSS=1\"`) {
		t.Errorf("approval's output shown as %q", got)
	}

	// The report: a large output, folded.
	var lines []map[string]any
	for i := range 60 {
		lines = append(lines, map[string]any{"n": i + 1, "sku": fmt.Sprintf("SKU-%04d", 7*i+3), "qty": i%4 + 1})
	}
	if res, err := client.Signal(ctxb, run.ID, "report", map[string]any{"order": "A-17", "lines": lines}, nil); err != nil ||
		res.Outcome != workflow.SignalDelivered {
		t.Fatalf("signal report: %+v %v", res, err)
	}
	b.do("the run succeeds, its report folded", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#run-status[data-status="succeeded"]`)),
		chromedp.WaitVisible(chromedp.CSS(`li[data-step="report"] details[data-output="step:report"] summary`)))
	if !eval[bool](b, "window.cairnTestMark === true") {
		t.Fatal("the page reloaded; it should have updated in place")
	}
	if eval[bool](b, `document.querySelector('details[data-output="step:report"]').open`) ||
		eval[bool](b, `document.querySelector('details[data-output="step:report"] pre').checkVisibility()`) {
		t.Error("the large output is not folded")
	}
	if got := b.text(`details[data-output="step:report"] summary`); !strings.Contains(got, "lines") {
		t.Errorf("the folded output's summary %q, want its size in lines", got)
	}
	if eval[bool](b, `window.cairnXSS === 1 || document.querySelectorAll("#live pre img").length > 0`) {
		t.Error("markup of an output ran in the page")
	}
	b.shot("outputs")
	b.do("unfold the report", 10*time.Second, chromedp.Click(chromedp.CSS(`details[data-output="step:report"] summary`)),
		chromedp.WaitVisible(chromedp.CSS(`details[data-output="step:report"] pre`)))
	if got := b.text(`details[data-output="step:report"] pre`); !strings.Contains(got, `"sku": "SKU-0416"`) {
		t.Errorf("the unfolded report %.200q, want its last line", got)
	}
	b.shot("outputs-open")
}
