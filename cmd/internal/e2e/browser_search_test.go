package e2e

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
)

// TestBrowserSearch fills the runs page's search form in a real browser:
// the search goes into the URL (a GET form), the rows are the user's runs
// that match, never the admin's run with the same input; the form keeps
// what was typed; a search that does not parse is refused on the page,
// with the form and the syntax open, and a hostile query and a hostile run
// input stay text. The screenshot "search" is docs/images/search.png (copy
// it from $CAIRN_TEST_ARTIFACTS to update it).
func TestBrowserSearch(t *testing.T) {
	testkit.SkipShort(t, needsBrowser)
	browser := findChromium(t)
	shots := artifactsDir(t)
	srv := redistest.Start(t, nil)
	bin := proctest.Build(t, workerPkg)
	_, base, _ := startAPIWorker(t, bin, srv, "search")

	match1 := startRun(t, base, browserUserToken, `{"workflow":"demo","input":{"customer":{"id":42,"plan":"pro"},"email":"ann@example.com"}}`)
	other := startRun(t, base, browserUserToken, `{"workflow":"demo","input":{"customer":{"id":7,"plan":"pro"},"email":"bob@example.com"}}`)
	match2 := startRun(t, base, browserUserToken,
		`{"workflow":"demo","input":{"customer":{"id":42,"plan":"pro"},"note":"<img src=x onerror=\"window.cairnXSS=1\">"}}`)
	admins := startRun(t, base, browserAdminToken, `{"workflow":"demo","input":{"customer":{"id":42,"plan":"pro"}}}`)

	b := newBrowser(t, browser, shots)
	b.signIn("sign in", base+"/", browserUserToken,
		chromedp.WaitVisible(chromedp.CSS(".who .subject")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run="`+other.ID+`"]`)))

	const cond = `input.customer.id=42 input.customer.plan="pro"`
	b.do("search by input", 20*time.Second,
		chromedp.SendKeys(chromedp.CSS(`form.filters input[name="input"]`), cond),
		chromedp.SendKeys(chromedp.CSS(`form.filters input[name="since"]`), "1h"),
		chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`tr[data-run="`+other.ID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run="`+match1.ID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run="`+match2.ID+`"]`)))
	loc, err := url.Parse(b.location())
	if err != nil {
		t.Fatal(err)
	}
	if q := loc.Query(); q.Get("input") != cond || q.Get("since") != "1h" {
		t.Errorf("the search's URL %s does not hold the filters", loc)
	}
	if n := eval[int](b, `document.querySelectorAll("tr[data-run]").length`); n != 2 {
		t.Errorf("%d rows, want the user's 2 matching runs", n)
	}
	if eval[bool](b, `document.querySelector('tr[data-run="`+admins.ID+`"]') !== null`) {
		t.Error("the user's search shows the admin's run")
	}
	if got := eval[string](b, `document.querySelector('form.filters input[name="input"]').value`); got != cond {
		t.Errorf("the form holds %q after the search, want %q", got, cond)
	}
	b.do("open the syntax", 10*time.Second, chromedp.Click(chromedp.CSS(`details.search-syntax summary`)),
		chromedp.WaitVisible(chromedp.CSS(`details.search-syntax[open] p`)))
	b.shot("search")

	// By ID prefix: the form, cleared of the input, finds one run.
	b.do("search by ID prefix", 20*time.Second,
		chromedp.Navigate(base+"/?id_prefix="+strings.ToUpper(other.ID[:20])),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run="`+other.ID+`"]`)))
	if n := eval[int](b, `document.querySelectorAll("tr[data-run]").length`); n != 1 {
		t.Errorf("ID prefix search: %d rows, want 1", n)
	}

	// Refused, hostile: the error on the page, the query as text.
	hostile := `"><img src=x onerror="window.cairnXSS=1">`
	b.do("a refused search", 20*time.Second,
		chromedp.Navigate(base+"/?input="+url.QueryEscape("input.a!="+hostile)),
		chromedp.WaitVisible(chromedp.CSS(".search-error")),
		chromedp.WaitVisible(chromedp.CSS(`details.search-syntax[open] summary`)))
	if got := b.text(".search-error"); !strings.Contains(got, `position 8: only "=" is supported`) {
		t.Errorf("the refusal says %q", got)
	}
	if got := eval[string](b, `document.querySelector('form.filters input[name="input"]').value`); got != "input.a!="+hostile {
		t.Errorf("the form holds %q, want the refused query as typed", got)
	}
	// A search whose value is markup, finding the run whose input holds it.
	b.do("a hostile value", 20*time.Second,
		chromedp.Navigate(base+"/?input="+url.QueryEscape(`input.note="<img src=x onerror=\"window.cairnXSS=1\">"`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run="`+match2.ID+`"]`)))
	if eval[bool](b, `window.cairnXSS === 1 || document.querySelectorAll("img[src=x]").length > 0`) {
		t.Error("markup of a query ran in the page")
	}
	b.do("its run page", 20*time.Second, chromedp.Navigate(base+"/runs/"+match2.ID),
		chromedp.WaitVisible(chromedp.CSS(`details[data-output="input"]`)))
	if eval[bool](b, `window.cairnXSS === 1 || document.querySelectorAll("img[src=x]").length > 0`) {
		t.Error("markup of an input ran in the page")
	}
}
