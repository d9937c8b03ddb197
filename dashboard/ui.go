package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The web UI's templates and assets are compiled into the binary: the
// dashboard needs no CDN and works offline.
//
//go:embed templates/*.html static/*
var uiFiles embed.FS

// Paths of the web UI's pages.
const (
	SignInPath    = "/signin"
	SignOutPath   = "/signout"
	AttentionPath = "/attention"
	BreakersPath  = "/breakers"
	staticPrefix  = "/static/"
)

// fragmentParam is the query parameter asking a page for its live part
// alone (the HTML the page's script swaps in when an event arrives).
const fragmentParam = "fragment"

// WebUI adds the web dashboard's pages to the server's mux; set it as
// Config.UI. The pages are rendered on the server with html/template, from
// the same data and under the same authorization rules as the JSON API:
//
//	GET  /                the caller's runs (an admin's: every run), with filters
//	GET  /runs/{id}       a run: steps, attempts, errors, countdown, journal, actions
//	GET  /activity        charts: runs over time by status, retries and failures per step
//	GET  /ordering        ordering keys and workflow limits in use (admins), one key's line
//	GET  /latency         step run times and waits for a worker: percentiles per workflow and step
//	GET  /attention       admins: the runs that need an operator
//	GET  /workers         admins: the live workers, their queues, concurrency and load
//	GET  /signin          the sign-in form; POST /signin checks the token
//	POST /signout         forgets the token
//	GET  /static/...      the embedded CSS, script and icon
//	POST /runs/{id}/...   the run page's forms that work without JavaScript (ui_retrynow.go)
//
// A page request without credentials is redirected to /signin. Signing in
// stores the token in the HttpOnly, SameSite=Strict cookie CookieName
// (Secure over TLS). The pages carry Server.CSRFToken of that cookie in a
// meta tag; their script sends it as X-CSRF-Token with the actions (POST
// /api/v1/workflows/{id}/recover, ...), and follows GET /api/v1/events to
// refresh the page's live part when one of the runs shown changes.
func WebUI(s *Server, mux *http.ServeMux) {
	u, err := newWebUI(s)
	if err != nil {
		// The templates are compiled in: a parse error is a bug that every
		// test of the package catches.
		panic("dashboard: " + err.Error())
	}
	mux.Handle("GET /{$}", u.page(false, u.runsPage))
	mux.Handle("GET /runs/{id}", u.page(false, u.runPage))
	mux.Handle("GET "+AttentionPath, u.page(true, u.attentionPage))
	mux.Handle("GET "+BreakersPath, u.page(false, u.breakersPage))
	mux.Handle("GET "+ActivityPath, u.page(false, u.activityPage))
	mux.Handle("GET "+OrderingPath, u.page(false, u.orderingPage))
	mux.Handle("GET "+WorkersPath, u.page(true, u.workersPage))
	mux.Handle("GET "+LatencyPath, u.page(false, u.latencyPage))
	mux.HandleFunc("GET "+SignInPath, u.signInForm)
	mux.HandleFunc("POST "+SignInPath, u.signIn)
	mux.HandleFunc("POST "+SignOutPath, u.signOut)
	mux.HandleFunc("GET "+staticPrefix+"{name}", u.static)
	u.retryNowRoutes(mux)
}

// webUI holds the parsed templates and the assets.
type webUI struct {
	s      *Server
	pages  map[string]*template.Template
	assets map[string]asset
}

// asset is an embedded file, with its content type and a content hash (its
// ETag, and the version in its URL).
type asset struct {
	body  []byte
	ctype string
	hash  string
}

func newWebUI(s *Server) (*webUI, error) {
	u := &webUI{s: s, pages: map[string]*template.Template{}, assets: map[string]asset{}}
	entries, err := fs.ReadDir(uiFiles, "static")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		body, err := fs.ReadFile(uiFiles, "static/"+e.Name())
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(body)
		ctype := mime.TypeByExtension(path.Ext(e.Name()))
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		u.assets[e.Name()] = asset{body: body, ctype: ctype, hash: hex.EncodeToString(sum[:6])}
	}
	base, err := template.New("layout.html").Funcs(u.funcs()).ParseFS(uiFiles, "templates/layout.html", "templates/charts.html")
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"runs", "run", "attention", "breakers", "activity", "ordering", "workers", "latency", "signin", "error"} {
		t, err := template.Must(base.Clone()).ParseFS(uiFiles, "templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		u.pages[name] = t
	}
	return u, nil
}

// view is what every page template gets: the caller, the state of
// authentication, and the page's own data.
type view struct {
	Title string
	// Page names the page (runs, run, attention, breakers, activity,
	// ordering, latency, workers, signin, error).
	Page      string
	Principal Principal
	SignedIn  bool
	// AuthDisabled shows the "authentication disabled" banner.
	AuthDisabled bool
	// CSRF is the CSRF token of the caller's cookie, for the script.
	CSRF string
	// Monitoring links to asynqmon (admins, when it is mounted).
	Monitoring bool
	// Live is the URL of the page's live part; EventsAfter the ID of the
	// last notification before the page's data was read, where the event
	// stream starts; RunID limits the refreshes to that run's events.
	Live        string
	EventsAfter string
	RunID       string
	// Poll asks the page's script to fetch the live part every few
	// seconds (what it shows changes without a run's event).
	Poll bool
	Now  time.Time
	Data any
}

// newView returns the view of a page for the caller of r.
func (u *webUI) newView(r *http.Request, p Principal, page, title string) *view {
	v := &view{Title: title, Page: page, Principal: p, SignedIn: p.Subject != "", AuthDisabled: u.s.AuthDisabled(),
		Now: u.s.clock.Now(), Monitoring: p.IsAdmin() && u.s.monitoring != nil}
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		v.CSRF = u.s.CSRFToken(c.Value)
	}
	return v
}

// page wraps a page handler: a caller without valid credentials is sent to
// the sign-in page (a fragment request gets 401: its script reloads the
// page), one without the admin role of an admin page gets a 403 page.
func (u *webUI) page(admin bool, h func(http.ResponseWriter, *http.Request, Principal)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := u.s.Authenticate(r)
		if err != nil {
			if isFragment(r) {
				http.Error(w, "sign in again", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, SignInPath+"?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		reqState(r).subject = p.Subject
		if admin && !p.IsAdmin() {
			u.renderError(w, r, p, http.StatusForbidden, "This page is for administrators.")
			return
		}
		h(w, r.WithContext(withPrincipal(r.Context(), p)), p)
	})
}

func isFragment(r *http.Request) bool { return r.URL.Query().Get(fragmentParam) == "1" }

// render writes a page, or its live part alone for a fragment request. It
// renders into a buffer first, so that a template error is a clean 500.
func (u *webUI) render(w http.ResponseWriter, r *http.Request, status int, v *view) {
	t := u.pages[v.Page]
	name := "layout"
	if isFragment(r) && t.Lookup("live") != nil {
		name = "live"
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, v); err != nil {
		reqLog(r).Error("rendering a page failed", "page", v.Page, "error", err)
		http.Error(w, "internal error; the server log has the details under correlation_id "+reqState(r).id,
			http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorData is the data of the error page.
type errorData struct {
	Status  int
	Heading string
	Message string
}

// renderError writes the error page (for a fragment request, the message
// alone, with the status).
func (u *webUI) renderError(w http.ResponseWriter, r *http.Request, p Principal, status int, msg string) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(UnavailableRetryAfter))
	}
	if isFragment(r) {
		http.Error(w, msg, status)
		return
	}
	v := u.newView(r, p, "error", http.StatusText(status))
	v.Data = errorData{Status: status, Heading: http.StatusText(status), Message: msg}
	u.render(w, r, status, v)
}

// fail writes the error page of an error of the workflow client, as the
// API would answer it: a run the caller may not see is "not found".
func (u *webUI) fail(w http.ResponseWriter, r *http.Request, p Principal, err error) {
	if ae := errorProblem(r.Context(), err); ae != nil {
		status, msg := ae.status, ae.detail
		if ae.kind == ProblemUnavailable {
			reqLog(r).Warn("page refused: Redis is unavailable", "error", err)
			msg = "Redis is unavailable. Try again in a few seconds."
		}
		if status == http.StatusNotFound || ae.kind == ProblemInvalidRunID {
			status, msg = http.StatusNotFound, "No such run. It may have expired, or belong to someone else."
		}
		u.renderError(w, r, p, status, msg)
		return
	}
	if errors.Is(err, r.Context().Err()) && r.Context().Err() != nil {
		reqState(r).status = 499
		return
	}
	reqLog(r).Error("page failed", "error", err)
	u.renderError(w, r, p, http.StatusInternalServerError,
		"Internal error; the server log has the details under correlation_id "+reqState(r).id+".")
}

// signInData is the data of the sign-in page.
type signInData struct {
	Next  string
	Error string
}

// safeNext returns where to go after signing in: a path on this server,
// "/" for anything else (no open redirect). next must be printable ASCII
// (a browser percent-encodes everything else) starting with one "/", and
// neither it nor its percent-decoded forms (decoded until nothing changes,
// at most maxNextDecodes times) may hold "//", "\", a control character
// or any (Unicode) white space: browsers drop tab, CR and LF from a URL and
// read "\" as "/", so "/\t/evil.example" would lead them to
// //evil.example. A path under /signin is refused too (no loop). The value
// returned is rebuilt from url.Parse's path and query of next, so that the
// Location header says exactly what was checked.
func safeNext(next string) string {
	if !printableASCII(next) || !localPath(next) || strings.HasPrefix(next, SignInPath) {
		return "/"
	}
	for s, i := next, 0; ; i++ {
		d, err := url.PathUnescape(s)
		if err != nil || !localPath(d) {
			return "/"
		}
		if d == s {
			break
		}
		if i == maxNextDecodes {
			return "/" // still encoded after that many decodes
		}
		s = d
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	loc := (&url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery}).String()
	if !printableASCII(loc) || !localPath(loc) {
		return "/"
	}
	return loc
}

// maxNextDecodes bounds how many layers of percent-encoding safeNext
// peels off next: a value that changes after that many decodes is refused.
const maxNextDecodes = 3

// printableASCII tells whether s holds only printable ASCII characters,
// space excluded.
func printableASCII(s string) bool {
	for i := range len(s) {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// localPath tells whether s, or a decoded form of it, is acceptable as a
// local path: it starts with one "/" and holds no "//", no "\", no
// control, format or white-space character, and is valid UTF-8 (an ASCII
// s is).
func localPath(s string) bool {
	if s == "" || s[0] != '/' || strings.Contains(s, "//") || strings.ContainsRune(s, '\\') || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x21 || r == 0x7f || unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

// seeOther answers 303 See Other to loc, a value of safeNext, which goes
// into the Location header as it is (http.Redirect would clean it again).
func seeOther(w http.ResponseWriter, loc string) {
	h := w.Header()
	h.Set("Location", loc)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusSeeOther)
}

func (u *webUI) signInForm(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	if u.s.AuthDisabled() {
		seeOther(w, next)
		return
	}
	if p, err := u.s.Authenticate(r); err == nil && p.Via == "cookie" {
		seeOther(w, next)
		return
	}
	v := u.newView(r, Principal{}, "signin", "Sign in")
	v.CSRF = ""
	v.Data = signInData{Next: next}
	u.render(w, r, http.StatusOK, v)
}

// signIn checks the token of the sign-in form: a valid one goes into the
// cookie, and the browser on to the page it came for; an invalid one gets
// the form again, with 401.
func (u *webUI) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "malformed form", http.StatusBadRequest)
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	if u.s.AuthDisabled() {
		seeOther(w, next)
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	p, ok := u.s.tokens.Lookup(token)
	if !ok {
		reqLog(r).Warn("sign-in refused: unknown token")
		v := u.newView(r, Principal{}, "signin", "Sign in")
		v.CSRF = ""
		v.Data = signInData{Next: next, Error: "That token is not valid."}
		u.render(w, r, http.StatusUnauthorized, v)
		return
	}
	reqState(r).subject = p.Subject
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: "/", HttpOnly: true, //nolint:gosec // Secure when served over TLS, which plain HTTP on loopback is not
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	reqLog(r).Info("signed in", "subject", p.Subject, "role", p.Role)
	seeOther(w, next)
}

// signOut clears the cookie. The form carries the CSRF token, so that
// another site cannot sign the browser out.
func (u *webUI) signOut(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "malformed form", http.StatusBadRequest)
		return
	}
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		if !u.s.validCSRF(c.Value, r.PostForm.Get("csrf")) {
			http.Error(w, "missing or invalid CSRF token: reload the page and sign out again", http.StatusForbidden)
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, //nolint:gosec // as in signIn
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, SignInPath, http.StatusSeeOther)
}

// static serves an embedded asset, with its content type and its hash as
// ETag; pages link to it with the hash in the URL (see assetURL).
func (u *webUI) static(w http.ResponseWriter, r *http.Request) {
	a, ok := u.assets[r.PathValue("name")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", `"`+a.hash+`"`)
	if r.URL.Query().Get("v") == a.hash {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

// assetURL is the URL of an asset, versioned by its content.
func (u *webUI) assetURL(name string) string {
	return staticPrefix + name + "?v=" + u.assets[name].hash
}
