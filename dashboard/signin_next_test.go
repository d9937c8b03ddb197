package dashboard_test

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/dashboard"
)

var nextFieldRE = regexp.MustCompile(`<input type="hidden" name="next" value="([^"]*)">`)

// TestUISignInNextStaysLocal: the next parameter of GET /signin (signed in
// or not) and of the POST /signin form only ever sends the browser to a
// path of this server. The values are next's value after the query or form
// decoding; anything that a browser could read as another origin (browsers
// drop tab, CR and LF from URLs, and treat \ as /), or that decodes (once
// or twice) to such a thing, goes to /.
func TestUISignInNextStaysLocal(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	hostile := []string{
		"",
		"evil.example",
		"/\t/evil.example/x",   // tab: browsers make it //evil.example/x
		"\t//evil.example",     // leading tab
		"/\r/evil.example",     // CR
		"/\n/evil.example",     // LF
		"/ /evil.example",      // space
		"/x y",                 // space inside
		"/\\evil.example",      // \ after the /: //evil.example to browsers
		"\\\\evil.example",     // \\
		"/runs/a\\b",           // \ anywhere
		"/%2F",                 // decodes to //
		"//",                   // //
		"/\\",                  // /\
		"/%2F/evil.example",    // decodes to ///evil.example
		"/%2f/evil.example",    // lower case
		"/%2F%2Fevil.example",  // //
		"//evil.example/x",     // protocol-relative
		"///evil.example",      // ///
		"/runs//x",             // // anywhere
		"https:",               // scheme only
		"https://evil.example", // absolute
		"http://x",
		"javascript:alert(1)",
		"/%09/127.0.0.1:18090/x",   // the report: a tab, once decoded
		"%2F%2Fevil.example",       // no leading /
		"/%252F%252Fevil.example",  // double-encoded //
		"/%255Cevil.example",       // double-encoded \
		"/%5Cevil.example",         // encoded \
		"/%0D%0ALocation:%20/evil", // encoded CRLF
		"/\u2028/evil.example",     // line separator
		"/\u00a0/evil.example",     // no-break space
		"/%E2%80%A8/evil.example",  // line separator, encoded
		"/%C2%A0/evil.example",     // no-break space, encoded
		"/%e2%80%a9",               // paragraph separator, encoded
		"/\u200b/evil.example",     // zero-width space (a format character)
		"/\x00/x",                  // NUL
		"/\x7f/x",                  // DEL
		"/%zz",                     // bad escape
		"/%25252F%25252F",          // encoded three times
		dashboard.SignInPath,       // no loop
	}
	legit := []string{
		"/",
		"/attention",
		"/runs/abc?status=failed",
		"/?status=failed&workflow=demo",
		"/runs/01J9ZK3W6Q8V7X2M4N5P6R7S8T",
	}
	type tcase struct{ next, want string }
	var cases []tcase
	for _, v := range hostile {
		cases = append(cases, tcase{v, "/"})
	}
	for _, v := range legit {
		cases = append(cases, tcase{v, v})
	}
	form := func(next string) response {
		return e.roundTrip("POST", dashboard.SignInPath, "", url.Values{"token": {aliceToken}, "next": {next}}.Encode())
	}
	for _, c := range cases {
		q := dashboard.SignInPath + "?next=" + url.QueryEscape(c.next)
		// Signed in: the form sends the browser on at once.
		if resp := e.roundTrip("GET", q, aliceToken, ""); resp.status != http.StatusSeeOther || resp.header.Get("Location") != c.want {
			t.Errorf("GET signed in, next %q: %d Location %q, want 303 to %q", c.next, resp.status, resp.header.Get("Location"), c.want)
		}
		// Not signed in: the form carries next on to the POST.
		resp := e.roundTrip("GET", q, "", "")
		m := nextFieldRE.FindStringSubmatch(resp.html())
		if resp.status != http.StatusOK || m == nil || html.UnescapeString(m[1]) != c.want {
			t.Errorf("GET form, next %q: %d, field %q, want %q", c.next, resp.status, m, c.want)
		}
		// The form's POST.
		if resp := form(c.next); resp.status != http.StatusSeeOther || resp.header.Get("Location") != c.want {
			t.Errorf("POST, next %q: %d Location %q, want 303 to %q", c.next, resp.status, resp.header.Get("Location"), c.want)
		}
	}

	// The request of the report, as a browser sends it.
	if resp := e.roundTrip("GET", dashboard.SignInPath+"?next=/%09/127.0.0.1:18090/x", aliceToken, ""); resp.status != http.StatusSeeOther ||
		resp.header.Get("Location") != "/" {
		t.Errorf("GET /signin?next=/%%09/127.0.0.1:18090/x: %d Location %q, want 303 to /", resp.status, resp.header.Get("Location"))
	}
}

// roundTrip sends one request, with the cookie of token ("" for none) and a
// form body (POST), and returns the answer as it is: unlike http.Client,
// the transport neither follows nor parses a Location header.
func (e *env) roundTrip(method, path, token, form string) response {
	e.t.Helper()
	hr, err := http.NewRequest(method, e.http.URL+path, strings.NewReader(form))
	if err != nil {
		e.t.Fatal(err)
	}
	if form != "" {
		hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if token != "" {
		hr.AddCookie(&http.Cookie{Name: dashboard.CookieName, Value: token})
	}
	resp, err := e.http.Client().Transport.RoundTrip(hr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}
