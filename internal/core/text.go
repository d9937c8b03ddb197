package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Truncate cuts s to n bytes, marking the cut with an ellipsis.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// SleepContext waits d, or until ctx is done (its error).
func SleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// NewToken returns a random token of 24 hex digits.
func NewToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
