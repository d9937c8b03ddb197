package webhook_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/cairnhq/cairn/webhook"
)

func ExampleSign() {
	body := []byte(`{"id":"1-0","type":"run_failed"}`)
	fmt.Println(webhook.Sign("s3cret", "1700000000", body))
	// Output:
	// sha256=e0653250816bfa66208a4491d210df2986818cb99287c5646d171c63f05f87c4
}

func ExampleVerify() {
	// A receiver that reads the body itself: verify the signature, then
	// the timestamp's age, then deduplicate on the delivery ID.
	secret := "s3cret"
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, webhook.MaxBodyBytes))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		ts := r.Header.Get(webhook.HeaderTimestamp)
		if !webhook.Verify(secret, ts, body, r.Header.Get(webhook.HeaderSignature)) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
			http.Error(w, "stale timestamp", http.StatusUnauthorized)
			return
		}
		fmt.Println("verified delivery", r.Header.Get(webhook.HeaderDelivery))
		w.WriteHeader(http.StatusNoContent)
	})

	body := []byte(`{"id":"1712345678901-0","type":"run_failed","run_id":"01hv0000000000000000000000","workflow":"signup"}`)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req := httptest.NewRequest(http.MethodPost, "/hooks/cairn", bytes.NewReader(body))
	req.Header.Set(webhook.HeaderDelivery, "1712345678901-0")
	req.Header.Set(webhook.HeaderTimestamp, ts)
	req.Header.Set(webhook.HeaderSignature, webhook.Sign(secret, ts, body))
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	// Output:
	// verified delivery 1712345678901-0
	// 204
}

func ExampleVerifyRequest() {
	secret := "s3cret"
	seen := map[string]bool{} // a real receiver keeps this in its database
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

	// What a worker sends, twice (a retry), then a forgery:
	body := []byte(`{"id":"1712345678901-0","type":"run_failed","at":"2024-04-05T19:34:38.901Z","run_id":"01hv0000000000000000000000","workflow":"signup","details":{"code":"permanent_error"}}`)
	send := func(signature func(ts string) string) int {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req := httptest.NewRequest(http.MethodPost, "/hooks/cairn", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(webhook.HeaderEvent, "run_failed")
		req.Header.Set(webhook.HeaderDelivery, "1712345678901-0")
		req.Header.Set(webhook.HeaderTimestamp, ts)
		req.Header.Set(webhook.HeaderSignature, signature(ts))
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec.Code
	}
	signed := func(ts string) string { return webhook.Sign(secret, ts, body) }
	fmt.Println(send(signed))
	fmt.Println(send(signed))
	fmt.Println(send(func(ts string) string { return webhook.Sign("guess", ts, body) }))
	// Output:
	// run_failed 01hv0000000000000000000000 signup permanent_error
	// 204
	// 204
	// 401
}
