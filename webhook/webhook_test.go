package webhook_test

import (
	"bytes"
	"errors"
	"go/build"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/webhook"
)

const secret = "s3cret"

func TestSignKnownValue(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"1-0","type":"run_failed"}`)
	sig := webhook.Sign(secret, "1700000000", body)
	// An independent computation (Python's hmac) of HMAC-SHA256(secret, "1700000000." + body).
	if want := "sha256=e0653250816bfa66208a4491d210df2986818cb99287c5646d171c63f05f87c4"; sig != want {
		t.Fatalf("Sign = %s, want %s", sig, want)
	}
	if !webhook.Verify(secret, "1700000000", body, sig) {
		t.Fatal("a signature does not verify")
	}
}

func TestVerifyRejects(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"1-0","type":"run_failed"}`)
	sig := webhook.Sign(secret, "1700000000", body)
	for name, c := range map[string]struct {
		secret, ts string
		body       []byte
		header     string
	}{
		"other body":      {secret, "1700000000", []byte(`{"id":"1-0","type":"run_succeeded"}`), sig},
		"other timestamp": {secret, "1700000001", body, sig},
		"other secret":    {"other", "1700000000", body, sig},
		"no prefix":       {secret, "1700000000", body, sig[len(webhook.SignaturePrefix):]},
		"other prefix":    {secret, "1700000000", body, "sha512=" + sig[len(webhook.SignaturePrefix):]},
		"upper-case hex":  {secret, "1700000000", body, webhook.SignaturePrefix + strings.ToUpper(sig[7:])},
		"truncated":       {secret, "1700000000", body, sig[:len(sig)-1]},
		"empty header":    {secret, "1700000000", body, ""},
		"empty secret":    {"", "1700000000", body, webhook.Sign("", "1700000000", body)},
		"empty timestamp": {secret, "", body, webhook.Sign(secret, "", body)},
	} {
		if webhook.Verify(c.secret, c.ts, c.body, c.header) {
			t.Errorf("%s: verified", name)
		}
	}
}

// signedRequest is a delivery of body signed with secret at ts.
func signedRequest(body string, ts time.Time) *http.Request {
	sec := strconv.FormatInt(ts.Unix(), 10)
	r := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(webhook.HeaderEvent, "run_failed")
	r.Header.Set(webhook.HeaderDelivery, "1712345678901-0")
	r.Header.Set(webhook.HeaderTimestamp, sec)
	r.Header.Set(webhook.HeaderSignature, webhook.Sign(secret, sec, []byte(body)))
	return r
}

const goodBody = `{"id":"1712345678901-0","type":"run_failed","at":"2024-04-05T19:34:38.901Z",` +
	`"run_id":"01hv0000000000000000000000","workflow":"signup","details":{"code":"permanent_error","owner":""}}`

func TestVerifyRequestAccepts(t *testing.T) {
	t.Parallel()
	now := time.Unix(1712345679, 0)
	for name, r := range map[string]*http.Request{
		"now":                   signedRequest(goodBody, now),
		"5 minutes ago":         signedRequest(goodBody, now.Add(-5*time.Minute)),
		"5 minutes ahead":       signedRequest(goodBody, now.Add(5*time.Minute)),
		"no delivery and event": withHeader(withHeader(signedRequest(goodBody, now), webhook.HeaderDelivery, ""), webhook.HeaderEvent, ""),
	} {
		p, err := webhook.VerifyRequest(r, secret, 0, now)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		want := webhook.Payload{ID: "1712345678901-0", Type: webhook.EventRunFailed,
			At: time.Date(2024, 4, 5, 19, 34, 38, 901e6, time.UTC), RunID: "01hv0000000000000000000000", Workflow: "signup"}
		if p.ID != want.ID || p.Type != want.Type || !p.At.Equal(want.At) || p.RunID != want.RunID ||
			p.Workflow != want.Workflow || p.Owner != "" || len(p.Details) != 2 || p.Details["code"] != "permanent_error" {
			t.Errorf("%s: payload %+v, want %+v with details code permanent_error and owner \"\"", name, p, want)
		}
	}
}

func withHeader(r *http.Request, name, value string) *http.Request {
	if value == "" {
		r.Header.Del(name)
	} else {
		r.Header.Set(name, value)
	}
	return r
}

func TestVerifyRequestRejects(t *testing.T) {
	t.Parallel()
	now := time.Unix(1712345679, 0)
	resigned := func(body string) *http.Request { return signedRequest(body, now) }
	huge := `{"id":"1-0","type":"run_failed","workflow":"` + strings.Repeat("x", webhook.MaxBodyBytes) + `"}`
	for name, c := range map[string]struct {
		r       *http.Request
		maxSkew time.Duration
		want    error
	}{
		"too large":           {resigned(huge), 0, webhook.ErrBodyTooLarge},
		"no timestamp":        {withHeader(resigned(goodBody), webhook.HeaderTimestamp, ""), 0, webhook.ErrBadTimestamp},
		"timestamp in ms":     {withHeader(resigned(goodBody), webhook.HeaderTimestamp, "1712345679000.5"), 0, webhook.ErrBadTimestamp},
		"no signature":        {withHeader(resigned(goodBody), webhook.HeaderSignature, ""), 0, webhook.ErrBadSignature},
		"other secret":        {withHeader(resigned(goodBody), webhook.HeaderSignature, webhook.Sign("other", "1712345679", []byte(goodBody))), 0, webhook.ErrBadSignature},
		"changed timestamp":   {withHeader(resigned(goodBody), webhook.HeaderTimestamp, "1712345678"), 0, webhook.ErrBadSignature},
		"stale":               {signedRequest(goodBody, now.Add(-5*time.Minute-time.Second)), 0, webhook.ErrStaleTimestamp},
		"from the future":     {signedRequest(goodBody, now.Add(5*time.Minute+time.Second)), 0, webhook.ErrStaleTimestamp},
		"stale, narrow skew":  {signedRequest(goodBody, now.Add(-11*time.Second)), 10 * time.Second, webhook.ErrStaleTimestamp},
		"not JSON":            {resigned(`run_failed`), 0, webhook.ErrBadPayload},
		"trailing data":       {resigned(goodBody + `{}`), 0, webhook.ErrBadPayload},
		"no id":               {resigned(`{"type":"run_failed"}`), 0, webhook.ErrBadPayload},
		"other delivery":      {withHeader(resigned(goodBody), webhook.HeaderDelivery, "1712345678901-1"), 0, webhook.ErrBadPayload},
		"other event":         {withHeader(resigned(goodBody), webhook.HeaderEvent, "run_succeeded"), 0, webhook.ErrBadPayload},
		"stale and bad sig":   {withHeader(signedRequest(goodBody, now.Add(-time.Hour)), webhook.HeaderSignature, "sha256=00"), 0, webhook.ErrBadSignature},
		"stale and malformed": {signedRequest(`nope`, now.Add(-time.Hour)), 0, webhook.ErrStaleTimestamp},
	} {
		p, err := webhook.VerifyRequest(c.r, secret, c.maxSkew, now)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", name, err, c.want)
		}
		if p.ID != "" {
			t.Errorf("%s: returned a payload %+v with the error", name, p)
		}
	}
	// The secret is the receiver's: an empty one verifies nothing.
	if _, err := webhook.VerifyRequest(signedRequest(goodBody, now), "", 0, now); !errors.Is(err, webhook.ErrBadSignature) {
		t.Errorf("empty secret: error %v, want ErrBadSignature", err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestVerifyRequestBodyError(t *testing.T) {
	t.Parallel()
	r := signedRequest(goodBody, time.Unix(1712345679, 0))
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader([]byte(goodBody[:10])), failingReader{}))
	_, err := webhook.VerifyRequest(r, secret, 0, time.Unix(1712345679, 0))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("error %v, want the read error", err)
	}
}

// TestStandardLibraryOnly: a receiver that imports this package imports
// nothing but the standard library.
func TestStandardLibraryOnly(t *testing.T) {
	t.Parallel()
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkg.Imports) == 0 {
		t.Fatal("no imports found: the check would prove nothing")
	}
	for _, path := range pkg.Imports {
		first, _, _ := strings.Cut(path, "/")
		if strings.Contains(first, ".") {
			t.Errorf("package webhook imports %s, outside the standard library", path)
			continue
		}
		// The standard library imports nothing else, so the direct
		// imports are all there is to check.
		if dep, err := build.Import(path, pkg.Dir, build.FindOnly); err != nil || !dep.Goroot {
			t.Errorf("package webhook imports %s, not found in GOROOT (%v)", path, err)
		}
	}
}
