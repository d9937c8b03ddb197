package tasks

import (
	"strings"
	"time"

	"github.com/hibiken/asynq"
)

// TypeWebhook is the asynq task type of a webhook delivery: one entry of the
// queue's notification stream, POSTed to the configured URL. Its payload is
// the JSON body to send.
const TypeWebhook = "cairn:webhook"

// DefaultWebhookMaxRetry is how often asynq retries a webhook delivery that
// failed (a network error, a 5xx, 408 or 429) before archiving it.
const DefaultWebhookMaxRetry = 20

// WebhookRetention is how long asynq keeps a delivered webhook task. While it
// is kept, enqueueing the same delivery again is a no-op
// (asynq.ErrTaskIDConflict), so a notifier that crashed between enqueueing a
// delivery and acknowledging its stream entry does not deliver it twice.
const WebhookRetention = 24 * time.Hour

// WebhookTimeout is asynq's timeout of one delivery attempt; it outlasts the
// HTTP client's own timeout.
const WebhookTimeout = time.Minute

// WebhookID returns the deterministic task ID of the delivery of the
// notification stream entry entryID ("1712345678901-0"): "wh_1712345678901_0".
// Stream IDs contain '-', which asynqmon truncates at, so it becomes '_'.
func WebhookID(entryID string) string {
	return "wh_" + strings.ReplaceAll(entryID, "-", "_")
}

// WebhookOptions returns the asynq options of a webhook delivery task: its
// queue, its ID, its retry budget, its timeout and its retention (see
// WebhookRetention).
func WebhookOptions(queue, id string, maxRetry int) []asynq.Option {
	return []asynq.Option{
		asynq.Queue(queue),
		asynq.TaskID(id),
		asynq.MaxRetry(maxRetry),
		asynq.Timeout(WebhookTimeout),
		asynq.Retention(WebhookRetention),
	}
}
