package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// The headers of Cairn's own signature scheme, which came before the
// Standard Webhooks headers. Deliveries still carry them, beside the
// standard ones, for one more release, so that receivers that check them
// keep working; they will then be removed.
const (
	// HeaderDelivery is the notification's ID, the value of
	// HeaderWebhookID.
	//
	// Deprecated: use HeaderWebhookID.
	HeaderDelivery = "X-Cairn-Delivery"
	// HeaderTimestamp is the Unix time, in seconds, of this attempt, the
	// value of HeaderWebhookTimestamp.
	//
	// Deprecated: use HeaderWebhookTimestamp.
	HeaderTimestamp = "X-Cairn-Timestamp"
	// HeaderSignature is SignaturePrefix and the hex HMAC-SHA256, keyed
	// with the webhook secret's bytes as configured (a whsec_ secret
	// included, undecoded), of the timestamp, ".", and the body (see Sign).
	// It does not sign the delivery ID.
	//
	// Deprecated: use HeaderWebhookSignature, which Verifier checks.
	HeaderSignature = "X-Cairn-Signature"
)

// SignaturePrefix starts every HeaderSignature value: it names the
// signature's algorithm.
//
// Deprecated: the prefix of the deprecated HeaderSignature.
const SignaturePrefix = "sha256="

// Sign returns the HeaderSignature value of a delivery: SignaturePrefix and
// the hex HMAC-SHA256, keyed with secret's bytes (not decoded, whsec_ or
// not), of timestamp (the HeaderTimestamp value), ".", and body.
//
// Deprecated: the deprecated X-Cairn-Signature header's scheme; use
// Signer, whose signatures are the Standard Webhooks ones.
func Sign(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return SignaturePrefix + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether header (the HeaderSignature value) signs timestamp
// (the HeaderTimestamp value) and body with secret. It compares in constant
// time, and verifies nothing when secret or timestamp is empty. It does not
// check the timestamp's age.
//
// Deprecated: the deprecated X-Cairn-Signature header's scheme; use
// VerifyHeaders or a Verifier, which check the Standard Webhooks headers
// and the timestamp's age, or VerifyRequest.
func Verify(secret, timestamp string, body []byte, header string) bool {
	if secret == "" || timestamp == "" || !strings.HasPrefix(header, SignaturePrefix) {
		return false
	}
	return hmac.Equal([]byte(Sign(secret, timestamp, body)), []byte(header))
}
