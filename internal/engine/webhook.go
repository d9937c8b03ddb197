package engine

import (
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/webhookdelivery"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/webhook"
)

// Webhooks: a Worker with WorkerConfig.Webhook set POSTs the queue's
// notifications, signed as the Standard Webhooks specification says, to a
// URL. Delivery lives in internal/webhookdelivery, whose names these are;
// receivers use package webhook (standard library only) to verify what
// they get: its headers are webhook.HeaderWebhookID,
// webhook.HeaderWebhookTimestamp and webhook.HeaderWebhookSignature.

// Webhook headers of Cairn's own. The body is the JSON of a Notification
// (webhook.Payload).
const (
	// HeaderWebhookEvent is the notification type: run_failed,
	// run_succeeded, run_cancelled, run_recovered, run_needs_attention.
	HeaderWebhookEvent = webhook.HeaderEvent
	// HeaderWebhookDelivery is X-Cairn-Delivery, the notification's ID.
	//
	// Deprecated: use webhook.HeaderWebhookID (webhook-id), which has the
	// same value; X-Cairn-Delivery is sent for one more release.
	HeaderWebhookDelivery = webhook.HeaderDelivery //nolint:staticcheck // the deprecated alias of a deprecated name
	// HeaderWebhookTimestamp is X-Cairn-Timestamp, the Unix time, in
	// seconds, of this attempt.
	//
	// Deprecated: use webhook.HeaderWebhookTimestamp (webhook-timestamp),
	// which has the same value; X-Cairn-Timestamp is sent for one more
	// release.
	HeaderWebhookTimestamp = webhook.HeaderTimestamp //nolint:staticcheck // the deprecated alias of a deprecated name
	// HeaderWebhookSignature is X-Cairn-Signature: "sha256=" and the hex
	// HMAC-SHA256, keyed with the webhook secret, of the timestamp, ".",
	// and the body.
	//
	// Deprecated: use webhook.HeaderWebhookSignature (webhook-signature),
	// the Standard Webhooks signature; X-Cairn-Signature is sent for one
	// more release.
	HeaderWebhookSignature = webhook.HeaderSignature //nolint:staticcheck // the deprecated alias of a deprecated name
)

// DefaultWebhookGroup is the consumer group of the notification stream that
// webhook delivery reads with.
const DefaultWebhookGroup = webhookdelivery.DefaultGroup

// Notification types delivered by webhooks by default.
const (
	NotifyRunFailed         = webhook.EventRunFailed
	NotifyRunSucceeded      = webhook.EventRunSucceeded
	NotifyRunCancelled      = webhook.EventRunCancelled
	NotifyRunRecovered      = webhook.EventRunRecovered
	NotifyRunNeedsAttention = webhook.EventRunNeedsAttention
	NotifyRunCompensating   = webhook.EventRunCompensating
	NotifyRunCompensated    = webhook.EventRunCompensated
	NotifyGroupRolledBack   = webhook.EventGroupRolledBack
)

// DefaultWebhookEvents are the notification types webhooks deliver unless
// WebhookConfig.Events says otherwise: the run-level events.
var DefaultWebhookEvents = webhookdelivery.DefaultEvents

// WebhookConfig configures webhook notifications: each entry of the queue's
// notification stream (run failed, recovered, succeeded, cancelled, needs
// attention, compensating, compensated, group rolled back) is POSTed,
// signed (Standard Webhooks), to URL. Its Validate method checks it.
//
// URL (http or https) and Secret (the key of the HMAC-SHA256 signatures:
// "whsec_" and a base64 key, or any other string, whose bytes are the key;
// see webhook.DecodeSecret) are required; PreviousSecrets also sign every
// delivery while a secret is rotated. The other fields default when zero: Events (the types
// delivered) to DefaultWebhookEvents; MaxRetry (retries of a failed
// delivery, with backoff from 1s to 10m) to tasks.DefaultWebhookMaxRetry,
// 20, about 2 hours; HTTPClient to a client with a 10s timeout that does
// not follow redirects; Group (of the stream) to DefaultWebhookGroup;
// ClaimIdle (after which an entry another worker read and did not
// acknowledge is taken over) to 5s; Clock (of the signatures and the claim
// schedule) to the wall clock, in a Worker to its EngineConfig.Clock.
type WebhookConfig = webhookdelivery.Config

// ValidateWebhookURL checks that s is an absolute http or https URL with a
// host.
func ValidateWebhookURL(s string) error { return webhookdelivery.ValidateURL(s) }

// SignWebhook returns the X-Cairn-Signature value of a delivery:
// "sha256=" and the hex HMAC-SHA256, keyed with secret, of timestamp, ".",
// and body.
//
// Deprecated: X-Cairn-Signature is sent for one more release; use
// webhook.Signer, the Standard Webhooks signature.
func SignWebhook(secret, timestamp string, body []byte) string {
	return webhook.Sign(secret, timestamp, body)
}

// VerifyWebhookSignature reports whether header (the X-Cairn-Signature
// value) signs timestamp (the X-Cairn-Timestamp value) and body with secret.
// It compares in constant time.
//
// Deprecated: X-Cairn-Signature is sent for one more release; use
// webhook.VerifyRequest, webhook.VerifyHeaders or a webhook.Verifier, which
// check the Standard Webhooks signature and the timestamp's age, from a
// package that imports only the standard library.
func VerifyWebhookSignature(secret, timestamp string, body []byte, header string) bool {
	return webhook.Verify(secret, timestamp, body, header)
}

// Notifier turns the queue's notification stream into webhook deliveries:
// one asynq task of type tasks.TypeWebhook per entry, delivered at least
// once, whatever crashes (see the README's Webhooks section). A Worker with
// WorkerConfig.Webhook set runs one and handles its tasks with a
// WebhookHandler; use them directly with an asynq server of your own.
type Notifier = webhookdelivery.Notifier

// NewNotifier returns a notifier of the queue's notifications in rdb that
// enqueues their deliveries on the same queue ("": DefaultQueue).
func NewNotifier(rdb redis.UniversalClient, queue string, cfg WebhookConfig, log *slog.Logger) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if queue == "" {
		queue = DefaultQueue
	}
	return webhookdelivery.NewNotifier(retrystate.New(rdb, queue), asynq.NewClientFromRedisClient(rdb), queue, cfg, log), nil
}

// WebhookHandler is the asynq handler of tasks.TypeWebhook: it POSTs the
// task's notification to the webhook URL, signed. A network error, a 5xx,
// 408 or 429 is returned for asynq to retry (see WebhookRetryDelay); any
// other status but 2xx archives the delivery at once (asynq.SkipRetry).
type WebhookHandler = webhookdelivery.Handler

// NewWebhookHandler returns the handler of webhook deliveries.
func NewWebhookHandler(cfg WebhookConfig, log *slog.Logger) (*WebhookHandler, error) {
	return webhookdelivery.NewHandler(cfg, log)
}

// WebhookRetryDelay is the asynq RetryDelayFunc of webhook deliveries: the
// receiver's Retry-After when it sent one (at most 1h), else exponential
// backoff from 1s doubling to at most 10m, with equal jitter.
func WebhookRetryDelay(n int, err error, t *asynq.Task) time.Duration {
	return webhookdelivery.RetryDelay(n, err, t)
}
