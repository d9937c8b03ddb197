// Package webhook is the receiving side of Cairn's webhooks: the headers of
// a delivery, its JSON body (Payload), and the signature that proves it
// came from a worker holding the webhook secret.
//
// A Cairn worker configured with a webhook URL POSTs each run notification
// (run_failed, run_succeeded, ...) to it, signed as the Standard Webhooks
// specification says (https://www.standardwebhooks.com/): the headers
// webhook-id (the notification's ID, the same on every attempt),
// webhook-timestamp (Unix seconds of the attempt) and webhook-signature
// ("v1," and the base64 HMAC-SHA256 of "id.timestamp.body"). Any Standard
// Webhooks library verifies them; in Go, a receiver calls VerifyRequest in
// its handler, or a Verifier's Verify on a body it read itself, and
// deduplicates on the ID: delivery is at least once.
//
// The secret is the worker's CAIRN_WEBHOOK_SECRET: "whsec_" and a base64
// key, the specification's form, or any other string, whose bytes are the
// key (see DecodeSecret). Deliveries also carry, for one more release,
// Cairn's earlier headers X-Cairn-Delivery, X-Cairn-Timestamp and
// X-Cairn-Signature (deprecated: see Sign), and X-Cairn-Event, the
// notification's type, which stays.
//
// The package imports only the standard library, so that a receiver does
// not depend on asynq, go-redis or the rest of Cairn. The sending side
// lives in the module's workflow package (workflow.WebhookConfig).
package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// HeaderEvent is the notification type (Payload.Type), sent with every
// delivery beside the Standard Webhooks headers: run_failed, run_succeeded,
// run_cancelled, run_recovered, run_needs_attention, run_compensating,
// run_compensated, group_rolled_back, or another Event* type the sender
// was configured to deliver. It is not signed; VerifyRequest checks that it
// agrees with the signed body.
const HeaderEvent = "X-Cairn-Event"

// Notification types (Payload.Type). A sender delivers the run-level ones,
// EventRunFailed to EventGroupRolledBack, unless configured otherwise.
const (
	EventRunFailed         = "run_failed"
	EventRunSucceeded      = "run_succeeded"
	EventRunCancelled      = "run_cancelled"
	EventRunRecovered      = "run_recovered"
	EventRunNeedsAttention = "run_needs_attention"
	// EventRunCompensating: a run whose workflow compensates (a saga)
	// failed for good, or was cancelled with compensation, and the
	// compensations of its succeeded steps run: "step", "code", "reason",
	// "group". A saga's failure sends it instead of run_failed.
	EventRunCompensating = "run_compensating"
	// EventRunCompensated: a saga's compensations all ran; the run ended
	// compensated: "code" and "reason" of the failure that started them.
	EventRunCompensated = "run_compensated"
	// EventGroupRolledBack: a step of an optional group failed, the group's
	// succeeded steps were compensated, and the run goes on after the
	// group: "group", "step", "code", "reason".
	EventGroupRolledBack = "group_rolled_back"
	// EventStepFailed is the step that failed a run (sent just before the
	// run's run_failed).
	EventStepFailed = "step_failed"
	// EventRetryScheduled is a failed step attempt that will be retried.
	EventRetryScheduled = "retry_scheduled"
	// EventRunWaiting is a run that began to wait, holding no worker
	// slot; Details["reason"] says for what: "signal" (an await: "step",
	// "signal", "until" in Unix ms) or "timer" (a sleep: "step", "until").
	EventRunWaiting = "run_waiting"
	// EventRunPaused and EventRunResumed: an operator paused the run (it
	// begins no new attempt) or resumed it: "actor". Delivered when
	// configured.
	EventRunPaused  = "run_paused"
	EventRunResumed = "run_resumed"
)

// Payload is the JSON body of a delivery: one notification of the queue's
// notification stream. workflow.Notification is this type.
type Payload struct {
	// ID is the notification's stream entry ID ("1712345678901-0"), also
	// sent as HeaderWebhookID (webhook-id): the same on every attempt to
	// deliver it.
	ID string `json:"id"`
	// Type is the notification type, also sent as HeaderEvent (see the
	// Event* constants).
	Type string `json:"type"`
	// At is when the run changed state.
	At time.Time `json:"at"`
	// RunID is the run's ID.
	RunID string `json:"run_id"`
	// Workflow is the name of the run's workflow.
	Workflow string `json:"workflow"`
	// Owner is empty in deliveries: they carry the run's owner, if any,
	// in Details["owner"]. (workflow.Client's notifications set it.)
	Owner string `json:"owner,omitempty"`
	// Details depend on Type: for run_failed "step", "attempt", "code",
	// "reason" and "message"; for run_needs_attention "code" and
	// "reason"; see workflow.Notification for all of them.
	Details map[string]string `json:"details,omitempty"`
}

// MaxBodyBytes is the largest body VerifyRequest reads. A delivery is a few
// kilobytes at most.
const MaxBodyBytes = 1 << 20

// DefaultMaxSkew is the tolerance of timestamps when none is given (a zero
// Verifier.Tolerance or VerifyRequest maxSkew): a delivery signed more than
// 5 minutes before or after the receiver's clock is refused.
const DefaultMaxSkew = 5 * time.Minute

// The errors of VerifyRequest and Verifier.Verify (with ErrMissingHeader,
// ErrTimestampTooOld, ErrTimestampTooNew and ErrInvalidSecret); test them
// with errors.Is. Whatever the error, answer the request with a 4xx other
// than 408 and 429 (401, say), so that the sender does not retry it. A
// sender that signs with another secret, or whose clock is off, is a
// configuration error to fix.
var (
	// ErrBodyTooLarge: the body is longer than MaxBodyBytes.
	ErrBodyTooLarge = errors.New("webhook: body too large")
	// ErrBadTimestamp: the timestamp header is not a Unix time in
	// seconds.
	ErrBadTimestamp = errors.New("webhook: malformed timestamp")
	// ErrBadSignature: no signature of the request signs its ID,
	// timestamp and body with the secret (or one of the secrets).
	ErrBadSignature = errors.New("webhook: bad signature")
	// ErrStaleTimestamp: the request is correctly signed, but its
	// timestamp is further than the allowed skew from the receiver's
	// clock: a replayed request, or a sender or receiver whose clock is
	// wrong. The error is ErrTimestampTooOld or ErrTimestampTooNew too.
	ErrStaleTimestamp = errors.New("webhook: timestamp outside the allowed window")
	// ErrBadPayload: the signed body is not a notification (malformed
	// JSON or no ID), or a header disagrees with it: webhook-id (signed)
	// or the unsigned HeaderEvent and HeaderDelivery.
	ErrBadPayload = errors.New("webhook: malformed payload")
)

// VerifyRequest reads the body of r (at most MaxBodyBytes) and checks that
// it is a delivery signed with secret at a time within maxSkew of now
// (maxSkew <= 0: DefaultMaxSkew; now is the receiver's clock, usually
// time.Now()): NewVerifier(secret) with Tolerance maxSkew, then
// Verifier.VerifyRequest.
func VerifyRequest(r *http.Request, secret string, maxSkew time.Duration, now time.Time) (Payload, error) {
	v, err := NewVerifier(secret)
	if err != nil {
		return Payload{}, err
	}
	v.Tolerance = maxSkew
	return v.VerifyRequest(r, now)
}

// VerifyRequest reads the body of r (at most MaxBodyBytes), verifies it as
// Verify does, and returns the delivery's notification, or an error that
// wraps one of ErrBodyTooLarge, ErrMissingHeader, ErrBadTimestamp,
// ErrBadSignature, ErrStaleTimestamp (ErrTimestampTooOld,
// ErrTimestampTooNew) and ErrBadPayload, or the error reading the body. It
// checks the signature before the timestamp's age, so ErrStaleTimestamp
// means a request that the holder of the secret did send, at another time,
// and the body last: the ID and type it holds must agree with the
// webhook-id, X-Cairn-Event and (if sent) X-Cairn-Delivery headers.
//
// A request without any Standard Webhooks header but with the deprecated
// X-Cairn-Signature (from a worker older than this package) is verified by
// that header, X-Cairn-Timestamp and X-Cairn-Delivery instead, until they
// are removed.
//
// VerifyRequest consumes r.Body. The caller still deduplicates on
// Payload.ID: delivery is at least once.
func (v *Verifier) VerifyRequest(r *http.Request, now time.Time) (Payload, error) {
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
		if err != nil {
			return Payload{}, fmt.Errorf("webhook: read body: %w", err)
		}
		if len(body) > MaxBodyBytes {
			return Payload{}, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, MaxBodyBytes)
		}
	}
	h := r.Header
	standard := h.Get(HeaderWebhookID) != "" || h.Get(HeaderWebhookTimestamp) != "" || h.Get(HeaderWebhookSignature) != ""
	var err error
	if standard || h.Get(HeaderSignature) == "" {
		err = v.Verify(h, body, now)
	} else {
		err = v.verifyLegacy(h, body, now)
	}
	if err != nil {
		return Payload{}, err
	}
	var p Payload
	if err := json.Unmarshal(body, &p); err != nil {
		return Payload{}, fmt.Errorf("%w: %w", ErrBadPayload, err)
	}
	for _, c := range []struct{ name, want string }{
		{HeaderWebhookID, p.ID}, {HeaderDelivery, p.ID}, {HeaderEvent, p.Type},
	} {
		if got := h.Get(c.name); got != "" && got != c.want {
			return Payload{}, fmt.Errorf("%w: %s %q, but the body says %q", ErrBadPayload, c.name, got, c.want)
		}
	}
	if p.ID == "" || p.Type == "" {
		return Payload{}, fmt.Errorf("%w: no id or type", ErrBadPayload)
	}
	return p, nil
}

// verifyLegacy verifies a request by the deprecated X-Cairn-Timestamp and
// X-Cairn-Signature headers, keyed with the secrets as given.
func (v *Verifier) verifyLegacy(h http.Header, body []byte, now time.Time) error {
	if err := missing(h, HeaderTimestamp, HeaderSignature); err != nil {
		return err
	}
	ts := h.Get(HeaderTimestamp)
	at, err := parseUnix(HeaderTimestamp, ts)
	if err != nil {
		return err
	}
	ok := false
	for _, secret := range v.legacy {
		ok = Verify(secret, ts, body, h.Get(HeaderSignature)) || ok
	}
	if !ok {
		return fmt.Errorf("%w: %s does not match the secret", ErrBadSignature, HeaderSignature)
	}
	return v.checkAge(at, now)
}
