package doccheck

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/webhook"
)

// secret is the webhook secret of docs/webhooks.md's receiver (the
// worker's CAIRN_WEBHOOK_SECRET).
const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// handled holds the webhook IDs alreadyHandled has seen.
var handled = struct {
	sync.Mutex
	ids map[string]int
}{ids: map[string]int{}}

// alreadyHandled says whether the receiver has seen notification id, and
// marks it seen.
func alreadyHandled(id string) bool {
	handled.Lock()
	defer handled.Unlock()
	handled.ids[id]++
	return handled.ids[id] > 1
}

// snippet: webhooks-handler
func cairnHook(w http.ResponseWriter, r *http.Request) {
	n, err := webhook.VerifyRequest(r, secret, 5*time.Minute, time.Now())
	if err != nil { // webhook.ErrBadSignature, ErrMissingHeader, ErrStaleTimestamp, ...
		http.Error(w, "unverified webhook", http.StatusUnauthorized) // 401: not retried
		return
	}
	if alreadyHandled(n.ID) { // the webhook-id header
		return
	}
	// ... n.Type, n.RunID, n.Workflow, n.Details["code"], n.Details["reason"]
}

// end snippet

// TestWebhookHandler sends docs/webhooks.md's handler deliveries signed as
// a worker signs them (webhook.Signer, which the worker's delivery uses):
// one signed with the secret is accepted, twice (a retry, deduplicated);
// one signed with another secret, and one signed an hour ago, are refused
// with 401 before the handler looks at their ID.
func TestWebhookHandler(t *testing.T) {
	body := func(id string) []byte {
		return []byte(`{"id":"` + id + `","type":"run_failed","at":"2026-11-27T10:00:00Z","run_id":"01hv0000000000000000000000",` +
			`"workflow":"signup","details":{"code":"permanent_error"}}`)
	}
	deliver := func(id, secret string, at time.Time) int {
		t.Helper()
		b := body(id)
		req := httptest.NewRequest(http.MethodPost, "/hooks/cairn", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(webhook.HeaderEvent, "run_failed")
		signer, err := webhook.NewSigner(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := signer.SetHeaders(req.Header, id, at, b); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		cairnHook(rec, req)
		return rec.Code
	}
	seen := func(id string) int {
		handled.Lock()
		defer handled.Unlock()
		return handled.ids[id]
	}
	// IDs of this run of the test (-count=n runs it again).
	ms := strconv.FormatInt(time.Now().UnixMilli(), 10)
	good, forged, stale := ms+"-0", ms+"-1", ms+"-2"

	for i := 1; i <= 2; i++ {
		if code := deliver(good, secret, time.Now()); code != http.StatusOK || seen(good) != i {
			t.Errorf("delivery %d: %d, seen %d times; want 200, seen %d times", i, code, seen(good), i)
		}
	}
	if code := deliver(forged, "whsec_Z3Vlc3M=", time.Now()); code != http.StatusUnauthorized || seen(forged) != 0 {
		t.Errorf("a delivery signed with another secret: %d, seen %d times; want 401, unseen", code, seen(forged))
	}
	if code := deliver(stale, secret, time.Now().Add(-time.Hour)); code != http.StatusUnauthorized || seen(stale) != 0 {
		t.Errorf("a delivery signed an hour ago: %d, seen %d times; want 401, unseen", code, seen(stale))
	}
}
