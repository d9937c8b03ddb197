package testkit

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address, "127.0.0.1:PORT", on which nothing
// listened a moment ago: for a server the test starts there, or for a
// client that must find nothing listening.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
