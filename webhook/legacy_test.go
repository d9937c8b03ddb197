package webhook

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The deprecated X-Cairn-Signature scheme, tested inside the package: it
// is still sent, and VerifyRequest still accepts it from older senders.

func TestLegacySignKnownValue(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"1-0","type":"run_failed"}`)
	sig := Sign("s3cret", "1700000000", body)
	// An independent computation (Python's hmac) of HMAC-SHA256(secret, "1700000000." + body).
	if want := "sha256=e0653250816bfa66208a4491d210df2986818cb99287c5646d171c63f05f87c4"; sig != want {
		t.Fatalf("Sign = %s, want %s", sig, want)
	}
	if !Verify("s3cret", "1700000000", body, sig) {
		t.Fatal("a signature does not verify")
	}
	// A whsec_ secret keys the legacy signature with its bytes as given.
	if Sign("whsec_czNjcmV0", "1700000000", body) == sig {
		t.Error("the legacy signature decoded a whsec_ secret")
	}
}

func TestLegacyVerifyRejects(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	body := []byte(`{"id":"1-0","type":"run_failed"}`)
	sig := Sign(secret, "1700000000", body)
	for name, c := range map[string]struct {
		secret, ts string
		body       []byte
		header     string
	}{
		"other body":      {secret, "1700000000", []byte(`{"id":"1-0","type":"run_succeeded"}`), sig},
		"other timestamp": {secret, "1700000001", body, sig},
		"other secret":    {"other", "1700000000", body, sig},
		"no prefix":       {secret, "1700000000", body, sig[len(SignaturePrefix):]},
		"other prefix":    {secret, "1700000000", body, "sha512=" + sig[len(SignaturePrefix):]},
		"upper-case hex":  {secret, "1700000000", body, SignaturePrefix + strings.ToUpper(sig[7:])},
		"truncated":       {secret, "1700000000", body, sig[:len(sig)-1]},
		"empty header":    {secret, "1700000000", body, ""},
		"empty secret":    {"", "1700000000", body, Sign("", "1700000000", body)},
		"empty timestamp": {secret, "", body, Sign(secret, "", body)},
	} {
		if Verify(c.secret, c.ts, c.body, c.header) {
			t.Errorf("%s: verified", name)
		}
	}
}

// legacyRequest is a delivery as a worker older than the Standard Webhooks
// headers sent it: the X-Cairn-* headers only.
func legacyRequest(secret string, at time.Time) *http.Request {
	const body = `{"id":"1712345678901-0","type":"run_failed","run_id":"r1","workflow":"signup"}`
	ts := strconv.FormatInt(at.Unix(), 10)
	r := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body))
	r.Header.Set(HeaderEvent, "run_failed")
	r.Header.Set(HeaderDelivery, "1712345678901-0")
	r.Header.Set(HeaderTimestamp, ts)
	r.Header.Set(HeaderSignature, Sign(secret, ts, []byte(body)))
	return r
}

// TestVerifyRequestLegacyFallback: a request without any Standard Webhooks
// header is verified by the deprecated headers, with the same checks.
func TestVerifyRequestLegacyFallback(t *testing.T) {
	t.Parallel()
	now := time.Unix(1712345679, 0)
	p, err := VerifyRequest(legacyRequest("s3cret", now), "s3cret", 0, now)
	if err != nil || p.RunID != "r1" {
		t.Fatalf("legacy request: %+v, %v", p, err)
	}
	// A rotating receiver: any of its secrets.
	v, err := NewVerifier("new-secret", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.VerifyRequest(legacyRequest("s3cret", now), now); err != nil {
		t.Errorf("legacy request, second secret: %v", err)
	}
	for name, c := range map[string]struct {
		r    *http.Request
		want error
	}{
		"other secret": {legacyRequest("other", now), ErrBadSignature},
		"stale":        {legacyRequest("s3cret", now.Add(-6*time.Minute)), ErrTimestampTooOld},
		"no timestamp": {func() *http.Request {
			r := legacyRequest("s3cret", now)
			r.Header.Del(HeaderTimestamp)
			return r
		}(), ErrMissingHeader},
		"other delivery": {func() *http.Request {
			r := legacyRequest("s3cret", now)
			r.Header.Set(HeaderDelivery, "1-0")
			return r
		}(), ErrBadPayload},
		// Any standard header: the standard headers decide, and all
		// three are needed.
		"a standard header": {func() *http.Request {
			r := legacyRequest("s3cret", now)
			r.Header.Set(HeaderWebhookID, "1712345678901-0")
			return r
		}(), ErrMissingHeader},
	} {
		if _, err := VerifyRequest(c.r, "s3cret", 0, now); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}
