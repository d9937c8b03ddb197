package dashboard

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"unicode"
)

// Role is what a subject may do: RoleUser sees and steers its own runs,
// RoleAdmin every run, plus the admin endpoints and /monitoring.
type Role string

// Roles.
const (
	RoleUser  Role = "user"
	RoleAdmin Role = "admin"
)

// AnonymousSubject is the subject of every request when authentication is
// disabled (no tokens configured); it is an admin.
const AnonymousSubject = "anonymous"

// CookieName is the cookie the web UI keeps the caller's token in
// (HttpOnly). A state-changing request authenticated by it must carry the
// header CSRFHeader with the value Server.CSRFToken(token).
const CookieName = "cairn_token"

// CSRFHeader is the header carrying the CSRF token of a cookie-authenticated
// state-changing request.
const CSRFHeader = "X-CSRF-Token"

// MinTokenLength is the length a token must have at least, in bytes.
const MinTokenLength = 16

// Principal is the authenticated caller of a request.
type Principal struct {
	// Subject names the caller; runs it starts are owned by it.
	Subject string
	Role    Role
	// Via is how the caller authenticated: "bearer", "cookie", or "none"
	// when authentication is disabled.
	Via string
}

// IsAdmin reports whether the caller is an administrator.
func (p Principal) IsAdmin() bool { return p.Role == RoleAdmin }

// CanSee reports whether the caller may see and steer a run of owner:
// admins every run, users their own.
func (p Principal) CanSee(owner string) bool { return p.IsAdmin() || owner == p.Subject }

type principalKey struct{}

// PrincipalFrom returns the caller of a request that passed authentication
// (see Server.RequireAuth).
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

func withPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// Tokens is a set of API tokens, each of a subject with a role. It keeps
// only the SHA-256 of each token.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	hash    [sha256.Size]byte
	subject string
	role    Role
}

// TokensFileError is a malformed tokens file: the file, the line (0 for the
// file as a whole) and what is wrong. It never quotes a token.
type TokensFileError struct {
	File string
	Line int
	Msg  string
}

func (e *TokensFileError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// LoadTokens reads a tokens file (see ParseTokens).
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &TokensFileError{File: path, Msg: err.Error()}
	}
	defer f.Close()
	return ParseTokens(f, path)
}

// ParseTokens parses a tokens file, named name in errors: one entry per
// line, "<token> <subject> <role>" separated by spaces or tabs, with role
// "user" or "admin"; blank lines and lines starting with # are ignored. A
// token has at least MinTokenLength bytes and appears once; a subject has
// one role. A file without entries is an error too: leaving the file out,
// not emptying it, is how authentication is disabled.
func ParseTokens(r io.Reader, name string) (*Tokens, error) {
	t := &Tokens{}
	seen := map[[sha256.Size]byte]int{}
	roles := map[string]struct {
		role Role
		line int
	}{}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		bad := func(format string, args ...any) error {
			return &TokensFileError{File: name, Line: line, Msg: fmt.Sprintf(format, args...)}
		}
		f := strings.Fields(text)
		if len(f) != 3 {
			return nil, bad("want \"<token> <subject> <role>\", got %d fields", len(f))
		}
		token, subject, role := f[0], f[1], Role(f[2])
		if len(token) < MinTokenLength {
			return nil, bad("token shorter than %d bytes", MinTokenLength)
		}
		if role != RoleUser && role != RoleAdmin {
			return nil, bad("role %q: want user or admin", f[2])
		}
		if len(subject) > 128 || strings.IndexFunc(subject, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
			return nil, bad("subject %q: want at most 128 printable characters", subject)
		}
		h := sha256.Sum256([]byte(token))
		if first, dup := seen[h]; dup {
			return nil, bad("the token of line %d again", first)
		}
		seen[h] = line
		if prev, ok := roles[subject]; ok && prev.role != role {
			return nil, bad("subject %q has role %s on line %d and %s here", subject, prev.role, prev.line, role)
		}
		roles[subject] = struct {
			role Role
			line int
		}{role, line}
		t.entries = append(t.entries, tokenEntry{hash: h, subject: subject, role: role})
	}
	if err := sc.Err(); err != nil {
		return nil, &TokensFileError{File: name, Line: line + 1, Msg: err.Error()}
	}
	if len(t.entries) == 0 {
		return nil, &TokensFileError{File: name, Msg: "no token entries (unset CAIRN_API_TOKENS_FILE to disable authentication)"}
	}
	return t, nil
}

// Len returns the number of tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// Lookup returns the principal of a token. It hashes the token and compares
// the hash with every entry's in constant time, without stopping at a
// match, so its timing says nothing about which tokens exist.
func (t *Tokens) Lookup(token string) (Principal, bool) {
	if t == nil || token == "" {
		return Principal{}, false
	}
	h := sha256.Sum256([]byte(token))
	match := -1
	for i := range t.entries {
		eq := subtle.ConstantTimeCompare(h[:], t.entries[i].hash[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return Principal{}, false
	}
	e := t.entries[match]
	return Principal{Subject: e.subject, Role: e.role}, true
}

// Authenticate returns the caller of r: from the Authorization header
// ("Bearer <token>"), else from the cookie CookieName. A state-changing
// request (other than GET, HEAD, OPTIONS) authenticated by the cookie must
// carry a valid CSRF token. With authentication disabled every caller is
// AnonymousSubject, an admin.
func (s *Server) Authenticate(r *http.Request) (Principal, error) {
	return s.authenticate(r, true)
}

func (s *Server) authenticate(r *http.Request, checkCSRF bool) (Principal, error) {
	if s.AuthDisabled() {
		return Principal{Subject: AnonymousSubject, Role: RoleAdmin, Via: "none"}, nil
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return Principal{}, errUnauthenticated
		}
		p, ok := s.tokens.Lookup(strings.TrimSpace(token))
		if !ok {
			return Principal{}, errUnauthenticated
		}
		p.Via = "bearer"
		return p, nil
	}
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return Principal{}, errUnauthenticated
	}
	p, ok := s.tokens.Lookup(c.Value)
	if !ok {
		return Principal{}, errUnauthenticated
	}
	p.Via = "cookie"
	if checkCSRF && !safeMethod(r.Method) && !s.validCSRF(c.Value, r.Header.Get(CSRFHeader)) { //nolint:canonicalheader // CSRFHeader is the documented spelling; Header.Get canonicalizes it
		return Principal{}, errCSRF
	}
	return p, nil
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// CSRFToken returns the CSRF token that goes with a cookie token: an HMAC
// of it under Config.CSRFKey, by default a random secret of this process
// (tokens then change when it restarts; replicas behind one address need a
// shared key: see CSRFKeyFromSecret). The web UI puts it in its pages and
// sends it back in the X-CSRF-Token header.
func (s *Server) CSRFToken(token string) string {
	m := hmac.New(sha256.New, s.csrfKey)
	m.Write([]byte("cairn-csrf\x00"))
	m.Write([]byte(token))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *Server) validCSRF(token, presented string) bool {
	if presented == "" {
		return false
	}
	return hmac.Equal([]byte(s.CSRFToken(token)), []byte(presented))
}

// AuthDisabled reports whether authentication is off (no tokens
// configured): every caller is an admin, and the server listens on loopback
// only. The web UI shows an "authentication disabled" banner then.
func (s *Server) AuthDisabled() bool { return s.tokens.Len() == 0 }
