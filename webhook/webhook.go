// Package webhook is the receiving side of Cairn's webhooks: the headers of
// a delivery, its JSON body (Payload), and the signature that proves it
// came from a worker holding the webhook secret.
//
// A Cairn worker configured with a webhook URL POSTs each run notification
// (run_failed, run_succeeded, ...) to it, signed with HMAC-SHA256. A
// service that receives them calls VerifyRequest in its handler, or Verify
// on a body it read itself, and deduplicates on Payload.ID: delivery is at
// least once.
//
// The package imports only the standard library, so that a receiver does
// not depend on asynq, go-redis or the rest of Cairn. The sending side
// lives in the module's workflow package (workflow.WebhookConfig).
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery. The body is the JSON of a Payload.
const (
	// HeaderEvent is the notification type (Payload.Type): run_failed,
	// run_succeeded, run_cancelled, run_recovered, run_needs_attention,
	// run_compensating, run_compensated, group_rolled_back, or another
	// Event* type the sender was configured to deliver.
	HeaderEvent = "X-Cairn-Event"
	// HeaderDelivery identifies the notification (its stream entry ID,
	// Payload.ID); it is the same on every attempt to deliver it.
	// Receivers deduplicate on it: delivery is at least once.
	HeaderDelivery = "X-Cairn-Delivery"
	// HeaderTimestamp is the Unix time, in seconds, of this attempt.
	HeaderTimestamp = "X-Cairn-Timestamp"
	// HeaderSignature is SignaturePrefix and the hex HMAC-SHA256, keyed
	// with the webhook secret, of the timestamp, ".", and the body (see
	// Sign).
	HeaderSignature = "X-Cairn-Signature"
)

// SignaturePrefix starts every HeaderSignature value: it names the
// signature's algorithm.
const SignaturePrefix = "sha256="

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
)

// Payload is the JSON body of a delivery: one notification of the queue's
// notification stream. workflow.Notification is this type.
type Payload struct {
	// ID is the notification's stream entry ID ("1712345678901-0"), also
	// sent as HeaderDelivery: the same on every attempt to deliver it.
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

// Sign returns the HeaderSignature value of a delivery: SignaturePrefix and
// the hex HMAC-SHA256, keyed with secret, of timestamp (the HeaderTimestamp
// value), ".", and body.
func Sign(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return SignaturePrefix + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether header (the HeaderSignature value) signs timestamp
// (the HeaderTimestamp value) and body with secret. It compares in constant
// time, and verifies nothing when secret or timestamp is empty. Receivers
// should also reject a timestamp too far from their clock, so that a
// captured request cannot be replayed later, and deduplicate on the
// delivery ID; VerifyRequest does the first.
func Verify(secret, timestamp string, body []byte, header string) bool {
	if secret == "" || timestamp == "" || !strings.HasPrefix(header, SignaturePrefix) {
		return false
	}
	return hmac.Equal([]byte(Sign(secret, timestamp, body)), []byte(header))
}

// MaxBodyBytes is the largest body VerifyRequest reads. A delivery is a few
// kilobytes at most.
const MaxBodyBytes = 1 << 20

// DefaultMaxSkew is the timestamp window VerifyRequest uses when given none:
// a delivery signed more than 5 minutes before or after the receiver's
// clock is refused.
const DefaultMaxSkew = 5 * time.Minute

// The errors of VerifyRequest; test them with errors.Is. Whatever the
// error, answer the request with a 4xx other than 408 and 429 (401, say),
// so that the sender does not retry it. A sender that signs with another
// secret, or whose clock is off, is a configuration error to fix.
var (
	// ErrBodyTooLarge: the body is longer than MaxBodyBytes.
	ErrBodyTooLarge = errors.New("webhook: body too large")
	// ErrBadTimestamp: the HeaderTimestamp header is missing or is not a
	// Unix time in seconds.
	ErrBadTimestamp = errors.New("webhook: missing or malformed timestamp")
	// ErrBadSignature: the HeaderSignature header is missing or does not
	// sign the timestamp and body with the secret.
	ErrBadSignature = errors.New("webhook: bad signature")
	// ErrStaleTimestamp: the request is correctly signed, but its
	// timestamp is further than the allowed skew from the receiver's
	// clock: a replayed request, or a sender or receiver whose clock is
	// wrong.
	ErrStaleTimestamp = errors.New("webhook: timestamp outside the allowed window")
	// ErrBadPayload: the signed body is not a notification (malformed
	// JSON or no ID), or the HeaderDelivery or HeaderEvent header, which
	// are not signed, disagrees with it.
	ErrBadPayload = errors.New("webhook: malformed payload")
)

// VerifyRequest reads the body of r (at most MaxBodyBytes) and checks that
// it is a delivery signed with secret at a time within maxSkew of now
// (maxSkew <= 0: DefaultMaxSkew; now is the receiver's clock, usually
// time.Now()). It returns the delivery's notification, or an error that
// wraps one of ErrBodyTooLarge, ErrBadTimestamp, ErrBadSignature,
// ErrStaleTimestamp and ErrBadPayload, or the error reading the body. It
// checks the signature before the timestamp's age, so ErrStaleTimestamp
// means a request that the holder of the secret did send, at another time.
//
// VerifyRequest consumes r.Body. The caller still deduplicates on
// Payload.ID: delivery is at least once.
func VerifyRequest(r *http.Request, secret string, maxSkew time.Duration, now time.Time) (Payload, error) {
	if maxSkew <= 0 {
		maxSkew = DefaultMaxSkew
	}
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
	ts := r.Header.Get(HeaderTimestamp)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return Payload{}, fmt.Errorf("%w: %s %q", ErrBadTimestamp, HeaderTimestamp, ts)
	}
	if !Verify(secret, ts, body, r.Header.Get(HeaderSignature)) {
		return Payload{}, ErrBadSignature
	}
	if skew := now.Sub(time.Unix(sec, 0)); skew > maxSkew || skew < -maxSkew {
		return Payload{}, fmt.Errorf("%w: signed at %s, %s from now (at most %s allowed)", ErrStaleTimestamp,
			time.Unix(sec, 0).UTC().Format(time.RFC3339), skew.Abs().Round(time.Second), maxSkew)
	}
	var p Payload
	if err := json.Unmarshal(body, &p); err != nil {
		return Payload{}, fmt.Errorf("%w: %w", ErrBadPayload, err)
	}
	switch {
	case p.ID == "" || p.Type == "":
		return Payload{}, fmt.Errorf("%w: no id or type", ErrBadPayload)
	case r.Header.Get(HeaderDelivery) != "" && r.Header.Get(HeaderDelivery) != p.ID:
		return Payload{}, fmt.Errorf("%w: %s %q, but the body's id is %q", ErrBadPayload, HeaderDelivery,
			r.Header.Get(HeaderDelivery), p.ID)
	case r.Header.Get(HeaderEvent) != "" && r.Header.Get(HeaderEvent) != p.Type:
		return Payload{}, fmt.Errorf("%w: %s %q, but the body's type is %q", ErrBadPayload, HeaderEvent,
			r.Header.Get(HeaderEvent), p.Type)
	}
	return p, nil
}
