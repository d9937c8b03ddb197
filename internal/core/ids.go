package core

import (
	"crypto/rand"
	"time"
)

// Run IDs are 26 characters of lowercase Crockford base32: 10 for the
// creation time in milliseconds, 16 for 80 random bits. They sort by
// creation time, contain no '-' (asynqmon truncates task IDs there) and are
// safe in Redis keys and URLs.
const (
	RunIDLen      = 26
	crockford     = "0123456789abcdefghjkmnpqrstvwxyz"
	RunIDTimeLen  = 10
	runIDRandBits = 80
)

// CrockfordIndex maps a byte to its value in Crockford's base 32 (-1: none).
var CrockfordIndex = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := range len(crockford) {
		t[crockford[i]] = int8(i)
	}
	return t
}()

// NewRunID returns a new run ID created at t.
func NewRunID(t time.Time) string {
	var b [RunIDLen]byte
	ms := uint64(t.UnixMilli())
	for i := RunIDTimeLen - 1; i >= 0; i-- {
		b[i] = crockford[ms&31]
		ms >>= 5
	}
	var r [runIDRandBits / 8]byte
	if _, err := rand.Read(r[:]); err != nil {
		panic("cairn: crypto/rand: " + err.Error()) // never fails on Linux
	}
	// 80 bits -> 16 characters of 5 bits.
	var acc uint64
	bits, j := 0, RunIDTimeLen
	for _, x := range r {
		acc = acc<<8 | uint64(x)
		bits += 8
		for bits >= 5 {
			bits -= 5
			b[j] = crockford[(acc>>uint(bits))&31]
			j++
		}
	}
	return string(b[:])
}

// ValidRunID reports whether s has the form of a run ID.
func ValidRunID(s string) bool {
	if len(s) != RunIDLen {
		return false
	}
	for i := range len(s) {
		if CrockfordIndex[s[i]] < 0 {
			return false
		}
	}
	return true
}

// RunIDTime returns the creation time in run ID id (to the millisecond);
// false when id is not a run ID.
func RunIDTime(id string) (time.Time, bool) {
	if !ValidRunID(id) {
		return time.Time{}, false
	}
	var ms int64
	for i := range RunIDTimeLen {
		ms = ms<<5 | int64(CrockfordIndex[id[i]])
	}
	return time.UnixMilli(ms), true
}
