package webhook_test

import (
	"bytes"
	"encoding/base64"
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

// The test vector of the Standard Webhooks reference implementations: the
// Go library's TestWebhookSign (libraries/go/webhook_test.go in
// github.com/standard-webhooks/standard-webhooks; the other languages'
// tests use the same key, message and signature).
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignStandardVector(t *testing.T) {
	t.Parallel()
	s, err := webhook.NewSigner(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := s.Sign(vectorID, time.Unix(vectorTimestamp, 0), []byte(vectorBody))
	if err != nil || sig != vectorSignature {
		t.Fatalf("Sign = %q, %v; want %q", sig, err, vectorSignature)
	}
	h := http.Header{}
	h.Set("Webhook-Id", vectorID)
	h.Set("Webhook-Timestamp", strconv.Itoa(vectorTimestamp))
	h.Set("Webhook-Signature", vectorSignature)
	if err := webhook.VerifyHeaders(vectorSecret, h, []byte(vectorBody), time.Unix(vectorTimestamp+10, 0)); err != nil {
		t.Errorf("the reference signature does not verify: %v", err)
	}
	// The same key without the prefix is a raw secret: other bytes.
	if err := webhook.VerifyHeaders(vectorSecret[len(webhook.SecretPrefix):], h, []byte(vectorBody),
		time.Unix(vectorTimestamp, 0)); !errors.Is(err, webhook.ErrBadSignature) {
		t.Errorf("the base64 text as a raw secret: %v, want ErrBadSignature", err)
	}
}

func TestDecodeSecret(t *testing.T) {
	t.Parallel()
	for secret, want := range map[string]string{
		"s3cret":                  "s3cret",
		"whsec_czNjcmV0":          "s3cret",
		"whsec_YWI=":              "ab",
		"whsec_YWI":               "ab", // unpadded
		"whsec":                   "whsec",
		"WHSEC_YWI=":              "WHSEC_YWI=", // the prefix is lower-case: a raw secret
		" whsec_YWI=":             " whsec_YWI=",
		"correct horse battery 1": "correct horse battery 1",
	} {
		key, err := webhook.DecodeSecret(secret)
		if err != nil || string(key) != want {
			t.Errorf("DecodeSecret(%q) = %q, %v; want %q", secret, key, err, want)
		}
	}
	for _, bad := range []string{"", "whsec_", "whsec_!!!", "whsec_YWI=YWI=", "whsec_ YWI="} {
		if key, err := webhook.DecodeSecret(bad); !errors.Is(err, webhook.ErrInvalidSecret) {
			t.Errorf("DecodeSecret(%q) = %q, %v; want ErrInvalidSecret", bad, key, err)
		}
	}
	// A raw secret and its whsec_ form are the same key.
	if got := webhook.EncodeSecret([]byte("s3cret")); got != "whsec_czNjcmV0" {
		t.Errorf("EncodeSecret = %q", got)
	}
	if _, err := webhook.NewSigner(); !errors.Is(err, webhook.ErrInvalidSecret) {
		t.Errorf("NewSigner(): %v, want ErrInvalidSecret", err)
	}
	if _, err := webhook.NewVerifier("ok", "whsec_?"); !errors.Is(err, webhook.ErrInvalidSecret) || !strings.Contains(err.Error(), "secret 2") {
		t.Errorf("NewVerifier with a bad second secret: %v", err)
	}
}

// signed returns the headers of a message signed with secrets at ts.
func signed(t *testing.T, id string, ts time.Time, body []byte, secrets ...string) http.Header {
	t.Helper()
	s, err := webhook.NewSigner(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	if err := s.SetHeaders(h, id, ts, body); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestSignVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Unix(1712345679, 0)
	body := []byte(`{"id":"1712345678901-0","type":"run_failed"}`)
	h := signed(t, "1712345678901-0", now, body, secret)
	if h.Get(webhook.HeaderWebhookID) != "1712345678901-0" || h.Get(webhook.HeaderWebhookTimestamp) != "1712345679" ||
		!strings.HasPrefix(h.Get(webhook.HeaderWebhookSignature), "v1,") {
		t.Fatalf("headers %v", h)
	}
	// The signature is the base64 of a 32-byte HMAC.
	sig, _ := strings.CutPrefix(h.Get(webhook.HeaderWebhookSignature), "v1,")
	if raw, err := base64.StdEncoding.DecodeString(sig); err != nil || len(raw) != 32 {
		t.Errorf("signature %q: %d bytes, %v", sig, len(raw), err)
	}
	if err := webhook.VerifyHeaders(secret, h, body, now); err != nil {
		t.Fatal(err)
	}
	// The whsec_ form of the same key verifies it too.
	if err := webhook.VerifyHeaders(webhook.EncodeSecret([]byte(secret)), h, body, now); err != nil {
		t.Errorf("whsec_ form of the raw secret: %v", err)
	}
	// Messages with IDs the signed content could not delimit are refused.
	s, _ := webhook.NewSigner(secret)
	for _, id := range []string{"", "a.b", "a b"} {
		if _, err := s.Sign(id, now, body); err == nil {
			t.Errorf("Sign accepted the ID %q", id)
		}
	}
}

// TestVerifyRotation: a sender rotating its secret signs with both; a
// receiver that knows either accepts, and one that knows both accepts
// messages signed with either.
func TestVerifyRotation(t *testing.T) {
	t.Parallel()
	now := time.Unix(1712345679, 0)
	body := []byte(`{"id":"1-0","type":"run_failed"}`)
	both := signed(t, "1-0", now, body, "new-secret", "old-secret")
	if n := len(strings.Fields(both.Get(webhook.HeaderWebhookSignature))); n != 2 {
		t.Fatalf("%d signatures, want 2: %q", n, both.Get(webhook.HeaderWebhookSignature))
	}
	for _, receiver := range []string{"new-secret", "old-secret"} {
		if err := webhook.VerifyHeaders(receiver, both, body, now); err != nil {
			t.Errorf("receiver with %s: %v", receiver, err)
		}
	}
	if err := webhook.VerifyHeaders("third", both, body, now); !errors.Is(err, webhook.ErrBadSignature) {
		t.Errorf("receiver with neither: %v, want ErrBadSignature", err)
	}
	v, err := webhook.NewVerifier("new-secret", "old-secret")
	if err != nil {
		t.Fatal(err)
	}
	for _, sender := range []string{"new-secret", "old-secret"} {
		if err := v.Verify(signed(t, "1-0", now, body, sender), body, now); err != nil {
			t.Errorf("sender with %s: %v", sender, err)
		}
	}
	// Signatures of other versions and unparsable entries are skipped,
	// wherever the valid one is in the list.
	one := both.Get(webhook.HeaderWebhookSignature)
	mixed := both.Clone()
	mixed.Set(webhook.HeaderWebhookSignature, "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg== junk "+
		"v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,x  "+strings.Fields(one)[1])
	if err := webhook.VerifyHeaders("old-secret", mixed, body, now); err != nil {
		t.Errorf("valid signature among others: %v", err)
	}
}

// TestVerifyTolerance: a timestamp as far as the tolerance from now, either
// way, is accepted; a second further is too old or too new.
func TestVerifyTolerance(t *testing.T) {
	t.Parallel()
	now := time.Unix(1712345679, 0)
	body := []byte(`{}`)
	v, err := webhook.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at        time.Duration // from now
		tolerance time.Duration
		want      error
	}{
		{0, 0, nil},
		{-5 * time.Minute, 0, nil},
		{5 * time.Minute, 0, nil},
		{-5*time.Minute - time.Second, 0, webhook.ErrTimestampTooOld},
		{5*time.Minute + time.Second, 0, webhook.ErrTimestampTooNew},
		{-time.Hour, 0, webhook.ErrTimestampTooOld},
		{-11 * time.Second, 10 * time.Second, webhook.ErrTimestampTooOld},
		{11 * time.Second, 10 * time.Second, webhook.ErrTimestampTooNew},
		{-50 * time.Minute, time.Hour, nil},
	} {
		v.Tolerance = c.tolerance
		err := v.Verify(signed(t, "1-0", now.Add(c.at), body, secret), body, now)
		if !errors.Is(err, c.want) || (c.want != nil && !errors.Is(err, webhook.ErrStaleTimestamp)) {
			t.Errorf("signed %s from now, tolerance %s: %v, want %v", c.at, c.tolerance, err, c.want)
		}
	}
}

func TestVerifyRejects(t *testing.T) {
	t.Parallel()
	now := time.Unix(1712345679, 0)
	body := []byte(`{"id":"1-0","type":"run_failed"}`)
	with := func(name, value string) http.Header {
		h := signed(t, "1-0", now, body, secret)
		if value == "" {
			h.Del(name)
		} else {
			h.Set(name, value)
		}
		return h
	}
	good := signed(t, "1-0", now, body, secret).Get(webhook.HeaderWebhookSignature)
	for name, c := range map[string]struct {
		h    http.Header
		body []byte
		want error
	}{
		"tampered body":      {with("x", ""), []byte(`{"id":"1-0","type":"run_succeeded"}`), webhook.ErrBadSignature},
		"body with a space":  {with("x", ""), append([]byte(" "), body...), webhook.ErrBadSignature},
		"other id":           {with(webhook.HeaderWebhookID, "1-1"), body, webhook.ErrBadSignature},
		"other timestamp":    {with(webhook.HeaderWebhookTimestamp, "1712345678"), body, webhook.ErrBadSignature},
		"other secret":       {signed(t, "1-0", now, body, "other"), body, webhook.ErrBadSignature},
		"no v1 signature":    {with(webhook.HeaderWebhookSignature, "v1a,"+good[3:]), body, webhook.ErrBadSignature},
		"no version":         {with(webhook.HeaderWebhookSignature, good[3:]), body, webhook.ErrBadSignature},
		"truncated":          {with(webhook.HeaderWebhookSignature, good[:len(good)-2]), body, webhook.ErrBadSignature},
		"hex, not base64":    {with(webhook.HeaderWebhookSignature, "v1,e0653250816bfa66208a4491d210df2986818cb99287c5646d171c63f05f87c4"), body, webhook.ErrBadSignature},
		"no id":              {with(webhook.HeaderWebhookID, ""), body, webhook.ErrMissingHeader},
		"no timestamp":       {with(webhook.HeaderWebhookTimestamp, ""), body, webhook.ErrMissingHeader},
		"no signature":       {with(webhook.HeaderWebhookSignature, ""), body, webhook.ErrMissingHeader},
		"no headers":         {http.Header{}, body, webhook.ErrMissingHeader},
		"timestamp in ms":    {with(webhook.HeaderWebhookTimestamp, "1712345679000.5"), body, webhook.ErrBadTimestamp},
		"negative timestamp": {with(webhook.HeaderWebhookTimestamp, "-1"), body, webhook.ErrBadTimestamp},
		"signed timestamp":   {with(webhook.HeaderWebhookTimestamp, "+1712345679"), body, webhook.ErrBadTimestamp},
		"huge timestamp":     {with(webhook.HeaderWebhookTimestamp, "99999999999999999999"), body, webhook.ErrBadTimestamp},
		// The signature is checked before the age: a stale forgery is a
		// forgery.
		"stale and bad sig": {func() http.Header {
			h := signed(t, "1-0", now.Add(-time.Hour), body, secret)
			h.Set(webhook.HeaderWebhookSignature, "v1,AAAA")
			return h
		}(), body, webhook.ErrBadSignature},
	} {
		err := webhook.VerifyHeaders(secret, c.h, c.body, now)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if err := webhook.VerifyHeaders(secret, with(webhook.HeaderWebhookID, ""), body, now); err == nil ||
		!strings.Contains(err.Error(), webhook.HeaderWebhookID) {
		t.Errorf("the missing header is not named: %v", err)
	}
	if err := webhook.VerifyHeaders("", signed(t, "1-0", now, body, secret), body, now); !errors.Is(err, webhook.ErrInvalidSecret) {
		t.Errorf("empty secret: %v, want ErrInvalidSecret", err)
	}
	var zero webhook.Verifier
	if err := zero.Verify(signed(t, "1-0", now, body, secret), body, now); !errors.Is(err, webhook.ErrBadSignature) {
		t.Errorf("a Verifier without secrets: %v, want ErrBadSignature", err)
	}
}

// signedRequest is a delivery of body signed with secret at ts, as a
// worker sends it.
func signedRequest(body string, ts time.Time) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(webhook.HeaderEvent, "run_failed")
	s, err := webhook.NewSigner(secret)
	if err != nil {
		panic(err)
	}
	if err := s.SetHeaders(r.Header, "1712345678901-0", ts, []byte(body)); err != nil {
		panic(err)
	}
	return r
}

const goodBody = `{"id":"1712345678901-0","type":"run_failed","at":"2024-04-05T19:34:38.901Z",` +
	`"run_id":"01hv0000000000000000000000","workflow":"signup","details":{"code":"permanent_error","owner":""}}`

func TestVerifyRequestAccepts(t *testing.T) {
	t.Parallel()
	now := time.Unix(1712345679, 0)
	for name, r := range map[string]*http.Request{
		"now":             signedRequest(goodBody, now),
		"5 minutes ago":   signedRequest(goodBody, now.Add(-5*time.Minute)),
		"5 minutes ahead": signedRequest(goodBody, now.Add(5*time.Minute)),
		"no event":        withHeader(signedRequest(goodBody, now), webhook.HeaderEvent, ""),
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
		"no timestamp":        {withHeader(resigned(goodBody), webhook.HeaderWebhookTimestamp, ""), 0, webhook.ErrMissingHeader},
		"timestamp in ms":     {withHeader(resigned(goodBody), webhook.HeaderWebhookTimestamp, "1712345679000.5"), 0, webhook.ErrBadTimestamp},
		"no signature":        {withHeader(resigned(goodBody), webhook.HeaderWebhookSignature, ""), 0, webhook.ErrMissingHeader},
		"no id":               {withHeader(resigned(goodBody), webhook.HeaderWebhookID, ""), 0, webhook.ErrMissingHeader},
		"nothing signed":      {httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(goodBody)), 0, webhook.ErrMissingHeader},
		"changed timestamp":   {withHeader(resigned(goodBody), webhook.HeaderWebhookTimestamp, "1712345678"), 0, webhook.ErrBadSignature},
		"changed id":          {withHeader(resigned(goodBody), webhook.HeaderWebhookID, "1712345678901-1"), 0, webhook.ErrBadSignature},
		"stale":               {signedRequest(goodBody, now.Add(-5*time.Minute-time.Second)), 0, webhook.ErrTimestampTooOld},
		"from the future":     {signedRequest(goodBody, now.Add(5*time.Minute+time.Second)), 0, webhook.ErrTimestampTooNew},
		"stale, narrow skew":  {signedRequest(goodBody, now.Add(-11*time.Second)), 10 * time.Second, webhook.ErrStaleTimestamp},
		"not JSON":            {resigned(`run_failed`), 0, webhook.ErrBadPayload},
		"trailing data":       {resigned(goodBody + `{}`), 0, webhook.ErrBadPayload},
		"no type":             {resigned(`{"id":"1712345678901-0"}`), 0, webhook.ErrBadPayload},
		"id other than body":  {resigned(`{"id":"1-0","type":"run_failed"}`), 0, webhook.ErrBadPayload},
		"other delivery":      {withHeader(resigned(goodBody), webhook.HeaderDelivery, "1712345678901-1"), 0, webhook.ErrBadPayload},
		"other event":         {withHeader(resigned(goodBody), webhook.HeaderEvent, "run_succeeded"), 0, webhook.ErrBadPayload},
		"stale and bad sig":   {withHeader(signedRequest(goodBody, now.Add(-time.Hour)), webhook.HeaderWebhookSignature, "v1,AA=="), 0, webhook.ErrBadSignature},
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
	if _, err := webhook.VerifyRequest(signedRequest(goodBody, now), "", 0, now); !errors.Is(err, webhook.ErrInvalidSecret) {
		t.Errorf("empty secret: error %v, want ErrInvalidSecret", err)
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
