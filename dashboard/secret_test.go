package dashboard_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/testkit"
)

// replica returns another server of e's deployment (the same client,
// Redis, tokens and web UI) with the given CSRF key (nil: a random one), as
// a second process behind the same address would be.
func (e *env) replica(key []byte) *env {
	e.t.Helper()
	toks, err := dashboard.ParseTokens(strings.NewReader(tokensFile), "tokens")
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := dashboard.New(dashboard.Config{Client: e.client, Redis: e.rdb, Tokens: toks, CSRFKey: key,
		UI: dashboard.WebUI, Logger: testkit.Logger(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	r := *e
	r.srv = s
	r.http = httptest.NewServer(s.Handler())
	e.t.Cleanup(func() {
		r.http.CloseClientConnections()
		r.http.Close()
		if err := s.Close(); err != nil {
			e.t.Errorf("close: %v", err)
		}
	})
	return &r
}

// TestSharedSecretSharesCSRFTokens: replicas given the same secret accept
// each other's CSRF tokens (a page served by one acts through the other);
// a replica with another secret, or with the default random key, refuses
// them.
func TestSharedSecretSharesCSRFTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true})
	const secret = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
	a1 := e.replica(dashboard.CSRFKeyFromSecret(secret))
	a2 := e.replica(dashboard.CSRFKeyFromSecret(secret))
	other := e.replica(dashboard.CSRFKeyFromSecret("fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9"))
	random := e.replica(nil)

	// The token a page of a1 embeds, for alice's cookie.
	page := a1.page("/", aliceToken)
	if page.status != http.StatusOK {
		t.Fatalf("GET / on a1: %d %s", page.status, page.body)
	}
	csrf := csrfOf(t, page)
	if csrf != a2.srv.CSRFToken(aliceToken) {
		t.Fatal("two servers with the same secret compute different CSRF tokens")
	}
	start := func(r *env) response {
		return r.do(req{method: "POST", path: "/api/v1/workflows", cookie: aliceToken,
			body:   `{"workflow":"demo","input":{}}`,
			header: map[string]string{dashboard.CSRFHeader: csrf, "Content-Type": "application/json"}})
	}
	for name, r := range map[string]*env{"a1": a1, "a2, the same secret": a2} {
		if resp := start(r); resp.status != http.StatusCreated {
			t.Errorf("%s: start with a1's CSRF token: %d %s, want 201", name, resp.status, resp.body)
		}
	}
	before := e.countRuns()
	for name, r := range map[string]*env{"another secret": other, "no secret (a random key)": random} {
		resp := start(r)
		if resp.status != http.StatusForbidden || resp.problem(t).Type != dashboard.ProblemType(dashboard.ProblemCSRF) {
			t.Errorf("%s: start with a1's CSRF token: %d %s, want 403 %s", name, resp.status, resp.body, dashboard.ProblemCSRF)
		}
	}
	if after := e.countRuns(); after != before {
		t.Errorf("refused starts created runs: %d before, %d after", before, after)
	}
	// Two servers without a key do not share one either.
	if random.srv.CSRFToken(aliceToken) == e.srv.CSRFToken(aliceToken) {
		t.Error("two servers without a CSRFKey share their CSRF tokens")
	}
}

func TestCSRFKeyFromSecret(t *testing.T) {
	t.Parallel()
	const secret = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
	k := dashboard.CSRFKeyFromSecret(secret)
	if len(k) != 32 {
		t.Fatalf("key of %d bytes, want 32", len(k))
	}
	if !bytes.Equal(k, dashboard.CSRFKeyFromSecret(secret)) {
		t.Error("the same secret derives different keys")
	}
	if bytes.Equal(k, dashboard.CSRFKeyFromSecret(secret[:63])) || bytes.Equal(k, dashboard.CSRFKeyFromSecret(secret+"0")) {
		t.Error("different secrets derive the same key")
	}
	if bytes.Equal(k, []byte(secret)[:len(k)]) {
		t.Error("the key is the secret itself")
	}
}
