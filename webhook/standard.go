package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of the Standard Webhooks specification
// (https://www.standardwebhooks.com/), which every delivery carries. Any
// library that implements it verifies Cairn's deliveries. The
// specification writes them in lower case (webhook-id, webhook-timestamp,
// webhook-signature); HTTP header names are case-insensitive, and these are
// the canonical forms, the keys of an http.Header.
const (
	// HeaderWebhookID identifies the message: the notification's ID
	// (Payload.ID), the same on every attempt to deliver it. Receivers
	// deduplicate on it: delivery is at least once.
	HeaderWebhookID = "Webhook-Id"
	// HeaderWebhookTimestamp is the Unix time, in seconds, of this
	// attempt.
	HeaderWebhookTimestamp = "Webhook-Timestamp"
	// HeaderWebhookSignature is a space-separated list of signatures, each
	// "v1," and the standard base64 of the HMAC-SHA256, keyed with a
	// secret's key (see DecodeSecret), of the webhook-id value, ".", the
	// webhook-timestamp value, ".", and the body. A sender rotating its
	// secret signs with the old and the new one; one valid signature is
	// enough.
	HeaderWebhookSignature = "Webhook-Signature"
)

// SecretPrefix starts a secret in the Standard Webhooks form: the prefix,
// then the key in standard base64, as the specification's libraries
// produce and read it ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").
const SecretPrefix = "whsec_"

// signatureVersion names HMAC-SHA256 signatures in HeaderWebhookSignature.
const signatureVersion = "v1"

// ErrInvalidSecret is the error of a secret that is empty, or that starts
// with SecretPrefix and is not followed by base64.
var ErrInvalidSecret = errors.New("webhook: invalid secret")

// DecodeSecret returns the HMAC-SHA256 key of a secret. A secret that starts
// with SecretPrefix ("whsec_") is the prefix and the key in standard base64
// (padded or not), the Standard Webhooks form. Any other secret is its own
// key: its bytes, as they are. So the raw secret s and "whsec_" followed by
// the base64 of s (EncodeSecret([]byte(s))) are the same key; give the
// latter to a Standard Webhooks library that wants a whsec_ secret.
func DecodeSecret(secret string) ([]byte, error) {
	rest, prefixed := strings.CutPrefix(secret, SecretPrefix)
	if !prefixed {
		if secret == "" {
			return nil, fmt.Errorf("%w: empty", ErrInvalidSecret)
		}
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(rest)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: what follows %s is not standard base64", ErrInvalidSecret, SecretPrefix)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: an empty key after %s", ErrInvalidSecret, SecretPrefix)
	}
	return key, nil
}

// EncodeSecret returns key in the Standard Webhooks form: SecretPrefix and
// its standard base64. DecodeSecret returns key from it.
func EncodeSecret(key []byte) string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// decodeSecrets decodes each secret; there must be at least one.
func decodeSecrets(secrets []string) ([][]byte, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: no secret", ErrInvalidSecret)
	}
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		k, err := DecodeSecret(s)
		if err != nil {
			if len(secrets) > 1 {
				return nil, fmt.Errorf("secret %d: %w", i+1, err)
			}
			return nil, err
		}
		keys[i] = k
	}
	return keys, nil
}

// mac returns the base64 HMAC-SHA256 of "id.timestamp.body" keyed with key.
func mac(key []byte, id, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Signer signs messages as the Standard Webhooks specification says, with
// one secret, or several while a secret is rotated. The worker signs its
// deliveries with one; a receiver's tests can sign requests with one.
type Signer struct {
	keys [][]byte
}

// NewSigner returns a signer with the secrets given (at least one; see
// DecodeSecret for their forms): each signs every message.
func NewSigner(secrets ...string) (*Signer, error) {
	keys, err := decodeSecrets(secrets)
	if err != nil {
		return nil, err
	}
	return &Signer{keys: keys}, nil
}

// checkID refuses a message ID the signed content could not delimit.
func checkID(id string) error {
	if id == "" || strings.ContainsAny(id, ". \t\r\n") {
		return fmt.Errorf("webhook: message ID %q: want a non-empty ID without '.' or spaces", id)
	}
	return nil
}

// Sign returns the HeaderWebhookSignature value of a message: for each
// secret, "v1," and the base64 HMAC-SHA256 of id, ".", the Unix seconds of
// timestamp, ".", and body; space-separated. The id must be non-empty,
// without '.' or spaces (the specification's rule: the signed content is
// delimited by '.').
func (s *Signer) Sign(id string, timestamp time.Time, body []byte) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	ts := strconv.FormatInt(timestamp.Unix(), 10)
	sigs := make([]string, len(s.keys))
	for i, k := range s.keys {
		sigs[i] = signatureVersion + "," + mac(k, id, ts, body)
	}
	return strings.Join(sigs, " "), nil
}

// SetHeaders sets the three Standard Webhooks headers of a message in h:
// HeaderWebhookID (id), HeaderWebhookTimestamp (the Unix seconds of
// timestamp) and HeaderWebhookSignature (Sign).
func (s *Signer) SetHeaders(h http.Header, id string, timestamp time.Time, body []byte) error {
	sig, err := s.Sign(id, timestamp, body)
	if err != nil {
		return err
	}
	h.Set(HeaderWebhookID, id)
	h.Set(HeaderWebhookTimestamp, strconv.FormatInt(timestamp.Unix(), 10))
	h.Set(HeaderWebhookSignature, sig)
	return nil
}

// The errors of Verify beside ErrBadSignature and ErrBadTimestamp; test
// them with errors.Is.
var (
	// ErrMissingHeader: a request lacks webhook-id, webhook-timestamp or
	// webhook-signature (the error names which).
	ErrMissingHeader = errors.New("webhook: missing header")
	// ErrTimestampTooOld: a correctly signed message whose timestamp is
	// more than the tolerance before the receiver's clock: a replay, or a
	// clock that is wrong. It is an ErrStaleTimestamp.
	ErrTimestampTooOld = fmt.Errorf("%w: too old", ErrStaleTimestamp)
	// ErrTimestampTooNew: a correctly signed message whose timestamp is
	// more than the tolerance after the receiver's clock: a clock that is
	// wrong. It is an ErrStaleTimestamp.
	ErrTimestampTooNew = fmt.Errorf("%w: too new", ErrStaleTimestamp)
)

// Verifier checks the Standard Webhooks signature of messages: that one of
// the signatures of webhook-signature was made with one of its secrets,
// over webhook-id, webhook-timestamp and the body, and that the timestamp
// is close to the receiver's clock. Give it the old and the new secret
// while the sender's is rotated. It is safe for concurrent use.
type Verifier struct {
	// Tolerance is how far a message's timestamp may be from the
	// receiver's clock, either way; DefaultMaxSkew (5 minutes) when zero.
	Tolerance time.Duration

	keys   [][]byte
	legacy []string // the secrets as given: the keys of X-Cairn-Signature
}

// NewVerifier returns a verifier of messages signed with any of the
// secrets given (at least one; see DecodeSecret for their forms).
func NewVerifier(secrets ...string) (*Verifier, error) {
	keys, err := decodeSecrets(secrets)
	if err != nil {
		return nil, err
	}
	return &Verifier{keys: keys, legacy: append([]string(nil), secrets...)}, nil
}

// VerifyHeaders checks that header signs body with secret and that its
// timestamp is within DefaultMaxSkew of now (the receiver's clock, usually
// time.Now()): NewVerifier(secret), then Verifier.Verify.
func VerifyHeaders(secret string, header http.Header, body []byte, now time.Time) error {
	v, err := NewVerifier(secret)
	if err != nil {
		return err
	}
	return v.Verify(header, body, now)
}

// parseUnix reads a timestamp header: a Unix time in seconds, decimal
// digits only.
func parseUnix(name, s string) (time.Time, error) {
	if s == "" || len(s) > 15 || strings.Trim(s, "0123456789") != "" {
		return time.Time{}, fmt.Errorf("%w: %s %q: want Unix seconds", ErrBadTimestamp, name, s)
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s %q: want Unix seconds", ErrBadTimestamp, name, s)
	}
	return time.Unix(sec, 0), nil
}

// missing returns an ErrMissingHeader naming the headers of names that h
// lacks, or nil.
func missing(h http.Header, names ...string) error {
	var absent []string
	for _, n := range names {
		if h.Get(n) == "" {
			absent = append(absent, n)
		}
	}
	if len(absent) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrMissingHeader, strings.Join(absent, ", "))
}

// Verify checks a message: header has webhook-id, webhook-timestamp and
// webhook-signature, one of the v1 signatures of webhook-signature (others,
// such as v1a, are skipped) signs the id, the timestamp and body with one
// of the verifier's secrets, compared in constant time, and the timestamp
// is within the Tolerance of now (the receiver's clock, usually
// time.Now()). It returns nil, or an error that wraps ErrMissingHeader,
// ErrBadTimestamp (not Unix seconds), ErrBadSignature, ErrTimestampTooOld
// or ErrTimestampTooNew (both ErrStaleTimestamp), checked in that order:
// an ErrStaleTimestamp is a message the holder of a secret did send, at
// another time.
//
// Verify does not look at the body: VerifyRequest also checks that it is a
// Cairn notification. The receiver still deduplicates on webhook-id.
func (v *Verifier) Verify(header http.Header, body []byte, now time.Time) error {
	if err := missing(header, HeaderWebhookID, HeaderWebhookTimestamp, HeaderWebhookSignature); err != nil {
		return err
	}
	id, ts := header.Get(HeaderWebhookID), header.Get(HeaderWebhookTimestamp)
	at, err := parseUnix(HeaderWebhookTimestamp, ts)
	if err != nil {
		return err
	}
	if err := v.checkSignatures(id, ts, body, header.Get(HeaderWebhookSignature)); err != nil {
		return err
	}
	return v.checkAge(at, now)
}

// checkSignatures reports ErrBadSignature unless one of the v1 signatures
// of sigs signs id, ts and body with one of the keys.
func (v *Verifier) checkSignatures(id, ts string, body []byte, sigs string) error {
	if len(v.keys) == 0 {
		return fmt.Errorf("%w: the verifier has no secret (use NewVerifier)", ErrBadSignature)
	}
	want := make([][]byte, len(v.keys))
	for i, k := range v.keys {
		want[i] = []byte(mac(k, id, ts, body))
	}
	v1 := 0
	for entry := range strings.FieldsSeq(sigs) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != signatureVersion {
			continue
		}
		v1++
		for _, w := range want {
			if hmac.Equal(w, []byte(sig)) {
				return nil
			}
		}
	}
	if v1 == 0 {
		return fmt.Errorf("%w: no v1 signature in %s", ErrBadSignature, HeaderWebhookSignature)
	}
	return fmt.Errorf("%w: none of the %d v1 signatures matches the secret", ErrBadSignature, v1)
}

// checkAge reports a timestamp further than the tolerance from now.
func (v *Verifier) checkAge(at, now time.Time) error {
	tolerance := v.Tolerance
	if tolerance <= 0 {
		tolerance = DefaultMaxSkew
	}
	skew := now.Sub(at)
	var err error
	switch {
	case skew > tolerance:
		err = ErrTimestampTooOld
	case skew < -tolerance:
		err = ErrTimestampTooNew
	default:
		return nil
	}
	return fmt.Errorf("%w: signed at %s, %s from now (at most %s allowed)", err,
		at.UTC().Format(time.RFC3339), skew.Abs().Round(time.Second), tolerance)
}
