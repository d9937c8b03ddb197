package workerapp

import (
	"net"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/testkit"
)

// TestBusyHTTPAddressSetExits1: an address the operator set in
// CAIRN_HTTP_ADDR that the worker cannot listen on stops it with exit code
// 1, before it starts, with a message that names the variable and what to
// do.
func TestBusyHTTPAddressSetExits1(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	_, stderr, code := runMain(t, append(testEnv(testkit.FreeAddr(t)), "CAIRN_HTTP_ADDR="+addr))
	if code != 1 {
		t.Errorf("exit code %d, want 1\nstderr:\n%s", code, stderr)
	}
	for _, want := range []string{"CAIRN_HTTP_ADDR=" + addr, "address already in use",
		"set CAIRN_HTTP_ADDR to another address, or to an empty value to turn the HTTP server off"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "worker started") {
		t.Errorf("the worker started without its HTTP API:\n%s", stderr)
	}
}

func TestDashboardURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr *net.TCPAddr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, "http://127.0.0.1:8080/"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8080}, "http://127.0.0.1:8080/"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 9090}, "http://[::1]:9090/"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 80}, "http://[::1]:80/"},
		{&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080}, "http://10.1.2.3:8080/"},
		{&net.TCPAddr{Port: 8080}, "http://127.0.0.1:8080/"},
	} {
		if got := dashboardURL(tc.addr); got != tc.want {
			t.Errorf("dashboardURL(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}
