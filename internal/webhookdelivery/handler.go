package webhookdelivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	randv2 "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/webhook"
)

// Handler is the asynq handler of tasks.TypeWebhook: it POSTs the task's
// notification to the webhook URL, signed as the Standard Webhooks
// specification says (webhook-id, webhook-timestamp, webhook-signature),
// with the deprecated X-Cairn-* signature headers too for one release. A network error, a 5xx, 408 or
// 429 is returned for asynq to retry (see RetryDelay); any other status but
// 2xx archives the delivery at once (asynq.SkipRetry).
type Handler struct {
	cfg    Config
	signer *webhook.Signer
	log    *slog.Logger
}

// NewHandler returns the handler of webhook deliveries; a nil log is
// slog.Default().
func NewHandler(cfg Config, log *slog.Logger) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	signer, err := webhook.NewSigner(append([]string{cfg.Secret}, cfg.PreviousSecrets...)...)
	if err != nil {
		return nil, err
	}
	return &Handler{cfg: cfg.withDefaults(), signer: signer, log: log.With("component", "webhook")}, nil
}

// retryAfter asks for the next attempt after a delay the receiver named
// (Retry-After).
type retryAfter struct {
	after time.Duration
	err   error
}

func (e *retryAfter) Error() string { return e.err.Error() }
func (e *retryAfter) Unwrap() error { return e.err }

// ProcessTask delivers one notification.
func (h *Handler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	retried, _ := asynq.GetRetryCount(ctx)
	return h.Deliver(ctx, t.Payload(), retried)
}

// Deliver is ProcessTask for a processor that is not asynq's (a Worker's
// own dequeue): body is the task's payload, retried how often asynq's
// record says it was retried. Its error means what ProcessTask's means.
func (h *Handler) Deliver(ctx context.Context, body []byte, retried int) error {
	var note webhook.Payload
	if err := json.Unmarshal(body, &note); err != nil || note.ID == "" {
		h.log.Error("dropping a malformed webhook task", attrError, err)
		return fmt.Errorf("malformed webhook payload: %w", asynq.SkipRetry)
	}
	log := h.log.With(attrRunID, note.RunID, attrWorkflow, note.Workflow, "event", note.Type,
		"delivery", note.ID, attrAttempt, retried+1)
	now := h.cfg.Clock.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.cfg.URL, bytes.NewReader(body))
	if err == nil {
		// The Standard Webhooks headers: webhook-id is the notification's
		// ID, the same on every attempt.
		err = h.signer.SetHeaders(req.Header, note.ID, now, body)
	}
	if err != nil {
		log.Error("cannot build the webhook request", attrError, err)
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "cairn-webhook/1")
	req.Header.Set(webhook.HeaderEvent, note.Type)
	// Cairn's earlier headers, deprecated, for one more release: receivers
	// that check them keep working while they move to the standard ones.
	ts := strconv.FormatInt(now.Unix(), 10)
	req.Header.Set(webhook.HeaderDelivery, note.ID)                               //nolint:staticcheck // deprecated, still sent for one release
	req.Header.Set(webhook.HeaderTimestamp, ts)                                   //nolint:staticcheck // deprecated, still sent for one release
	req.Header.Set(webhook.HeaderSignature, webhook.Sign(h.cfg.Secret, ts, body)) //nolint:staticcheck // deprecated, still sent for one release
	start := h.cfg.Clock.Now()
	resp, err := h.cfg.HTTPClient.Do(req)
	if err != nil {
		log.Warn("webhook delivery failed; asynq will retry it", attrError, err)
		return fmt.Errorf("webhook delivery %s: %w", note.ID, err)
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		log.Info("webhook delivered", "status", code, attrDuration, h.cfg.Clock.Now().Sub(start))
		return nil
	case code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests:
		err := fmt.Errorf("webhook delivery %s: receiver answered %s: %s", note.ID, resp.Status, strings.TrimSpace(string(snippet)))
		log.Warn("webhook receiver failed; asynq will retry the delivery", "status", code)
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), h.cfg.Clock.Now()); ok {
			return &retryAfter{after: d, err: err}
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

// RetryDelay is the asynq RetryDelayFunc of webhook deliveries: the
// receiver's Retry-After when it sent one (at most 1h), else exponential
// backoff from 1s doubling to at most 10m, with equal jitter.
func RetryDelay(n int, err error, _ *asynq.Task) time.Duration {
	if ra, ok := errors.AsType[*retryAfter](err); ok {
		return max(ra.after, time.Second)
	}
	d := min(time.Second<<min(n, 10), 10*time.Minute)
	return d/2 + time.Duration(randv2.Int64N(int64(d/2)+1))
}
