package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cairnhq/cairn/workflow"
)

// outputsWF's steps return the hostile outputs of hostileOutputs, one a
// step in that order, then "nothing" returns nil.
const outputsWF = "outputs"

// The secret a run of outputsWF outputs at its step "secret": what another
// user must not see.
const outputSecret = "alice-secret-7f3a"

// hostileOutputs are the outputs of outputsWF's steps, by step.
var hostileOutputs = []struct{ step, output string }{
	{"secret", `{"token":"` + outputSecret + `"}`},
	{"script", `{"x":"</script><script>alert(1)</script>"}`},
	{"img", `{"x":"<img src=x onerror=alert(1)>"}`},
	{"svg", `{"x":"\"><svg onload=alert(1)>"}`},
	{"html", `"<b>bold</b><a href=\"javascript:alert(1)\">x</a>"`},
	{"long", `{"blob":"` + strings.Repeat("A<>", 40000) + `"}`},
	{"deep", strings.Repeat(`[`, 3000) + `"<i>deep</i>"` + strings.Repeat(`]`, 3000)},
	{"utf8", "{\"x\":\"bad \xff\xfe bytes <u>\"}"},
	{"many", `[` + strings.TrimSuffix(strings.Repeat(`1,`, 40), ",") + `]`},
}

func outputDefinitions() []workflow.Definition {
	var steps []workflow.Step
	for _, h := range hostileOutputs {
		out := json.RawMessage(h.output)
		steps = append(steps, workflow.Step{Name: h.step, Run: func(context.Context, *workflow.StepContext) (any, error) {
			return out, nil
		}})
	}
	steps = append(steps, workflow.Step{Name: "nothing", Run: func(context.Context, *workflow.StepContext) (any, error) {
		return nil, nil
	}})
	return []workflow.Definition{{Name: outputsWF, Policy: demoPolicy, Steps: steps}}
}

// outputsRun runs outputsWF for alice, with a hostile input, to the end.
func (e *env) outputsRun() *workflow.Run {
	e.t.Helper()
	run := e.wait(e.startWF(outputsWF, "alice", `{"note":"</script><img src=x onerror=alert(1)>"}`).ID)
	if run.Status != workflow.StatusSucceeded {
		e.t.Fatalf("outputs run %s is %s, want succeeded: %+v", run.ID, run.Status, run.Steps)
	}
	return run
}

// outputBlockRE finds the output blocks of a page: key, attributes, text,
// and what follows the text up to the end of the block.
var outputBlockRE = regexp.MustCompile(`(?s)<details class="output[^"]*" data-output="([^"]+)"([^>]*)>.*?<pre class="json">(.*?)</pre>(.*?)</details>`)

type pageBlock struct {
	open      bool
	text      string // unescaped
	raw, tail string
}

func outputBlocks(page string) map[string]pageBlock {
	m := map[string]pageBlock{}
	for _, b := range outputBlockRE.FindAllStringSubmatch(page, -1) {
		m[html.UnescapeString(b[1])] = pageBlock{open: strings.Contains(b[2], " open"), text: html.UnescapeString(b[3]),
			raw: b[3], tail: b[4]}
	}
	return m
}

// TestUIRunPageShowsOutputs: the run page shows each step's output,
// pretty-printed and escaped, small ones open, large ones folded, cut past
// the cap with a link to the API; a step without output shows none. Hostile
// outputs reach the page as text only, and the page keeps its CSP.
func TestUIRunPageShowsOutputs(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	run := e.outputsRun()
	resp := e.page("/runs/"+run.ID, aliceToken)
	if resp.status != 200 {
		t.Fatalf("run page: %d", resp.status)
	}
	page := resp.html()
	blocks := outputBlocks(page)

	// Nothing hostile is markup: no tag of the outputs or the input made
	// it through, and the only script is the page's own.
	for _, bad := range []string{"<img src=x", "<svg onload", "<b>bold", "<i>deep", "<u>", "href=\"javascript", "<script>alert", "</script><"} {
		if strings.Contains(page, bad) {
			i := strings.Index(page, bad)
			t.Errorf("the page has %q: an output reached it unescaped: %q", bad, page[max(0, i-300):i+50])
		}
	}
	if n := strings.Count(page, "<script"); n != 1 || !strings.Contains(page, `<script src="/static/cairn.js?v=`) {
		t.Errorf("the page has %d script tags, want its one script", n)
	}
	if strings.Contains(page, " style=") || strings.Contains(page, "<style") || inlineScriptRE.MatchString(page) {
		t.Error("the page has inline style or script")
	}
	if !utf8.ValidString(page) {
		t.Error("the page is not valid UTF-8")
	}
	if csp, list := resp.header.Get("Content-Security-Policy"), e.page("/", aliceToken).header.Get("Content-Security-Policy"); csp != list ||
		!strings.Contains(csp, "script-src 'self'; style-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("run page CSP %q, want the pages' own %q", csp, list)
	}

	for key, b := range blocks {
		if strings.ContainsAny(b.raw, "<>\"'") {
			t.Errorf("block %s: markup characters in its text: %.200q", key, b.raw)
		}
	}
	// The input: escaped, as sent.
	if in := blocks["input"]; !strings.Contains(in.raw, `&#34;note&#34;: &#34;&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;&#34;`) || !in.open {
		t.Errorf("input block %+v", in)
	}
	for _, c := range []struct {
		step string
		open bool
		want string // in the block's text, unescaped
	}{
		{"secret", true, "{\n  \"token\": \"" + outputSecret + "\"\n}"},
		{"script", true, `"x": "\u003c/script\u003e\u003cscript\u003ealert(1)\u003c/script\u003e"`},
		{"img", true, `"x": "\u003cimg src=x onerror=alert(1)\u003e"`},
		{"svg", true, `"x": "\"\u003e\u003csvg onload=alert(1)\u003e"`},
		{"html", true, `"\u003cb\u003ebold\u003c/b\u003e\u003ca href=\"javascript:alert(1)\"\u003ex\u003c/a\u003e"`},
		{"long", false, `"blob": "A\u003c\u003eA`},
		{"deep", false, "[\n  [\n    [\n"},
		{"utf8", true, "bad \uFFFD"},
		{"many", false, "[\n  1,\n  1,\n"},
	} {
		b, ok := blocks["step:"+c.step]
		if !ok {
			t.Errorf("step %s: no output block", c.step)
			continue
		}
		if b.open != c.open {
			t.Errorf("step %s: open %v, want %v", c.step, b.open, c.open)
		}
		if !strings.Contains(b.text, c.want) {
			t.Errorf("step %s: output %.300q, want it to contain %q", c.step, b.text, c.want)
		}
	}
	if _, ok := blocks["step:nothing"]; ok {
		t.Error("a step without output shows an output block")
	}
	// The long output is cut at the cap, with the API's link for the rest;
	// the others are whole.
	long := blocks["step:long"]
	api := "/api/v1/workflows/" + run.ID
	if !strings.Contains(long.tail, `bytes more; full output: <a href="`+api+`">`) || len(long.text) > 70<<10 {
		t.Errorf("long output: %d bytes shown, tail %q", len(long.text), long.tail)
	}
	var apiRun workflow.Run
	e.do(req{method: "GET", path: api, token: aliceToken}).decode(t, &apiRun)
	stored := len(apiRun.Steps[5].Output)
	m := regexp.MustCompile(`… (\d+) bytes more`).FindStringSubmatch(long.tail)
	if m == nil {
		m = []string{"", "0"}
	}
	if n, _ := strconv.Atoi(m[1]); n <= 0 || n >= stored-(32<<10) {
		t.Errorf("long output of %d bytes: tail %q, want how much of it is left", stored, long.tail)
	}
	for step, b := range blocks {
		if step != "step:long" && step != "step:deep" && strings.Contains(b.tail, "bytes more") {
			t.Errorf("%s is cut: %q", step, b.tail)
		}
	}
	// The deep one is indented at most 24 levels (and cut: 3000 lines).
	if strings.Contains(blocks["step:deep"].text, strings.Repeat(" ", 2*24+1)+"[") {
		t.Error("the deep output is indented more than 24 levels")
	}
}

// TestUIRunPageOutputsAsTheAPI: the page shows each output the API shows the
// same caller, owner or admin (the page reads the run as the API does), and
// another user neither; the page's text is the API's document.
func TestUIRunPageOutputsAsTheAPI(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	run := e.outputsRun()
	for _, token := range []string{aliceToken, rootToken} {
		var apiRun workflow.Run
		resp := e.do(req{method: "GET", path: "/api/v1/workflows/" + run.ID, token: token})
		if resp.status != 200 {
			t.Fatalf("API as %s: %d", token, resp.status)
		}
		resp.decode(t, &apiRun)
		blocks := outputBlocks(e.page("/runs/"+run.ID, token).html())
		shown := 0
		for _, st := range apiRun.Steps {
			b, ok := blocks["step:"+st.Name]
			if (len(st.Output) > 0 && string(st.Output) != "null") != ok {
				t.Errorf("as %s: step %s: API output %.80q, page block %v", token, st.Name, st.Output, ok)
				continue
			}
			if !ok || strings.Contains(b.tail, "bytes more") || !utf8.Valid(st.Output) {
				continue
			}
			var want, got bytes.Buffer
			if err := json.Compact(&want, st.Output); err != nil {
				t.Fatal(err)
			}
			if err := json.Compact(&got, []byte(b.text)); err != nil || got.String() != want.String() {
				t.Errorf("as %s: step %s: page shows %.200q, API %.200q (%v)", token, st.Name, got.String(), want.String(), err)
			}
			shown++
		}
		if shown < 6 {
			t.Errorf("as %s: %d outputs compared, want the 7 whole valid ones", token, shown)
		}
	}
}

// TestUICompensationOutput: a compensation that ran shows its output too.
func TestUICompensationOutput(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	run := e.wait(e.startWF(sagaPromoWF, "alice", `{}`).ID)
	blocks := outputBlocks(e.page("/runs/"+run.ID, aliceToken).html())
	if b, ok := blocks["comp:coupon"]; !ok || !strings.Contains(b.text, `"undid": "coupon"`) {
		t.Errorf("run %s (%s): the compensation of coupon shows %+v (%v); blocks %v", run.ID, run.Status, b, ok, keys(blocks))
	}
	if b := blocks["step:coupon"]; !strings.Contains(b.text, `"did": "coupon"`) {
		t.Errorf("step coupon shows %+v", b)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestUIRawMarkupOutput: a signal's payload, sent to the API as raw JSON,
// becomes the await's output as sent, markup characters unescaped by
// encoding/json; the page shows it as text.
func TestUIRawMarkupOutput(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	run := e.waitingRun("alice")
	body := `{"html":"</pre></details><script>alert(1)</script><img src=x onerror=alert(2)>\"><svg onload=alert(3)>"}`
	if resp := e.do(req{method: "POST", path: "/api/v1/workflows/" + run.ID + "/signals/approved", token: aliceToken,
		body: body}); resp.status != 200 {
		t.Fatalf("signal: %d %s", resp.status, resp.body)
	}
	done := e.wait(run.ID)
	if out := string(done.Step("approval").Output); !strings.Contains(out, "<script>") {
		t.Fatalf("premise: the output %s keeps its markup characters as sent", out)
	}
	page := e.page("/runs/"+run.ID, aliceToken).html()
	b, ok := outputBlocks(page)["step:approval"]
	if !ok || strings.ContainsAny(b.raw, "<>\"'") {
		t.Fatalf("approval's block %+v (%v)", b, ok)
	}
	want := `&#34;html&#34;: &#34;&lt;/pre&gt;&lt;/details&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;\&#34;&gt;&lt;svg onload=alert(3)&gt;&#34;`
	if !strings.Contains(b.raw, want) {
		t.Errorf("approval's output in the page %q, want %q", b.raw, want)
	}
	for _, bad := range []string{"<script>alert", "<img src=x", "<svg onload", "</pre></details><"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page has %q", bad)
		}
	}
}
