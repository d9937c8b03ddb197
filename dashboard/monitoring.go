package dashboard

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"regexp"
	"strings"

	"github.com/hibiken/asynqmon"
)

// MonitoringPath is where asynqmon is mounted.
const MonitoringPath = "/monitoring"

// mountMonitoring mounts asynqmon at /monitoring for admins, read-only
// unless Config.MonitoringWrite. asynqmon's own pages cannot send an
// Authorization header, so they authenticate with the cookie, and since
// they cannot send X-CSRF-Token either, its state changes (write mode) are
// guarded by the cross-origin check every request passes (a browser's
// request from another site is refused) instead of the CSRF token. Its
// responses carry monitoringCSP's policy.
func (s *Server) mountMonitoring() {
	if s.cfg.Monitoring == nil {
		return
	}
	mon := asynqmon.New(asynqmon.Options{
		RootPath:     MonitoringPath,
		RedisConnOpt: s.cfg.Monitoring,
		ReadOnly:     !s.cfg.MonitoringWrite,
	})
	s.monitoring = mon
	csp := monitoringCSP(mon)
	withCSP := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", csp)
		mon.ServeHTTP(w, r)
	})
	h := s.requireAuth(true, true, withCSP)
	s.handle(MonitoringPath+"/", h)
	s.handle("GET "+MonitoringPath, http.RedirectHandler(MonitoringPath+"/", http.StatusFound))
}

// inlineScriptRE matches the inline scripts of asynqmon's index page
// (<script> without attributes): its settings and webpack's runtime.
var inlineScriptRE = regexp.MustCompile(`(?s)<script>(.*?)</script>`)

// monitoringCSP returns the Content-Security-Policy of asynqmon's
// responses. Its page (a React build, asynqmon v0.7.2) runs two inline
// scripts, allowed by their SHA-256 (computed from the page h serves, whose
// settings script depends on the options), and its bundle from 'self';
// Material-UI inserts style elements at run time ('unsafe-inline' styles:
// no script); the page loads its fonts, Roboto and Material Icons, from
// Google Fonts, which the policy names; it calls its API on 'self'.
func monitoringCSP(h http.Handler) string {
	rec := &bodyRecorder{header: http.Header{}}
	req, _ := http.NewRequest(http.MethodGet, MonitoringPath+"/", nil) //nolint:noctx // served in process, at once
	h.ServeHTTP(rec, req)
	var hashes []string
	for _, m := range inlineScriptRE.FindAllSubmatch(rec.body.Bytes(), -1) {
		sum := sha256.Sum256(m[1])
		hashes = append(hashes, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	return strings.Join([]string{
		"default-src 'none'",
		"script-src 'self' " + strings.Join(hashes, " "),
		"style-src 'self' 'unsafe-inline' https://fonts.googleapis.com",
		"font-src https://fonts.gstatic.com",
		"img-src 'self' data:",
		"connect-src 'self'",
		"manifest-src 'self'",
		"frame-ancestors 'none'",
		"base-uri 'none'",
		"form-action 'self'",
	}, "; ")
}

// bodyRecorder is a ResponseWriter that keeps what is written.
type bodyRecorder struct {
	header http.Header
	body   bytes.Buffer
}

func (r *bodyRecorder) Header() http.Header         { return r.header }
func (r *bodyRecorder) WriteHeader(int)             {}
func (r *bodyRecorder) Write(b []byte) (int, error) { return r.body.Write(b) }
