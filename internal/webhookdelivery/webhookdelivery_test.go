package webhookdelivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/webhook"
)

func TestMain(m *testing.M) { redistest.Main(m) }

const secret = "s3cret"

// fakeClock is a Clock that moves only when told, and counts its readings.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	reads atomic.Int64
}

func (c *fakeClock) Now() time.Time {
	c.reads.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	const timeout = 10 * time.Second
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := Config{URL: "https://example.com/hook", Secret: "x"}.withDefaults()
	if c.MaxRetry != tasks.DefaultWebhookMaxRetry || c.Group != DefaultGroup || c.ClaimIdle != 5*time.Second ||
		len(c.Events) != len(DefaultEvents) || c.Clock == nil || c.HTTPClient == nil || c.HTTPClient.Timeout != 10*time.Second {
		t.Fatalf("defaults %+v", c)
	}
	if since := time.Since(c.Clock.Now()).Abs(); since > time.Minute {
		t.Errorf("the default clock is %s off the wall clock", since)
	}
	for _, ev := range []string{"run_failed", "run_succeeded", "run_cancelled", "run_recovered", "run_needs_attention",
		"run_compensating", "run_compensated", "group_rolled_back"} {
		if !c.wants(ev) {
			t.Errorf("%s is not delivered by default", ev)
		}
	}
	if c.wants("step_failed") || c.wants("retry_scheduled") || c.wants("run_waiting") {
		t.Error("step-level events are delivered by default")
	}
	// The default client does not follow redirects: a redirected POST
	// would become a GET.
	redirect := httptest.NewServer(http.RedirectHandler("/elsewhere", http.StatusFound))
	defer redirect.Close()
	resp, err := c.HTTPClient.Post(redirect.URL, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Errorf("status %d: the default client followed a redirect", resp.StatusCode)
	}
	// The default client has a transport of its own: closing the default
	// transport's idle connections (as an httptest.Server's Close does)
	// does not break its deliveries.
	if tr := c.HTTPClient.Transport; tr == nil || tr == http.DefaultTransport {
		t.Errorf("the default client's transport is %v, want its own", tr)
	}
	// Set fields are kept.
	clock := &fakeClock{now: t0}
	k := Config{URL: "https://example.com/hook", Secret: "x", Group: "g", ClaimIdle: time.Second, MaxRetry: 3,
		Events: []string{"step_failed"}, Clock: clock}.withDefaults()
	if k.Group != "g" || k.ClaimIdle != time.Second || k.MaxRetry != 3 || !k.wants("step_failed") || k.wants("run_failed") ||
		k.Clock != Clock(clock) {
		t.Errorf("set fields changed: %+v", k)
	}
}

func TestRedactedURL(t *testing.T) {
	t.Parallel()
	c := Config{URL: "https://user:pw@example.com/hook?token=t"}
	if got, want := c.redactedURL(), "https://user:xxxxx@example.com/hook"; got != want {
		t.Errorf("redactedURL %q, want %q", got, want)
	}
}

func TestPayloadOf(t *testing.T) {
	t.Parallel()
	x := retrystate.Notification{ID: "1712345678901-0", Type: "run_failed", At: time.UnixMilli(1712345678901),
		RunID: "r1", Workflow: "signup", Fields: map[string]string{"owner": "", "code": "permanent_error"}}
	body, err := json.Marshal(payloadOf(x))
	if err != nil {
		t.Fatal(err)
	}
	// The wire format: the owner stays in the details.
	want := `{"id":"1712345678901-0","type":"run_failed","at":"2024-04-05T19:34:38.901Z","run_id":"r1",` +
		`"workflow":"signup","details":{"code":"permanent_error","owner":""}}`
	if string(body) != want {
		t.Errorf("body\n%s\nwant\n%s", body, want)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{"86400", time.Hour, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{t0.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{t0.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{t0.Add(2 * time.Hour).Format(http.TimeFormat), time.Hour, true},
	} {
		d, ok := parseRetryAfter(c.v, t0)
		if d != c.want || ok != c.ok {
			t.Errorf("parseRetryAfter(%q) = %s, %v; want %s, %v", c.v, d, ok, c.want, c.ok)
		}
	}
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	task := asynq.NewTask(tasks.TypeWebhook, nil)
	for n := range 15 {
		d := RetryDelay(n, errors.New("500"), task)
		base := min(time.Second<<n, 10*time.Minute)
		if d < base/2 || d > base {
			t.Errorf("retry %d: delay %s, want within [%s, %s]", n, d, base/2, base)
		}
	}
	if d := RetryDelay(3, fmt.Errorf("wrapped: %w", &retryAfter{after: 42 * time.Second, err: errors.New("503")}), task); d != 42*time.Second {
		t.Errorf("delay %s after Retry-After 42s", d)
	}
	if d := RetryDelay(3, &retryAfter{after: 0, err: errors.New("503")}, task); d != time.Second {
		t.Errorf("delay %s after Retry-After 0, want the 1s floor", d)
	}
}

// request is one request the test receiver got.
type request struct {
	header http.Header
	body   []byte
}

// receive starts a receiver answering every request with status and
// header, and returns its URL and what it got so far.
func receive(t *testing.T, status int, header http.Header) (string, func() []request) {
	t.Helper()
	var (
		mu  sync.Mutex
		got []request
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, request{header: r.Header.Clone(), body: body})
		mu.Unlock()
		maps.Copy(w.Header(), header)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "answer")
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/hook", func() []request {
		mu.Lock()
		defer mu.Unlock()
		return append([]request(nil), got...)
	}
}

const noteBody = `{"id":"1712345678901-0","type":"run_failed","at":"2024-04-05T19:34:38.901Z","run_id":"r1","workflow":"signup"}`

// TestHandlerSignsWithClock: the request carries the body as it is, the
// Standard Webhooks headers signed at the injected clock's time (and the
// deprecated X-Cairn-* ones, for one release), and the webhook-id is the
// notification's ID on every attempt.
func TestHandlerSignsWithClock(t *testing.T) {
	t.Parallel()
	url, got := receive(t, http.StatusNoContent, nil)
	clock := &fakeClock{now: t0}
	h, err := NewHandler(Config{URL: url, Secret: secret, Clock: clock}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	task := asynq.NewTask(tasks.TypeWebhook, []byte(noteBody))
	if err := h.ProcessTask(context.Background(), task); err != nil {
		t.Fatalf("ProcessTask: %v", err)
	}
	clock.Add(90 * time.Second) // a retry, later
	if err := h.ProcessTask(context.Background(), task); err != nil {
		t.Fatalf("ProcessTask again: %v", err)
	}
	rs := got()
	if len(rs) != 2 {
		t.Fatalf("%d requests, want 2", len(rs))
	}
	signer, err := webhook.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		at := t0.Add(time.Duration(i) * 90 * time.Second)
		ts := strconv.FormatInt(at.Unix(), 10)
		sig, err := signer.Sign("1712345678901-0", at, []byte(noteBody))
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{
			"Content-Type":                 "application/json",
			"User-Agent":                   "cairn-webhook/1",
			webhook.HeaderEvent:            "run_failed",
			webhook.HeaderWebhookID:        "1712345678901-0",
			webhook.HeaderWebhookTimestamp: ts,
			webhook.HeaderWebhookSignature: sig,
			// The deprecated headers, still sent.
			"X-Cairn-Delivery":  "1712345678901-0",
			"X-Cairn-Timestamp": ts,
			"X-Cairn-Signature": webhook.Sign(secret, ts, []byte(noteBody)), //nolint:staticcheck // the deprecated header is still sent
		} {
			if v := r.header.Get(name); v != want {
				t.Errorf("attempt %d: %s: %q, want %q", i+1, name, v, want)
			}
		}
		if string(r.body) != noteBody {
			t.Errorf("attempt %d: body %s, want %s", i+1, r.body, noteBody)
		}
		// A receiver whose clock agrees accepts it, with the secret's
		// whsec_ form too.
		for _, recv := range []string{secret, webhook.EncodeSecret([]byte(secret))} {
			req := httptest.NewRequest(http.MethodPost, "/hook", nil)
			req.Body = io.NopCloser(bytes.NewReader(r.body))
			req.Header = r.header
			if p, err := webhook.VerifyRequest(req, recv, time.Minute, at.Add(30*time.Second)); err != nil || p.RunID != "r1" {
				t.Errorf("attempt %d: VerifyRequest with %s: %+v, %v", i+1, recv, p, err)
			}
		}
	}
}

// TestHandlerSignsWithEverySecret: during a rotation, webhook-signature
// holds one signature per secret, and a receiver with any of them
// verifies the delivery; a whsec_ secret is used decoded.
func TestHandlerSignsWithEverySecret(t *testing.T) {
	t.Parallel()
	url, got := receive(t, http.StatusNoContent, nil)
	const current, previous = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "old-raw-secret"
	h, err := NewHandler(Config{URL: url, Secret: current, PreviousSecrets: []string{previous},
		Clock: &fakeClock{now: t0}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.ProcessTask(context.Background(), asynq.NewTask(tasks.TypeWebhook, []byte(noteBody))); err != nil {
		t.Fatal(err)
	}
	r := got()[0]
	if sigs := strings.Fields(r.header.Get(webhook.HeaderWebhookSignature)); len(sigs) != 2 {
		t.Fatalf("webhook-signature %q: want two signatures", r.header.Get(webhook.HeaderWebhookSignature))
	}
	for _, receiver := range []string{current, previous} {
		if err := webhook.VerifyHeaders(receiver, r.header, r.body, t0); err != nil {
			t.Errorf("receiver with %s: %v", receiver, err)
		}
	}
	if err := webhook.VerifyHeaders("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", r.header, r.body, t0); err == nil {
		t.Error("the base64 text of the whsec_ secret, as a raw secret, verified: the key was not decoded")
	}
	// The deprecated header is keyed with the current secret as given.
	ts := r.header.Get(webhook.HeaderWebhookTimestamp)
	if !webhook.Verify(current, ts, r.body, r.header.Get("X-Cairn-Signature")) { //nolint:staticcheck // the deprecated header is still sent
		t.Error("X-Cairn-Signature is not keyed with the current secret as given")
	}
}

// TestConfigValidateSecrets: a whsec_ secret must be base64; a raw one may
// be anything but empty.
func TestConfigValidateSecrets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		secret   string
		previous []string
		ok       bool
	}{
		{"s3cret", nil, true},
		{"whsec_czNjcmV0", []string{"old"}, true},
		{"whsec_not base64!", nil, false},
		{"whsec_", nil, false},
		{"s3cret", []string{""}, false},
		{"s3cret", []string{"whsec_%%"}, false},
	} {
		cfg := Config{URL: "https://example.com/hook", Secret: c.secret, PreviousSecrets: c.previous}
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("secret %q, previous %q: %v, want ok %v", c.secret, c.previous, err, c.ok)
		}
		if _, err := NewHandler(cfg, nil); (err == nil) != c.ok {
			t.Errorf("NewHandler, secret %q, previous %q: %v, want ok %v", c.secret, c.previous, err, c.ok)
		}
	}
}

// TestHandlerStatuses: what each answer of the receiver makes of the
// delivery.
func TestHandlerStatuses(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: t0}
	task := asynq.NewTask(tasks.TypeWebhook, []byte(noteBody))
	for _, c := range []struct {
		status    int
		header    http.Header
		retried   bool          // an error asynq retries
		delay     time.Duration // of the retry, when the receiver named one
		skipRetry bool
	}{
		{status: http.StatusOK},
		{status: http.StatusAccepted},
		{status: http.StatusInternalServerError, retried: true},
		{status: http.StatusRequestTimeout, retried: true},
		{status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {"7"}}, retried: true, delay: 7 * time.Second},
		{status: http.StatusServiceUnavailable, header: http.Header{"Retry-After": {t0.Add(3 * time.Minute).Format(http.TimeFormat)}},
			retried: true, delay: 3 * time.Minute},
		{status: http.StatusBadRequest, skipRetry: true},
		{status: http.StatusUnauthorized, skipRetry: true},
		{status: http.StatusMovedPermanently, skipRetry: true},
	} {
		url, got := receive(t, c.status, c.header)
		h, err := NewHandler(Config{URL: url, Secret: secret, Clock: clock}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		err = h.ProcessTask(context.Background(), task)
		switch {
		case len(got()) != 1:
			t.Errorf("%d: %d requests, want 1", c.status, len(got()))
		case !c.retried && !c.skipRetry && err != nil:
			t.Errorf("%d: %v, want success", c.status, err)
		case c.retried && (err == nil || errors.Is(err, asynq.SkipRetry)):
			t.Errorf("%d: %v, want an error asynq retries", c.status, err)
		case c.skipRetry && !errors.Is(err, asynq.SkipRetry):
			t.Errorf("%d: %v, want asynq.SkipRetry", c.status, err)
		case c.delay > 0 && RetryDelay(5, err, task) != c.delay:
			t.Errorf("%d: retry delay %s, want %s (the receiver's Retry-After)", c.status, RetryDelay(5, err, task), c.delay)
		}
	}
}

func TestHandlerNetworkErrorRetried(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	h, err := NewHandler(Config{URL: url, Secret: secret}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	err = h.ProcessTask(context.Background(), asynq.NewTask(tasks.TypeWebhook, []byte(noteBody)))
	if err == nil || errors.Is(err, asynq.SkipRetry) {
		t.Errorf("%v, want an error asynq retries", err)
	}
}

func TestHandlerDropsMalformedTask(t *testing.T) {
	t.Parallel()
	url, got := receive(t, http.StatusOK, nil)
	h, err := NewHandler(Config{URL: url, Secret: secret}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`nope`, `{"type":"run_failed"}`} {
		if err := h.ProcessTask(context.Background(), asynq.NewTask(tasks.TypeWebhook, []byte(body))); !errors.Is(err, asynq.SkipRetry) {
			t.Errorf("%s: %v, want asynq.SkipRetry", body, err)
		}
	}
	if n := len(got()); n != 0 {
		t.Errorf("%d requests for malformed tasks", n)
	}
	if _, err := NewHandler(Config{URL: url}, nil); err == nil {
		t.Error("NewHandler accepted a config without a secret")
	}
}

var queues atomic.Int64

// addNotification appends a notification of type typ, of run r1, to the
// queue's stream as the state scripts do (retrystate/lua/lib/notify.lua,
// notify).
func addNotification(t *testing.T, rdb *redis.Client, queue, typ string) string {
	t.Helper()
	id, err := rdb.XAdd(context.Background(), &redis.XAddArgs{
		Stream: "cairn:{" + queue + "}:notifications",
		Values: []any{"type", typ, "at", strconv.FormatInt(t0.UnixMilli(), 10), "run", "r1", "workflow", "wf", "owner", ""},
	}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestNotifierClaimsOnItsClock: the notifier claims entries that a dead
// consumer left pending when its clock says ClaimIdle has passed since the
// last claim, and not before, however long they were pending in Redis.
func TestNotifierClaimsOnItsClock(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rdb := redistest.Shared(t).Client(t)
	queue := fmt.Sprintf("whd%d_%d", time.Now().UnixNano(), queues.Add(1))
	store := retrystate.New(rdb, queue)
	const group, claimIdle = "hooks", 500 * time.Millisecond
	if err := store.CreateNotifyGroup(ctx, group); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0}
	n := NewNotifier(store, asynq.NewClientFromRedisClient(rdb), queue, Config{URL: "http://127.0.0.1:1/hook",
		Secret: secret, Group: group, ClaimIdle: claimIdle, Clock: clock}, slog.New(slog.DiscardHandler))
	n.block = 10 * time.Millisecond
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	defer func() { cancel(); <-done }()
	stream := "cairn:{" + queue + "}:notifications"
	// The notifier reads its clock once per round of its loop, and claims
	// in the first round: after its second reading, its first claim is
	// behind it, and its clock stands still from then on.
	eventually(t, "the notifier to finish its first round", func() bool { return clock.reads.Load() >= 2 })
	// A consumer reads an entry and dies; the entry is added and read in
	// one transaction, so the notifier cannot read it first.
	var entry string
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAdd(ctx, &redis.XAddArgs{Stream: stream,
			Values: []any{"type", "run_failed", "at", strconv.FormatInt(t0.UnixMilli(), 10), "run", "r1", "workflow", "wf", "owner", ""}})
		p.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: "dead", Streams: []string{stream, ">"}, Count: 10, Block: -1})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: group, Start: "-", End: "+", Count: 10}).Result(); err != nil ||
		len(p) != 1 || p[0].Consumer != "dead" {
		t.Fatalf("pending %+v, %v: want one entry, the dead consumer's", p, err)
	} else {
		entry = p[0].ID
	}

	// The entry becomes idle enough in Redis, and the notifier goes round
	// its loop a few times: with its clock standing still, it claims
	// nothing.
	eventually(t, "the entry to be idle for claimIdle, still the dead consumer's", func() bool {
		p, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: "cairn:{" + queue + "}:notifications", Group: group,
			Start: "-", End: "+", Count: 10}).Result()
		return err == nil && len(p) == 1 && p[0].Consumer == "dead" && p[0].Idle >= claimIdle
	})
	reads := clock.reads.Load()
	eventually(t, "the notifier to go round its loop", func() bool { return clock.reads.Load() >= reads+5 })
	p, err := rdb.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: "cairn:{" + queue + "}:notifications", Group: group,
		Start: "-", End: "+", Count: 10}).Result()
	if err != nil || len(p) != 1 || p[0].Consumer != "dead" {
		t.Fatalf("pending %+v, %v: want the entry still the dead consumer's, the clock did not move", p, err)
	}

	// The clock moves on by claimIdle: the notifier claims the entry,
	// enqueues its delivery and acknowledges it.
	clock.Add(claimIdle)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	eventually(t, "the delivery to be enqueued", func() bool {
		info, err := insp.GetTaskInfo(queue, tasks.WebhookID(entry))
		return err == nil && info.Type == tasks.TypeWebhook
	})
	info, _ := insp.GetTaskInfo(queue, tasks.WebhookID(entry))
	var note webhook.Payload
	if err := json.Unmarshal(info.Payload, &note); err != nil || note.ID != entry || note.RunID != "r1" || note.Type != "run_failed" ||
		!note.At.Equal(t0) {
		t.Errorf("delivery payload %s (%v): want run_failed of r1, entry %s, at %s", info.Payload, err, entry, t0)
	}
	eventually(t, "the entry to be acknowledged", func() bool {
		k, err := store.NotifyPending(ctx, group)
		return err == nil && k == 0
	})
}

// TestNotifierSkipsUnwantedEvents: only the configured events are
// delivered; the others are acknowledged all the same.
func TestNotifierSkipsUnwantedEvents(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rdb := redistest.Shared(t).Client(t)
	queue := fmt.Sprintf("whd%d_%d", time.Now().UnixNano(), queues.Add(1))
	store := retrystate.New(rdb, queue)
	n := NewNotifier(store, asynq.NewClientFromRedisClient(rdb), queue, Config{URL: "http://127.0.0.1:1/hook", Secret: secret},
		slog.New(slog.DiscardHandler))
	n.block = 10 * time.Millisecond
	if err := store.CreateNotifyGroup(ctx, DefaultGroup); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	defer func() { cancel(); <-done }()
	skipped := addNotification(t, rdb, queue, "step_failed")
	wanted := addNotification(t, rdb, queue, "run_failed")
	insp := asynq.NewInspectorFromRedisClient(rdb)
	eventually(t, "the run_failed delivery to be enqueued and both entries acknowledged", func() bool {
		_, err := insp.GetTaskInfo(queue, tasks.WebhookID(wanted))
		k, perr := store.NotifyPending(ctx, DefaultGroup)
		return err == nil && perr == nil && k == 0
	})
	if _, err := insp.GetTaskInfo(queue, tasks.WebhookID(skipped)); !errors.Is(err, asynq.ErrTaskNotFound) {
		t.Errorf("step_failed delivery: %v, want no task", err)
	}
}

// TestNotifierDeliversSagaEventsByDefault: with the default events, a
// saga's run_compensating and run_compensated and an optional group's
// group_rolled_back are delivered (a saga's failure sends no run_failed),
// and the step-level events are not.
func TestNotifierDeliversSagaEventsByDefault(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rdb := redistest.Shared(t).Client(t)
	queue := fmt.Sprintf("whd%d_%d", time.Now().UnixNano(), queues.Add(1))
	store := retrystate.New(rdb, queue)
	n := NewNotifier(store, asynq.NewClientFromRedisClient(rdb), queue, Config{URL: "http://127.0.0.1:1/hook", Secret: secret},
		slog.New(slog.DiscardHandler))
	n.block = 10 * time.Millisecond
	if err := store.CreateNotifyGroup(ctx, DefaultGroup); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	defer func() { cancel(); <-done }()
	wanted := map[string]string{}
	for _, typ := range []string{"run_compensating", "run_compensated", "group_rolled_back"} {
		wanted[typ] = addNotification(t, rdb, queue, typ)
	}
	skipped := map[string]string{}
	for _, typ := range []string{"step_failed", "retry_scheduled", "run_waiting"} {
		skipped[typ] = addNotification(t, rdb, queue, typ)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	eventually(t, "the saga deliveries to be enqueued and every entry acknowledged", func() bool {
		for _, id := range wanted {
			if _, err := insp.GetTaskInfo(queue, tasks.WebhookID(id)); err != nil {
				return false
			}
		}
		k, err := store.NotifyPending(ctx, DefaultGroup)
		return err == nil && k == 0
	})
	for typ, id := range wanted {
		info, err := insp.GetTaskInfo(queue, tasks.WebhookID(id))
		if err != nil {
			t.Fatal(err)
		}
		var note webhook.Payload
		if err := json.Unmarshal(info.Payload, &note); err != nil || note.Type != typ || note.ID != id {
			t.Errorf("delivery of %s: %s (%v)", typ, info.Payload, err)
		}
	}
	for typ, id := range skipped {
		if _, err := insp.GetTaskInfo(queue, tasks.WebhookID(id)); !errors.Is(err, asynq.ErrTaskNotFound) {
			t.Errorf("%s delivery: %v, want no task", typ, err)
		}
	}
}

// TestDefaultEventsAreWritten: every default event type is one the state
// scripts write (a misspelt type would deliver nothing), and every
// run-level type the scripts write is delivered by default, but the opt-in ones.
func TestDefaultEventsAreWritten(t *testing.T) {
	t.Parallel()
	scripts, err := filepath.Glob("../../retrystate/lua/*.lua")
	helpers, herr := filepath.Glob("../../retrystate/lua/lib/*.lua") // the helpers the scripts share
	if err != nil || herr != nil || len(scripts) == 0 || len(helpers) == 0 {
		t.Fatalf("no state scripts found: %v %v", err, herr)
	}
	scripts = append(scripts, helpers...)
	written := map[string]bool{}
	re := regexp.MustCompile(`notify\("([a-z_]+)"`)
	for _, path := range scripts {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(src, -1) {
			written[string(m[1])] = true
		}
	}
	for _, typ := range DefaultEvents {
		if !written[typ] {
			t.Errorf("default event %q is not written by any script", typ)
		}
	}
	// Delivered only when configured (docs/webhooks.md): the step-level
	// events, and an operator's pause and resume, which came after the
	// default list and would surprise a receiver written against it.
	optIn := map[string]bool{"step_failed": true, "retry_scheduled": true, "run_waiting": true,
		"run_paused": true, "run_resumed": true}
	for typ := range written {
		if !optIn[typ] && !slices.Contains(DefaultEvents, typ) {
			t.Errorf("the scripts write %q, which is not delivered by default", typ)
		}
	}
}
