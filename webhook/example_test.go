package webhook_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/cairnhq/cairn/webhook"
)

// A receiver's http.Handler: VerifyRequest reads the body, checks the
// Standard Webhooks signature and the timestamp's age, and returns the
// notification; the handler deduplicates on its ID.
func ExampleVerifyRequest() {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // the worker's CAIRN_WEBHOOK_SECRET
	seen := map[string]bool{}                          // a real receiver keeps this in its database
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := webhook.VerifyRequest(r, secret, 5*time.Minute, time.Now())
		if errors.Is(err, webhook.ErrStaleTimestamp) {
			log.Printf("a stale webhook: is a clock wrong? %v", err)
		}
		if err != nil {
			// 401, not 5xx: the sender would retry a 5xx in vain.
			http.Error(w, "unverified webhook", http.StatusUnauthorized)
			return
		}
		if seen[p.ID] { // delivery is at least once
			w.WriteHeader(http.StatusNoContent)
			return
		}
		seen[p.ID] = true
		fmt.Println(p.Type, p.RunID, p.Workflow, p.Details["code"])
		w.WriteHeader(http.StatusNoContent)
	})

	// What a worker sends, twice (a retry: the same webhook-id), then a
	// forgery.
	body := []byte(`{"id":"1712345678901-0","type":"run_failed","at":"2024-04-05T19:34:38.901Z","run_id":"01hv0000000000000000000000","workflow":"signup","details":{"code":"permanent_error"}}`)
	send := func(secret string) int {
		req := httptest.NewRequest(http.MethodPost, "/hooks/cairn", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(webhook.HeaderEvent, "run_failed")
		signer, err := webhook.NewSigner(secret)
		if err != nil {
			log.Fatal(err)
		}
		if err := signer.SetHeaders(req.Header, "1712345678901-0", time.Now(), body); err != nil {
			log.Fatal(err)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec.Code
	}
	fmt.Println(send(secret))
	fmt.Println(send(secret))
	fmt.Println(send("whsec_Z3Vlc3M="))
	// Output:
	// run_failed 01hv0000000000000000000000 signup permanent_error
	// 204
	// 204
	// 401
}

// A receiver that reads the body itself, and accepts two secrets while
// the worker's is rotated (CAIRN_WEBHOOK_SECRET the new one,
// CAIRN_WEBHOOK_PREVIOUS_SECRET the old one, or receivers first).
func ExampleVerifier() {
	v, err := webhook.NewVerifier("whsec_bmV3LXNlY3JldC1vZi0yNC1ieXRlcy0x", "old secret, raw")
	if err != nil {
		log.Fatal(err)
	}
	v.Tolerance = 2 * time.Minute
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, webhook.MaxBodyBytes))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		if err := v.Verify(r.Header, body, time.Now()); err != nil {
			fmt.Println("refused; too old:", errors.Is(err, webhook.ErrTimestampTooOld))
			http.Error(w, "unverified webhook", http.StatusUnauthorized)
			return
		}
		fmt.Println("verified", r.Header.Get(webhook.HeaderWebhookID))
		w.WriteHeader(http.StatusNoContent)
	})

	body := []byte(`{"id":"1712345678901-0","type":"run_failed"}`)
	for _, c := range []struct {
		secret string
		at     time.Time
	}{
		{"old secret, raw", time.Now()},
		{"whsec_bmV3LXNlY3JldC1vZi0yNC1ieXRlcy0x", time.Now()},
		{"whsec_bmV3LXNlY3JldC1vZi0yNC1ieXRlcy0x", time.Now().Add(-time.Hour)},
	} {
		req := httptest.NewRequest(http.MethodPost, "/hooks/cairn", bytes.NewReader(body))
		signer, err := webhook.NewSigner(c.secret)
		if err != nil {
			log.Fatal(err)
		}
		if err := signer.SetHeaders(req.Header, "1712345678901-0", c.at, body); err != nil {
			log.Fatal(err)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		fmt.Println(rec.Code)
	}
	// Output:
	// verified 1712345678901-0
	// 204
	// verified 1712345678901-0
	// 204
	// refused; too old: true
	// 401
}

// Signing a message: the test vector of the Standard Webhooks reference
// implementations.
func ExampleSigner_Sign() {
	s, err := webhook.NewSigner("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		log.Fatal(err)
	}
	sig, err := s.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sig)
	// Output:
	// v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
}

// A secret without the whsec_ prefix is its own key; its whsec_ form, for
// Standard Webhooks libraries that want one, is EncodeSecret of its bytes.
func ExampleEncodeSecret() {
	raw := "s3cret" // CAIRN_WEBHOOK_SECRET=s3cret
	fmt.Println(webhook.EncodeSecret([]byte(raw)))
	key, err := webhook.DecodeSecret("whsec_czNjcmV0")
	fmt.Println(string(key), err)
	// Output:
	// whsec_czNjcmV0
	// s3cret <nil>
}
