package workflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/engine"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/webhook"
	"github.com/cairnhq/cairn/workflow"
)

const hookSecret = "s3cret"

// delivery is one request a test receiver got.
type delivery struct {
	header http.Header
	body   []byte
	status int
}

// receiver is a webhook endpoint that answers the nth request (from 1) with
// status(n) and records every request.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	status func(n int) int

	mu   sync.Mutex
	got  []delivery
	more chan struct{} // signalled on every request
}

func newReceiver(t *testing.T, status func(n int) int) *receiver {
	r := &receiver{t: t, status: status, more: make(chan struct{}, 100)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		code := r.status(len(r.got) + 1)
		r.got = append(r.got, delivery{header: req.Header.Clone(), body: body, status: code})
		r.mu.Unlock()
		w.WriteHeader(code)
		select {
		case r.more <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// waitFor waits until the receiver has had n requests.
func (r *receiver) waitFor(n int, timeout time.Duration) []delivery {
	r.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if d := r.deliveries(); len(d) >= n {
			return d
		}
		select {
		case <-r.more:
		case <-deadline.C:
			r.t.Fatalf("receiver got %d requests after %s, want %d", len(r.deliveries()), timeout, n)
		}
	}
}

// checkSigned checks a delivery's headers and signature and returns its
// notification: the Standard Webhooks headers (webhook-id, the
// notification's ID; webhook-timestamp, now; webhook-signature, which
// verifies), and the deprecated X-Cairn-* ones, which still agree.
func checkSigned(t *testing.T, d delivery) workflow.Notification {
	t.Helper()
	if ct := d.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	ts := d.header.Get(webhook.HeaderWebhookTimestamp)
	if sec, err := strconv.ParseInt(ts, 10, 64); err != nil || time.Since(time.Unix(sec, 0)).Abs() > time.Minute {
		t.Errorf("webhook-timestamp %q is not the current Unix time", ts)
	}
	if err := webhook.VerifyHeaders(hookSecret, d.header, d.body, time.Now()); err != nil {
		t.Errorf("webhook-signature %q does not verify: %v", d.header.Get(webhook.HeaderWebhookSignature), err)
	}
	// The deprecated headers, sent for one more release.
	if d.header.Get(workflow.HeaderWebhookTimestamp) != ts ||
		d.header.Get(workflow.HeaderWebhookDelivery) != d.header.Get(webhook.HeaderWebhookID) ||
		!workflow.VerifyWebhookSignature(hookSecret, ts, d.body, d.header.Get(workflow.HeaderWebhookSignature)) {
		t.Errorf("the deprecated X-Cairn-* headers are missing or wrong: %v", d.header)
	}
	var n workflow.Notification
	if err := json.Unmarshal(d.body, &n); err != nil {
		t.Fatalf("body %s: %v", d.body, err)
	}
	// What a receiver using package webhook gets.
	req := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(d.body))
	req.Header = d.header.Clone()
	if p, err := webhook.VerifyRequest(req, hookSecret, time.Minute, time.Now()); err != nil {
		t.Errorf("webhook.VerifyRequest: %v", err)
	} else if got := p; !reflect.DeepEqual(got, n) {
		t.Errorf("webhook.VerifyRequest returned %+v, want %+v", got, n)
	}
	if n.ID != d.header.Get(webhook.HeaderWebhookID) || n.Type != d.header.Get(workflow.HeaderWebhookEvent) {
		t.Errorf("headers (webhook-id %q, event %q) disagree with the body %s", d.header.Get(webhook.HeaderWebhookID),
			d.header.Get(workflow.HeaderWebhookEvent), d.body)
	}
	return n
}

// failingDef is a one-step workflow whose step fails permanently.
func failingDef() workflow.Definition {
	return workflow.Definition{Name: "hooked", Policy: fastPolicy(), Steps: []workflow.Step{
		{Name: "only", Run: func(context.Context, *workflow.StepContext) (any, error) {
			return nil, workflow.Permanent(errors.New("boom"))
		}},
	}}
}

// TestWebhookSignatureRoundTrip: the deprecated X-Cairn-Signature
// functions still work.
func TestWebhookSignatureRoundTrip(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"1-0","type":"run_failed"}`)
	sig := workflow.SignWebhook(hookSecret, "1700000000", body)
	if len(sig) != len("sha256=")+64 || sig[:7] != "sha256=" {
		t.Fatalf("signature %q: want sha256=<64 hex digits>", sig)
	}
	if !workflow.VerifyWebhookSignature(hookSecret, "1700000000", body, sig) {
		t.Fatal("a signature does not verify")
	}
	// An independent computation (Python's hmac) of HMAC-SHA256(secret, "1700000000." + body).
	if want := "sha256=e0653250816bfa66208a4491d210df2986818cb99287c5646d171c63f05f87c4"; sig != want {
		t.Fatalf("SignWebhook = %s, want %s", sig, want)
	}
	for name, c := range map[string]struct {
		secret, ts string
		body       []byte
		header     string
	}{
		"other body":      {hookSecret, "1700000000", []byte(`{"id":"1-0","type":"run_succeeded"}`), sig},
		"other timestamp": {hookSecret, "1700000001", body, sig},
		"other secret":    {"other", "1700000000", body, sig},
		"no prefix":       {hookSecret, "1700000000", body, sig[7:]},
		"truncated":       {hookSecret, "1700000000", body, sig[:len(sig)-1]},
		"empty header":    {hookSecret, "1700000000", body, ""},
		"empty secret":    {"", "1700000000", body, workflow.SignWebhook("", "1700000000", body)},
	} {
		if workflow.VerifyWebhookSignature(c.secret, c.ts, c.body, c.header) {
			t.Errorf("%s: verified", name)
		}
	}
}

func TestWebhookConfigValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []workflow.WebhookConfig{
		{URL: "", Secret: "x"},
		{URL: "ftp://example.com/hook", Secret: "x"},
		{URL: "https:///hook", Secret: "x"},
		{URL: "example.com/hook", Secret: "x"},
		{URL: "https://example.com/hook", Secret: ""},
		{URL: "https://example.com/hook", Secret: "whsec_not base64"},
		{URL: "https://example.com/hook", Secret: "x", PreviousSecrets: []string{""}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: valid", c)
		}
	}
	if err := (workflow.WebhookConfig{URL: "https://example.com/hook?x=1", Secret: "x"}).Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
	// A workflow.Clock is a WebhookConfig.Clock.
	clock := workflow.SystemClock
	if err := (workflow.WebhookConfig{URL: "https://example.com/hook", Secret: "x", Clock: clock}).Validate(); err != nil {
		t.Errorf("valid config with a clock: %v", err)
	}
	if _, err := workflow.NewWorker(nil, workflow.WorkerConfig{Webhook: &workflow.WebhookConfig{URL: "nope"}}); err == nil {
		t.Error("NewWorker accepted a bad webhook URL")
	}
}

func TestWebhookRetryDelay(t *testing.T) {
	t.Parallel()
	task := asynq.NewTask(tasks.TypeWebhook, nil)
	for n := range 15 {
		d := engine.WebhookRetryDelay(n, errors.New("500"), task)
		base := min(time.Second<<n, 10*time.Minute)
		if d < base/2 || d > base {
			t.Errorf("retry %d: delay %s, want within [%s, %s]", n, d, base/2, base)
		}
	}
}

// TestWebhookRetriedOn500: a run fails; its run_failed notification is
// POSTed, signed; the receiver's 500 is retried by asynq with the same
// delivery ID and a fresh signature, and the 200 ends it.
func TestWebhookRetriedOn500(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rcv := newReceiver(t, func(n int) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	e.startWorker(workflow.WorkerConfig{Webhook: &workflow.WebhookConfig{URL: rcv.srv.URL + "/hook", Secret: hookSecret}},
		failingDef())
	run, err := e.client.Start(context.Background(), "hooked", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.wait(run.ID, 10*time.Second); r.Status != workflow.StatusFailed {
		t.Fatalf("run %s, want failed", r.Status)
	}
	ds := rcv.waitFor(2, 20*time.Second)
	first, second := checkSigned(t, ds[0]), checkSigned(t, ds[1])
	if first.ID != second.ID || first.ID == "" {
		t.Errorf("delivery IDs %q then %q: want the same", first.ID, second.ID)
	}
	if second.Type != "run_failed" || second.RunID != run.ID || second.Workflow != "hooked" {
		t.Errorf("notification %+v: want run_failed of run %s of hooked", second, run.ID)
	}
	if second.Details["code"] != workflow.CodePermanentError || second.Details["step"] != "only" {
		t.Errorf("details %v: want code permanent_error, step only", second.Details)
	}
	if second.At.IsZero() {
		t.Error("no time in the notification")
	}
	// The delivery task succeeded: asynq keeps it as completed (so that a
	// re-enqueue is a no-op), and nothing more is delivered.
	insp := asynq.NewInspectorFromRedisClient(e.rdb)
	e.eventually(10*time.Second, "the delivery task to complete", func() bool {
		info, err := insp.GetTaskInfo(e.queue, tasks.WebhookID(first.ID))
		return err == nil && info.State == asynq.TaskStateCompleted
	})
	if n := len(rcv.deliveries()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// TestWebhookNotRetriedOn400: a 4xx other than 408 and 429 archives the
// delivery at once.
func TestWebhookNotRetriedOn400(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rcv := newReceiver(t, func(int) int { return http.StatusBadRequest })
	e.startWorker(workflow.WorkerConfig{Webhook: &workflow.WebhookConfig{URL: rcv.srv.URL, Secret: hookSecret}},
		failingDef())
	run, err := e.client.Start(context.Background(), "hooked", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.wait(run.ID, 10*time.Second)
	n := checkSigned(t, rcv.waitFor(1, 20*time.Second)[0])
	if n.RunID != run.ID {
		t.Fatalf("delivery of run %s, want %s", n.RunID, run.ID)
	}
	insp := asynq.NewInspectorFromRedisClient(e.rdb)
	e.eventually(10*time.Second, "the delivery task to be archived", func() bool {
		info, err := insp.GetTaskInfo(e.queue, tasks.WebhookID(n.ID))
		return err == nil && info.State == asynq.TaskStateArchived
	})
	if got := len(rcv.deliveries()); got != 1 {
		t.Errorf("%d requests, want 1: a 400 is not retried", got)
	}
}

// TestWebhookClaimsEntriesOfDeadConsumer: a notification read by a consumer
// that died before enqueueing its delivery is claimed by a live worker and
// delivered.
func TestWebhookClaimsEntriesOfDeadConsumer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	store := retrystate.New(e.rdb, e.queue)
	if err := store.CreateNotifyGroup(ctx, workflow.DefaultWebhookGroup); err != nil {
		t.Fatal(err)
	}
	// A worker without webhooks fails a run; a "dead" consumer reads its
	// notification and never acknowledges it.
	stop := e.startStoppableWorker(workflow.WorkerConfig{}, failingDef())
	run, err := e.client.Start(ctx, "hooked", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.wait(run.ID, 10*time.Second)
	stop()
	read, err := store.ReadNotifyGroup(ctx, workflow.DefaultWebhookGroup, "dead", 10, 100*time.Millisecond)
	var failed *retrystate.Notification
	for i := range read {
		if read[i].Type == workflow.NotifyRunFailed && read[i].RunID == run.ID {
			failed = &read[i]
		}
	}
	if err != nil || failed == nil {
		t.Fatalf("dead consumer read %+v, %v: want the run's run_failed notification", read, err)
	}

	rcv := newReceiver(t, func(int) int { return http.StatusNoContent })
	e.startWorker(workflow.WorkerConfig{Webhook: &workflow.WebhookConfig{URL: rcv.srv.URL, Secret: hookSecret,
		ClaimIdle: 300 * time.Millisecond}}, failingDef())
	n := checkSigned(t, rcv.waitFor(1, 20*time.Second)[0])
	if n.ID != failed.ID || n.RunID != run.ID || n.Type != workflow.NotifyRunFailed {
		t.Errorf("delivered %+v, want entry %s (run_failed of %s)", n, failed.ID, run.ID)
	}
	// The entry is acknowledged: nothing is left pending in the group.
	e.eventually(10*time.Second, "the claimed entries to be acknowledged", func() bool {
		n, err := store.NotifyPending(ctx, workflow.DefaultWebhookGroup)
		return err == nil && n == 0
	})
}

// startStoppableWorker is startWorker with a function that stops the
// worker before the test ends.
func (e *env) startStoppableWorker(cfg workflow.WorkerConfig, defs ...workflow.Definition) (stop func()) {
	e.t.Helper()
	cfg.Queue = e.queue
	cfg.Logger = e.log
	w, err := workflow.NewWorker(e.rdb, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := w.Register(defs...); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-w.Ready():
	case <-time.After(10 * time.Second):
		e.t.Fatal("worker not ready after 10s")
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("worker: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}
