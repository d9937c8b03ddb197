package workflow

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	randv2 "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// Webhook headers. The body is the JSON of a Notification.
const (
	// HeaderWebhookEvent is the notification type: run_failed,
	// run_succeeded, run_cancelled, run_recovered, run_needs_attention.
	HeaderWebhookEvent = "X-Cairn-Event"
	// HeaderWebhookDelivery identifies the notification (its stream entry
	// ID); it is the same on every attempt to deliver it. Receivers
	// deduplicate on it: delivery is at least once.
	HeaderWebhookDelivery = "X-Cairn-Delivery"
	// HeaderWebhookTimestamp is the Unix time, in seconds, of this attempt.
	HeaderWebhookTimestamp = "X-Cairn-Timestamp"
	// HeaderWebhookSignature is "sha256=" and the hex HMAC-SHA256, keyed
	// with the webhook secret, of the timestamp, ".", and the body.
	HeaderWebhookSignature = "X-Cairn-Signature"
)

// DefaultWebhookGroup is the consumer group of the notification stream that
// webhook delivery reads with.
const DefaultWebhookGroup = "webhooks"

// Notification types delivered by webhooks by default.
const (
	NotifyRunFailed         = "run_failed"
	NotifyRunSucceeded      = "run_succeeded"
	NotifyRunCancelled      = "run_cancelled"
	NotifyRunRecovered      = "run_recovered"
	NotifyRunNeedsAttention = "run_needs_attention"
)

// DefaultWebhookEvents are the notification types webhooks deliver unless
// WebhookConfig.Events says otherwise: the run-level events.
var DefaultWebhookEvents = []string{NotifyRunFailed, NotifyRunSucceeded, NotifyRunCancelled, NotifyRunRecovered,
	NotifyRunNeedsAttention}

// WebhookConfig configures webhook notifications: each entry of the queue's
// notification stream (run failed, recovered, succeeded, cancelled, needs
// attention) is POSTed, signed, to URL. A zero field takes the default given
// in its comment.
type WebhookConfig struct {
	// URL receives the notifications (http or https). Required.
	URL string
	// Secret keys the HMAC-SHA256 signature of each delivery. Required.
	Secret string
	// Events are the notification types to deliver; others are skipped.
	// Default DefaultWebhookEvents.
	Events []string
	// MaxRetry is how often a failed delivery is retried, with exponential
	// backoff from 1s to 10m, before asynq archives it. Default
	// tasks.DefaultWebhookMaxRetry (20: about 2 hours).
	MaxRetry int
	// HTTPClient sends the requests. Default: a client with a 10s timeout
	// that does not follow redirects.
	HTTPClient *http.Client
	// Group is the stream's consumer group. Default DefaultWebhookGroup.
	Group string
	// ClaimIdle: an entry read by a consumer (a worker process) and not
	// acknowledged for this long is taken over by another consumer, so a
	// killed worker's entries are delivered. Default 5s. Taking over an
	// entry whose delivery is already enqueued is harmless: the delivery's
	// task ID is derived from the entry.
	ClaimIdle time.Duration
	// Clock tells the time of the signature. Default SystemClock.
	Clock Clock
}

// Validate checks the URL and that a secret is set.
func (c WebhookConfig) Validate() error {
	if err := ValidateWebhookURL(c.URL); err != nil {
		return err
	}
	if c.Secret == "" {
		return errors.New("webhook: a secret is required to sign deliveries")
	}
	for _, ev := range c.Events {
		if !eventNameRE.MatchString(ev) {
			return fmt.Errorf("webhook: event type %q: want a name like run_failed", ev)
		}
	}
	return nil
}

var eventNameRE = regexp.MustCompile(`^[a-z][a-z_]*$`)

// ValidateWebhookURL checks that s is an absolute http or https URL with a
// host.
func ValidateWebhookURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("webhook URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("webhook URL %q: want an http:// or https:// URL", u.Redacted())
	case u.Host == "":
		return fmt.Errorf("webhook URL %q: no host", u.Redacted())
	}
	return nil
}

func (c WebhookConfig) withDefaults() WebhookConfig {
	if c.MaxRetry <= 0 {
		c.MaxRetry = tasks.DefaultWebhookMaxRetry
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{
			Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse // a redirected POST would become a GET
			},
		}
	}
	if c.Group == "" {
		c.Group = DefaultWebhookGroup
	}
	if c.ClaimIdle <= 0 {
		c.ClaimIdle = 5 * time.Second
	}
	if c.Clock == nil {
		c.Clock = SystemClock
	}
	if len(c.Events) == 0 {
		c.Events = DefaultWebhookEvents
	}
	return c
}

func (c WebhookConfig) wants(typ string) bool {
	return slices.Contains(c.Events, typ)
}

// redactedURL is the URL without its password and query, for logs.
func (c WebhookConfig) redactedURL() string {
	u, err := url.Parse(c.URL)
	if err != nil {
		return ""
	}
	u.RawQuery = ""
	return u.Redacted()
}

// SignWebhook returns the X-Cairn-Signature value of a delivery:
// "sha256=" and the hex HMAC-SHA256, keyed with secret, of timestamp, ".",
// and body.
func SignWebhook(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// VerifyWebhookSignature reports whether header (the X-Cairn-Signature
// value) signs timestamp (the X-Cairn-Timestamp value) and body with secret.
// It compares in constant time. Receivers should also reject a timestamp
// too far from their clock (say 5 minutes), so that a captured request
// cannot be replayed later, and deduplicate on X-Cairn-Delivery.
func VerifyWebhookSignature(secret, timestamp string, body []byte, header string) bool {
	if secret == "" || timestamp == "" || !strings.HasPrefix(header, "sha256=") {
		return false
	}
	return hmac.Equal([]byte(SignWebhook(secret, timestamp, body)), []byte(header))
}

// Notifier turns the queue's notification stream into webhook deliveries:
// it reads the stream with a consumer group (each entry goes to one of the
// workers running a Notifier), enqueues one asynq task of type
// tasks.TypeWebhook per entry, with a task ID derived from the entry, and
// then acknowledges the entry. Entries another worker read but did not
// acknowledge (it died) are claimed after WebhookConfig.ClaimIdle. The
// stream is written atomically with each run transition, and the task is
// retried by asynq, so a notification survives any crash; delivery is at
// least once.
//
// A Worker with WorkerConfig.Webhook set runs a Notifier and handles the
// tasks with a WebhookHandler; use them directly with an asynq server of
// your own.
type Notifier struct {
	cfg      WebhookConfig
	store    *retrystate.Store
	client   *asynq.Client
	queue    string
	consumer string
	log      *slog.Logger
}

// NewNotifier returns a notifier of the queue's notifications in rdb that
// enqueues their deliveries on the same queue.
func NewNotifier(rdb redis.UniversalClient, queue string, cfg WebhookConfig, log *slog.Logger) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if queue == "" {
		queue = DefaultQueue
	}
	if log == nil {
		log = slog.Default()
	}
	return newNotifier(retrystate.New(rdb, queue), asynq.NewClientFromRedisClient(rdb), queue, cfg, log), nil
}

func newNotifier(store *retrystate.Store, client *asynq.Client, queue string, cfg WebhookConfig, log *slog.Logger) *Notifier {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &Notifier{
		cfg: cfg.withDefaults(), store: store, client: client, queue: queue,
		consumer: fmt.Sprintf("%s_%d_%s", host, os.Getpid(), hex.EncodeToString(b[:])),
		log:      log.With("component", "webhook"),
	}
}

const (
	notifyBatch      = 100
	notifyBlock      = time.Second
	pruneEvery       = 10 * time.Minute
	pruneIdle        = time.Hour
	notifyMaxBackoff = 10 * time.Second
)

// Run delivers notifications until ctx is done. While Redis is unreachable
// it keeps trying and logs it.
func (n *Notifier) Run(ctx context.Context) {
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, notifyMaxBackoff) {
		err := n.store.CreateNotifyGroup(ctx, n.cfg.Group)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		n.log.Error("cannot create the notification consumer group; retrying", AttrError, err, "retry_in", backoff)
		if sleep(ctx, backoff) != nil {
			return
		}
	}
	n.log.Info("webhook notifier started", "url", n.cfg.redactedURL(), "group", n.cfg.Group, "consumer", n.consumer)
	var lastClaim, lastPrune time.Time
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		now := time.Now()
		var err error
		if now.Sub(lastClaim) >= n.cfg.ClaimIdle {
			lastClaim = now
			err = n.claim(ctx)
		}
		if err == nil && now.Sub(lastPrune) >= pruneEvery {
			lastPrune = now
			if k, perr := n.store.PruneNotifyConsumers(ctx, n.cfg.Group, n.consumer, pruneIdle); perr != nil {
				n.log.Debug("could not prune idle notification consumers", AttrError, perr)
			} else if k > 0 {
				n.log.Info("pruned idle notification consumers", "count", k)
			}
		}
		if err == nil {
			var ns []retrystate.Notification
			ns, err = n.store.ReadNotifyGroup(ctx, n.cfg.Group, n.consumer, notifyBatch, notifyBlock)
			if err == nil {
				err = n.enqueue(ctx, ns)
			}
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			continue
		}
		if ctx.Err() != nil {
			return
		}
		// Entries read but not enqueued stay pending; claim takes them
		// up again once they are ClaimIdle old.
		n.log.Warn("webhook notifier: redis error; retrying", AttrError, err, "retry_in", backoff)
		if strings.Contains(err.Error(), "NOGROUP") { // the stream was deleted (a flushed Redis)
			if cerr := n.store.CreateNotifyGroup(ctx, n.cfg.Group); cerr != nil {
				n.log.Warn("cannot create the notification consumer group", AttrError, cerr)
			}
		}
		if sleep(ctx, backoff) != nil {
			return
		}
		backoff = min(2*backoff, notifyMaxBackoff)
	}
}

// claim takes over and enqueues the entries pending for ClaimIdle or more:
// those of dead consumers, and this one's that failed to enqueue.
func (n *Notifier) claim(ctx context.Context) error {
	cursor := "0-0"
	for {
		ns, next, err := n.store.ClaimNotifications(ctx, n.cfg.Group, n.consumer, n.cfg.ClaimIdle, cursor, notifyBatch)
		if err != nil {
			return err
		}
		if len(ns) > 0 {
			n.log.Info("claimed unacknowledged notifications", "count", len(ns))
		}
		if err := n.enqueue(ctx, ns); err != nil {
			return err
		}
		if next == "0-0" || next == "" || ctx.Err() != nil {
			return ctx.Err()
		}
		cursor = next
	}
}

// enqueue enqueues the delivery of each notification and acknowledges those
// enqueued. It stops at the first error: the rest stay pending.
func (n *Notifier) enqueue(ctx context.Context, ns []retrystate.Notification) error {
	done := make([]string, 0, len(ns))
	var err error
	for _, x := range ns {
		if err = n.enqueueOne(ctx, x); err != nil {
			break
		}
		done = append(done, x.ID)
	}
	if aerr := n.store.AckNotifications(ctx, n.cfg.Group, done...); aerr != nil && err == nil {
		err = aerr
	}
	return err
}

func (n *Notifier) enqueueOne(ctx context.Context, x retrystate.Notification) error {
	if x.Type == "" { // trimmed from the stream before it was delivered
		n.log.Warn("notification trimmed from the stream before delivery", "delivery", x.ID)
		return nil
	}
	if !n.cfg.wants(x.Type) {
		return nil
	}
	body, err := json.Marshal(Notification{ID: x.ID, Type: x.Type, At: x.At.UTC(), RunID: x.RunID,
		Workflow: x.Workflow, Details: x.Fields})
	if err != nil {
		return err
	}
	id := tasks.WebhookID(x.ID)
	_, err = n.client.EnqueueContext(ctx, asynq.NewTask(tasks.TypeWebhook, body),
		tasks.WebhookOptions(n.queue, id, n.cfg.MaxRetry)...)
	switch {
	case errors.Is(err, asynq.ErrTaskIDConflict):
		n.log.Debug("webhook delivery already enqueued", AttrRunID, x.RunID, "event", x.Type, "delivery", x.ID)
		return nil
	case err != nil:
		return fmt.Errorf("enqueue webhook delivery %s: %w", id, err)
	}
	n.log.Debug("webhook delivery enqueued", AttrRunID, x.RunID, "event", x.Type, "delivery", x.ID, AttrTaskID, id)
	return nil
}

// WebhookHandler is the asynq handler of tasks.TypeWebhook: it POSTs the
// task's notification to the webhook URL, signed. A network error, a 5xx,
// 408 or 429 is returned for asynq to retry (see WebhookRetryDelay); any
// other status but 2xx archives the delivery at once (asynq.SkipRetry).
type WebhookHandler struct {
	cfg WebhookConfig
	log *slog.Logger
}

// NewWebhookHandler returns the handler of webhook deliveries.
func NewWebhookHandler(cfg WebhookConfig, log *slog.Logger) (*WebhookHandler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &WebhookHandler{cfg: cfg.withDefaults(), log: log.With("component", "webhook")}, nil
}

// webhookRetryAfter asks for the next attempt after a delay the receiver
// named (Retry-After).
type webhookRetryAfter struct {
	after time.Duration
	err   error
}

func (e *webhookRetryAfter) Error() string { return e.err.Error() }
func (e *webhookRetryAfter) Unwrap() error { return e.err }

// ProcessTask delivers one notification.
func (h *WebhookHandler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	body := t.Payload()
	var note Notification
	if err := json.Unmarshal(body, &note); err != nil || note.ID == "" {
		h.log.Error("dropping a malformed webhook task", AttrError, err)
		return fmt.Errorf("malformed webhook payload: %w", asynq.SkipRetry)
	}
	retried, _ := asynq.GetRetryCount(ctx)
	log := h.log.With(AttrRunID, note.RunID, AttrWorkflow, note.Workflow, "event", note.Type,
		"delivery", note.ID, AttrAttempt, retried+1)
	ts := strconv.FormatInt(h.cfg.Clock.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.cfg.URL, bytes.NewReader(body))
	if err != nil {
		log.Error("cannot build the webhook request", AttrError, err)
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "cairn-webhook/1")
	req.Header.Set(HeaderWebhookEvent, note.Type)
	req.Header.Set(HeaderWebhookDelivery, note.ID)
	req.Header.Set(HeaderWebhookTimestamp, ts)
	req.Header.Set(HeaderWebhookSignature, SignWebhook(h.cfg.Secret, ts, body))
	start := time.Now()
	resp, err := h.cfg.HTTPClient.Do(req)
	if err != nil {
		log.Warn("webhook delivery failed; asynq will retry it", AttrError, err)
		return fmt.Errorf("webhook delivery %s: %w", note.ID, err)
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		log.Info("webhook delivered", "status", code, AttrDuration, time.Since(start))
		return nil
	case code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests:
		err := fmt.Errorf("webhook delivery %s: receiver answered %s: %s", note.ID, resp.Status, strings.TrimSpace(string(snippet)))
		log.Warn("webhook receiver failed; asynq will retry the delivery", "status", code)
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), h.cfg.Clock.Now()); ok {
			return &webhookRetryAfter{after: d, err: err}
		}
		return err
	default:
		log.Error("webhook receiver refused the delivery; not retried", "status", code,
			"response", strings.TrimSpace(string(snippet)))
		return fmt.Errorf("webhook delivery %s: receiver answered %s: %w", note.ID, resp.Status, asynq.SkipRetry)
	}
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return min(time.Duration(s)*time.Second, time.Hour), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), time.Hour), true
	}
	return 0, false
}

// WebhookRetryDelay is the asynq RetryDelayFunc of webhook deliveries: the
// receiver's Retry-After when it sent one (at most 1h), else exponential
// backoff from 1s doubling to at most 10m, with equal jitter.
func WebhookRetryDelay(n int, err error, _ *asynq.Task) time.Duration {
	var ra *webhookRetryAfter
	if errors.As(err, &ra) {
		return max(ra.after, time.Second)
	}
	d := min(time.Second<<min(n, 10), 10*time.Minute)
	return d/2 + time.Duration(randv2.Int64N(int64(d/2)+1))
}
