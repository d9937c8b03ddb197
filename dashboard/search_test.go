package dashboard_test

import (
	"html"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/workflow"
)

// runList is the answer of GET /api/v1/workflows.
type runList struct {
	Runs        []workflow.Run `json:"runs"`
	NextCursor  string         `json:"next_cursor"`
	Scanned     int            `json:"scanned"`
	ScanLimited bool           `json:"scan_limited"`
}

// search GETs /api/v1/workflows with query (url-encoded pairs) as token,
// following the cursors: the runs' IDs, and the pages the bound ended.
func (e *env) search(token string, query url.Values) (ids []string, limited int) {
	e.t.Helper()
	q := url.Values{}
	maps.Copy(q, query)
	for page := 0; ; page++ {
		if page > 50 {
			e.t.Fatal("more than 50 pages")
		}
		resp := e.do(req{method: "GET", path: "/api/v1/workflows?" + q.Encode(), token: token})
		if resp.status != 200 {
			e.t.Fatalf("search %s: %d %s", q.Encode(), resp.status, resp.body)
		}
		var l runList
		resp.decode(e.t, &l)
		if l.ScanLimited {
			limited++
		}
		for _, r := range l.Runs {
			ids = append(ids, r.ID)
		}
		if l.NextCursor == "" {
			return ids, limited
		}
		q.Set("cursor", l.NextCursor)
	}
}

// searchFixture starts pending runs: alice's a1 (customer 1, a@x.io,
// vip), a2 (customer 2) and a3 (customer 1, an XSS payload), bob's b1
// (customer 1, b@x.io).
func searchFixture(e *env) (a1, a2, a3, b1 *workflow.Run) {
	a1 = e.start("alice", `{"customer":{"id":1},"email":"a@x.io","vip":true}`)
	a2 = e.start("alice", `{"customer":{"id":2},"email":"a2@x.io"}`)
	b1 = e.start("bob", `{"customer":{"id":1},"email":"b@x.io"}`)
	a3 = e.start("alice", `{"customer":{"id":1},"note":"<script>alert(1)</script>","q":"\" onmouseover=\"x"}`)
	return a1, a2, a3, b1
}

// ids returns the IDs of runs as a listing orders them: newest first,
// and by ID, descending, within a millisecond.
func ids(runs ...*workflow.Run) []string {
	runs = slices.Clone(runs)
	slices.SortFunc(runs, func(a, b *workflow.Run) int {
		if c := b.CreatedAt.UnixMilli() - a.CreatedAt.UnixMilli(); c != 0 {
			return int(c)
		}
		return strings.Compare(b.ID, a.ID)
	})
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

// createdBefore returns the runs created before t's millisecond.
func createdBefore(t *workflow.Run, runs ...*workflow.Run) []*workflow.Run {
	var out []*workflow.Run
	for _, r := range runs {
		if r.CreatedAt.UnixMilli() < t.CreatedAt.UnixMilli() {
			out = append(out, r)
		}
	}
	return out
}

// TestSearchAPI: GET /api/v1/workflows's search parameters, alone and
// combined, as the owner, another user and an admin.
func TestSearchAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true})
	a1, a2, a3, b1 := searchFixture(e)
	v := func(kv ...string) url.Values {
		q := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			q.Add(kv[i], kv[i+1])
		}
		return q
	}
	for _, c := range []struct {
		name  string
		token string
		q     url.Values
		want  []string
	}{
		{"input as alice", aliceToken, v("input", "input.customer.id=1"), ids(a3, a1)},
		{"input as bob", bobToken, v("input", "input.customer.id=1"), ids(b1)},
		{"input as admin", rootToken, v("input", "input.customer.id=1"), ids(a3, b1, a1)},
		{"input of alice's as bob", bobToken, v("input", `input.email="a@x.io"`), nil},
		{"two conditions", aliceToken, v("input", "input.customer.id=1 input.vip=true"), ids(a1)},
		{"input repeated", aliceToken, v("input", "input.customer.id=1", "input", "input.vip=true"), ids(a1)},
		{"a string is not a number", aliceToken, v("input", `input.customer.id="1"`), nil},
		{"id prefix", aliceToken, v("id_prefix", a2.ID[:24]), ids(a2)},
		{"id prefix in upper case", aliceToken, v("id_prefix", strings.ToUpper(a2.ID[:24])), ids(a2)},
		{"whole id", aliceToken, v("id_prefix", a2.ID), ids(a2)},
		{"whole id of alice's as bob", bobToken, v("id_prefix", a2.ID), nil},
		{"id prefix of alice's as bob", bobToken, v("id_prefix", a2.ID[:24]), nil},
		{"since an hour", aliceToken, v("since", "1h"), ids(a3, a2, a1)},
		{"until a year ago", aliceToken, v("until", "365d"), nil},
		{"since a1 until a3", rootToken, v("since", a1.CreatedAt.Format("2006-01-02T15:04:05.000Z07:00"),
			"until", a3.CreatedAt.Format("2006-01-02T15:04:05.000Z07:00")), ids(createdBefore(a3, b1, a2, a1)...)},
		{"every filter", aliceToken, v("input", "input.customer.id=1", "id_prefix", a1.ID[:12], "since", "1h",
			"status", "pending", "workflow", "demo"), nil}, // want: set below
		{"status none has", aliceToken, v("input", "input.customer.id=1", "status", "failed"), nil},
	} {
		got, limited := e.search(c.token, c.q)
		if c.name == "every filter" {
			// a1 and a3 share their first 12 characters when made within
			// the same ~second: keep those that start like a1.
			var keep []*workflow.Run
			for _, r := range []*workflow.Run{a3, a1} {
				if strings.HasPrefix(r.ID, a1.ID[:12]) {
					keep = append(keep, r)
				}
			}
			c.want = ids(keep...)
		}
		if !slices.Equal(got, c.want) || limited != 0 {
			t.Errorf("%s (%s): %v (%d limited), want %v", c.name, c.q.Encode(), got, limited, c.want)
		}
	}

	// The bound (admins only): one run examined a page; following the
	// cursors finds a1, the oldest, after 3 limited pages or more.
	got, limited := e.search(rootToken, v("input", "input.vip=true", "scan_limit", "1"))
	if !slices.Equal(got, ids(a1)) || limited < 3 {
		t.Errorf("scan_limit=1: %v (%d limited), want [%s] after 3 limited pages or more", got, limited, a1.ID)
	}
	got, _ = e.search(aliceToken, v("input", "input.vip=true"))
	if !slices.Equal(got, ids(a1)) {
		t.Errorf("alice's input.vip=true: %v, want [%s]", got, a1.ID)
	}
	resp := e.do(req{method: "GET", path: "/api/v1/workflows?input=input.vip%3Dtrue&scan_limit=2", token: rootToken})
	var l runList
	resp.decode(t, &l)
	if !l.ScanLimited || l.Scanned != 2 || len(l.Runs) != 0 || l.NextCursor == "" {
		t.Errorf("admin, scan_limit=2: %+v, want limited after 2 with a cursor", l)
	}
	// For a user, scan_limit is refused: a low bound would tell when
	// other owners' runs were created, one a page.
	resp = e.do(req{method: "GET", path: "/api/v1/workflows?input=input.vip%3Dtrue&scan_limit=2", token: aliceToken})
	if resp.status != 403 || !strings.Contains(resp.problem(t).Detail, "only admins set scan_limit") {
		t.Errorf("alice, scan_limit=2: %d %s, want 403", resp.status, resp.body)
	}
	// Neither does a user's page say how many runs it examined.
	resp = e.do(req{method: "GET", path: "/api/v1/workflows?input=input.vip%3Dtrue", token: aliceToken})
	if strings.Contains(string(resp.body), `"scanned"`) {
		t.Errorf("alice's search: %s, want no count of the runs examined", resp.body)
	}
}

// TestSearchAPIRefusesBadSyntax: a search that does not parse is a 400
// problem that names the parameter and the position, and writes nothing.
func TestSearchAPIRefusesBadSyntax(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true})
	e.start("alice", inputOK)
	for _, c := range []struct {
		query, detail string
	}{
		{"input=customer.id%3D1", `query parameter "input": position 1: want a condition`},
		{"input=input.customer.id!%3D1", `query parameter "input": position 18: only "=" is supported`},
		{"input=input.a%3D1&input=input.b%3E2", `query parameter "input": position 8: only "=" is supported`},
		{"input=input.a%3D%22%3Cscript%3E", `query parameter "input": position 9: a quoted value that is not a JSON string`},
		{"input=" + strings.Repeat("x", 1100), `query parameter "input": longer than 1024 bytes`},
		{"id_prefix=01u", `query parameter "id_prefix": position 3: "u" is not a character of a run ID`},
		{"id_prefix=%3Cscript%3E", `query parameter "id_prefix": position 1`},
		{"id_prefix=" + strings.Repeat("0", 27), `query parameter "id_prefix": want 1 to 26 characters`},
		{"id_prefix=0&id_prefix=1", `query parameter "id_prefix" given 2 times`},
		{"since=yesterday", `query parameter "since": "yesterday": want an RFC 3339 time`},
		{"until=-1h", `query parameter "until"`},
		{"since=1h&until=2h", `until (`},
		{"scan_limit=0", `query parameter "scan_limit" "0": want an integer from 1 to 10000`},
		{"scan_limit=10001", `want an integer from 1 to 10000`},
	} {
		runs, audit := e.countRuns(), len(e.audit())
		token := aliceToken
		if strings.HasPrefix(c.query, "scan_limit") {
			token = rootToken // a user's scan_limit is a 403 (TestSearchAPI)
		}
		resp := e.do(req{method: "GET", path: "/api/v1/workflows?" + c.query, token: token})
		if resp.status != 400 {
			t.Errorf("%s: %d %s, want 400", c.query, resp.status, resp.body)
			continue
		}
		p := resp.problem(t)
		if p.Type != "urn:cairn:problem:invalid-request" || !strings.Contains(p.Detail, c.detail) {
			t.Errorf("%s: problem %+v, want detail with %q", c.query, p, c.detail)
		}
		if e.countRuns() != runs || len(e.audit()) != audit {
			t.Errorf("%s: a refused search changed the runs or the audit", c.query)
		}
	}
}

// TestSearchUI: the runs page's search form: the filters kept in the URL
// and in the form, owner scoping, a bound's note and link, a refused
// search shown with the form, hostile input inert.
func TestSearchUI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true, ui: true})
	a1, a2, a3, b1 := searchFixture(e)

	resp := e.page("/?input="+url.QueryEscape("input.customer.id=1"), aliceToken)
	if resp.status != 200 {
		t.Fatalf("search page: %d", resp.status)
	}
	page := resp.html()
	for _, r := range []*workflow.Run{a1, a3} {
		if !strings.Contains(page, `data-run="`+r.ID+`"`) {
			t.Errorf("alice's search lacks %s", r.ID)
		}
	}
	for _, r := range []*workflow.Run{a2, b1} {
		if strings.Contains(page, r.ID) {
			t.Errorf("alice's search shows %s", r.ID)
		}
	}
	if !strings.Contains(page, `name="input" value="input.customer.id=1"`) {
		t.Error("the form does not keep the input filter")
	}
	if strings.Contains(page, `data-scope="filter"`) {
		t.Error("a search offers the bulk actions on every run of the filters")
	}

	// Bob searching alice's e-mail finds nothing.
	if resp := e.page("/?input="+url.QueryEscape(`input.email="a@x.io"`), bobToken); resp.status != 200 ||
		strings.Contains(resp.html(), a1.ID) || !strings.Contains(resp.html(), "No runs match these filters") {
		t.Errorf("bob's search of alice's input: %d\n%s", resp.status, resp.html())
	}

	// The bound (an admin's scan_limit): the note, and a next link that
	// keeps the search; a user may not set it.
	if resp := e.page("/?input="+url.QueryEscape("input.vip=true")+"&scan_limit=1", aliceToken); resp.status != 403 ||
		!strings.Contains(resp.html(), "only admins set scan_limit") {
		t.Errorf("alice's scan_limit: %d, want 403 with the reason", resp.status)
	}
	resp = e.page("/?input="+url.QueryEscape("input.vip=true")+"&scan_limit=1&since=1h", rootToken)
	page = resp.html()
	m := nextLinkRE.FindStringSubmatch(page)
	if resp.status != 200 || !strings.Contains(page, `class="note scan-limited"`) || m == nil {
		t.Fatalf("limited search: %d, no note or link\n%s", resp.status, page)
	}
	next, err := url.Parse(html.UnescapeString(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	nq := next.Query()
	if nq.Get("input") != "input.vip=true" || nq.Get("scan_limit") != "1" || nq.Get("since") != "1h" || nq.Get("cursor") == "" {
		t.Errorf("next link %q does not keep the search", next)
	}
	found := false
	for range 10 {
		resp = e.page(next.String(), rootToken)
		if strings.Contains(resp.html(), `data-run="`+a1.ID+`"`) {
			found = true
			break
		}
		m := nextLinkRE.FindStringSubmatch(resp.html())
		if m == nil {
			break
		}
		if next, err = url.Parse(html.UnescapeString(m[1])); err != nil {
			t.Fatal(err)
		}
	}
	if !found {
		t.Error("following the next links never found a1")
	}

	// Hostile: a refused search echoes the query escaped, with the form.
	const payload = `"><script>alert(1)</script>`
	resp = e.page("/?input="+url.QueryEscape(payload)+"&id_prefix="+url.QueryEscape(payload), aliceToken)
	page = resp.html()
	if resp.status != 400 || !strings.Contains(page, `class="flash error search-error"`) ||
		!strings.Contains(page, "Search refused") || !strings.Contains(page, `<details class="search-syntax" open>`) {
		t.Errorf("refused search: %d\n%s", resp.status, page)
	}
	if strings.Contains(page, "<script>alert") || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the hostile query reached the page unescaped, or is not shown")
	}
	if strings.Contains(page, "data-live=") {
		t.Error("a refused search's page asks for live updates")
	}
	// A valid search for a hostile value, and a run whose input is
	// hostile: both inert.
	resp = e.page("/?input="+url.QueryEscape(`input.note="<script>alert(1)</script>"`), aliceToken)
	page = resp.html()
	if resp.status != 200 || !strings.Contains(page, `data-run="`+a3.ID+`"`) || strings.Contains(page, "<script>alert") {
		t.Errorf("search of a hostile value: %d\n%s", resp.status, page)
	}
}

var nextLinkRE = regexp.MustCompile(`<a href="([^"]+)" rel="next">`)
