// Package webhookdelivery sends Cairn's webhooks: the Notifier turns the
// queue's notification stream into asynq tasks of type tasks.TypeWebhook,
// and the Handler POSTs each, signed, to the configured URL.
//
// It is the sending side; package webhook (which it uses for the headers,
// the body and the signature) is the receiving side. The name says what it
// does, beside the engine: it delivers. It is internal because its
// constructors take the engine's parts (a retrystate.Store, an
// asynq.Client); users configure it through package workflow
// (workflow.WebhookConfig, WorkerConfig.Webhook) and a Worker runs it
// (engine.NewNotifier, engine.NewWebhookHandler). It does not import
// workflow or the engine, which run it.
package webhookdelivery

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"time"

	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/webhook"
)

// DefaultGroup is the consumer group of the notification stream that
// webhook delivery reads with.
const DefaultGroup = "webhooks"

// DefaultEvents are the notification types webhooks deliver unless
// Config.Events says otherwise: the run-level events, and the saga events
// that report a failure without a run_failed (run_compensating,
// run_compensated, group_rolled_back). The step-level events (step_failed,
// retry_scheduled, run_waiting) are delivered when configured.
var DefaultEvents = []string{webhook.EventRunFailed, webhook.EventRunSucceeded, webhook.EventRunCancelled,
	webhook.EventRunRecovered, webhook.EventRunNeedsAttention, webhook.EventRunCompensating,
	webhook.EventRunCompensated, webhook.EventGroupRolledBack}

// Clock tells the time: of the signature, of the notifier's claim and prune
// schedule, of a Retry-After date. workflow.Clock values are Clocks.
type Clock interface {
	Now() time.Time
}

// systemClock is the wall clock, the default Clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() } //nolint:forbidigo // the default clock

// Config configures webhook notifications: each entry of the queue's
// notification stream (run failed, recovered, succeeded, cancelled, needs
// attention, compensating, compensated, group rolled back) is POSTed,
// signed, to URL. A zero field takes the default given
// in its comment.
type Config struct {
	// URL receives the notifications (http or https). Required.
	URL string
	// Secret keys the HMAC-SHA256 signature of each delivery (the
	// Standard Webhooks webhook-signature header). Required. "whsec_" and
	// a base64 key, the specification's form, or any other string, whose
	// bytes are the key (webhook.DecodeSecret). The deprecated
	// X-Cairn-Signature header, still sent, is keyed with Secret's bytes
	// as given.
	Secret string
	// PreviousSecrets also sign every delivery, while receivers move from
	// them to Secret (a rotation): webhook-signature then lists one
	// signature per secret, and a receiver that knows any of them accepts
	// it. Remove them once every receiver has Secret.
	PreviousSecrets []string
	// Events are the notification types to deliver; others are skipped.
	// Default DefaultEvents (workflow.DefaultWebhookEvents).
	Events []string
	// MaxRetry is how often a failed delivery is retried, with exponential
	// backoff from 1s to 10m, before asynq archives it. Default
	// tasks.DefaultWebhookMaxRetry (20: about 2 hours).
	MaxRetry int
	// HTTPClient sends the requests. Default: a client with a 10s timeout
	// that does not follow redirects, on a transport of its own (a clone
	// of http.DefaultTransport: another part of the process closing the
	// default transport's idle connections does not break a delivery).
	HTTPClient *http.Client
	// Group is the stream's consumer group. Default DefaultGroup
	// (workflow.DefaultWebhookGroup).
	Group string
	// ClaimIdle: an entry read by a consumer (a worker process) and not
	// acknowledged for this long is taken over by another consumer, so a
	// killed worker's entries are delivered. Default 5s. Taking over an
	// entry whose delivery is already enqueued is harmless: the delivery's
	// task ID is derived from the entry.
	ClaimIdle time.Duration
	// Clock tells the time of the signature and schedules the notifier's
	// claims. Default the wall clock (a Worker passes its own Clock).
	Clock Clock
}

// Validate checks the URL, that a secret is set, and that the secrets are
// valid (webhook.DecodeSecret).
func (c Config) Validate() error {
	if err := ValidateURL(c.URL); err != nil {
		return err
	}
	if c.Secret == "" {
		return errors.New("webhook: a secret is required to sign deliveries")
	}
	if _, err := webhook.DecodeSecret(c.Secret); err != nil {
		return fmt.Errorf("webhook secret: %w", err)
	}
	for i, s := range c.PreviousSecrets {
		if _, err := webhook.DecodeSecret(s); err != nil {
			return fmt.Errorf("webhook previous secret %d: %w", i+1, err)
		}
	}
	for _, ev := range c.Events {
		if !eventNameRE.MatchString(ev) {
			return fmt.Errorf("webhook: event type %q: want a name like run_failed", ev)
		}
	}
	return nil
}

var eventNameRE = regexp.MustCompile(`^[a-z][a-z_]*$`)

// ValidateURL checks that s is an absolute http or https URL with a host.
func ValidateURL(s string) error {
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

// withDefaults fills in the zero fields: the one place of the defaults.
func (c Config) withDefaults() Config {
	if c.MaxRetry <= 0 {
		c.MaxRetry = tasks.DefaultWebhookMaxRetry
	}
	if c.HTTPClient == nil {
		transport := http.DefaultTransport
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			transport = t.Clone()
		}
		c.HTTPClient = &http.Client{
			Transport: transport,
			Timeout:   10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse // a redirected POST would become a GET
			},
		}
	}
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.ClaimIdle <= 0 {
		c.ClaimIdle = 5 * time.Second
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	if len(c.Events) == 0 {
		c.Events = DefaultEvents
	}
	return c
}

func (c Config) wants(typ string) bool {
	return slices.Contains(c.Events, typ)
}

// redactedURL is the URL without its password and query, for logs.
func (c Config) redactedURL() string {
	u, err := url.Parse(c.URL)
	if err != nil {
		return ""
	}
	u.RawQuery = ""
	return u.Redacted()
}

// Log attribute keys: the values of workflow's Attr* constants, so that
// webhook logs read like the engine's.
const (
	attrRunID    = "run_id"
	attrWorkflow = "workflow"
	attrAttempt  = "attempt"
	attrTaskID   = "task_id"
	attrError    = "error"
	attrDuration = "duration"
)
