package dashboard_test

import (
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
)

var (
	inlineScriptRE = regexp.MustCompile(`(?s)<script>(.*?)</script>`)
	scriptSrcRE    = regexp.MustCompile(`<script src="([^"]+)"`)
	stylesheetRE   = regexp.MustCompile(`<link rel="stylesheet" href="(/static/[^"]+)"`)
)

// TestSecurityHeaders: every kind of response carries
// X-Content-Type-Options: nosniff and X-Frame-Options: DENY, and a
// Content-Security-Policy where a browser could render it: the API's JSON
// and problems (nothing to load), the web UI's pages (their own),
// asynqmon's pages and assets (its own, with the hashes of the page's
// inline scripts).
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	const apiCSP = "default-src 'none'; frame-ancestors 'none'"

	index := e.page("/monitoring/", rootToken)
	if index.status != 200 || !strings.Contains(index.html(), `<div id="root">`) {
		t.Fatalf("asynqmon's page: %d %s", index.status, index.body)
	}
	monCSP := index.header.Get("Content-Security-Policy")
	var hashes []string
	for _, m := range inlineScriptRE.FindAllStringSubmatch(index.html(), -1) {
		sum := sha256.Sum256([]byte(m[1]))
		hashes = append(hashes, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	if len(hashes) != 2 {
		t.Fatalf("asynqmon's page has %d inline scripts, want 2 (its settings, webpack's runtime)", len(hashes))
	}
	wantScripts := "script-src 'self' " + strings.Join(hashes, " ") + ";"
	if !strings.Contains(monCSP, "default-src 'none';") || !strings.Contains(monCSP, wantScripts) ||
		!strings.Contains(monCSP, "frame-ancestors 'none'") || strings.Contains(monCSP, "unsafe-eval") {
		t.Errorf("asynqmon's CSP %q, want default-src 'none', %q and frame-ancestors 'none'", monCSP, wantScripts)
	}
	bundle := scriptSrcRE.FindStringSubmatch(index.html())
	if bundle == nil {
		t.Fatalf("no bundle script in asynqmon's page")
	}
	ui := e.page("/", rootToken)
	css := stylesheetRE.FindStringSubmatch(ui.html())
	if css == nil {
		t.Fatalf("no stylesheet in the runs page")
	}

	for _, c := range []struct {
		name, path, token, cookie string
		status                    int
		csp                       string // "": any, but one must be there; "-": none wanted
	}{
		{name: "API JSON", path: "/api/v1/me", token: aliceToken, status: 200, csp: apiCSP},
		{name: "API list", path: "/api/v1/workflows", token: aliceToken, status: 200, csp: apiCSP},
		{name: "problem 401", path: "/api/v1/workflows", status: 401, csp: apiCSP},
		{name: "problem 404", path: "/api/v1/nope", token: aliceToken, status: 404, csp: apiCSP},
		{name: "healthz", path: "/healthz", status: 200, csp: apiCSP},
		{name: "metrics", path: "/metrics", token: aliceToken, status: 200, csp: "-"},
		{name: "UI page", path: "/", cookie: aliceToken, status: 200},
		{name: "UI sign-in page", path: "/signin", status: 200},
		{name: "UI error page", path: "/attention", cookie: aliceToken, status: 403},
		{name: "UI asset", path: css[1], status: 200, csp: "-"},
		{name: "UI redirect", path: "/runs/x", status: 303, csp: "-"},
		{name: "asynqmon page", path: "/monitoring/", cookie: rootToken, status: 200, csp: monCSP},
		{name: "asynqmon bundle", path: bundle[1], cookie: rootToken, status: 200, csp: monCSP},
		{name: "asynqmon icon", path: "/monitoring/favicon.ico", cookie: rootToken, status: 200, csp: monCSP},
		{name: "asynqmon API", path: "/monitoring/api/queues", cookie: rootToken, status: 200, csp: monCSP},
		{name: "asynqmon, refused", path: "/monitoring/", cookie: aliceToken, status: 403, csp: apiCSP},
		{name: "asynqmon redirect", path: "/monitoring", cookie: rootToken, status: 302, csp: "-"},
	} {
		resp := e.do(req{method: "GET", path: c.path, token: c.token, cookie: c.cookie})
		if resp.status != c.status {
			t.Errorf("%s: status %d, want %d", c.name, resp.status, c.status)
			continue
		}
		h := resp.header
		if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q, want nosniff", c.name, got)
		}
		if got := h.Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("%s: X-Frame-Options %q, want DENY", c.name, got)
		}
		switch got := h.Get("Content-Security-Policy"); c.csp {
		case "-":
		case "":
			if !strings.Contains(got, "default-src 'none'") || !strings.Contains(got, "frame-ancestors 'none'") {
				t.Errorf("%s: Content-Security-Policy %q, want the page's", c.name, got)
			}
		default:
			if got != c.csp {
				t.Errorf("%s: Content-Security-Policy %q, want %q", c.name, got, c.csp)
			}
		}
	}
}
