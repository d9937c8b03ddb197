package main

import (
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/testkit"
)

// TestBusyHTTPAddressSetExits1: an address the operator set in
// CAIRN_HTTP_ADDR that the worker cannot listen on stops it with exit code
// 1, before it starts, with a message that names the variable and what to
// do.
func TestBusyHTTPAddressSetExits1(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	env := append(baseEnv(testkit.FreeAddr(t)), "CAIRN_HTTP_ADDR="+addr)
	_, stderr, code := proctest.Run(t, worker(t), env, "")
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

// TestBusyDefaultHTTPAddressWarns: with CAIRN_HTTP_ADDR unset, the default
// address being busy is a warning that names the variable; the worker runs
// on without its HTTP API.
func TestBusyDefaultHTTPAddressWarns(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	if _, set := os.LookupEnv("CAIRN_HTTP_ADDR"); set {
		t.Skip("CAIRN_HTTP_ADDR is set in the test's environment: the worker cannot be started without it")
	}
	// Hold the default address; if another process holds it, it is busy
	// all the same.
	ln, err := net.Listen("tcp", dashboard.DefaultAddr)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
	case err != nil:
		t.Fatal(err)
	default:
		defer ln.Close()
	}
	env := slices.DeleteFunc(baseEnv(testkit.FreeAddr(t)), func(kv string) bool {
		return strings.HasPrefix(kv, "CAIRN_HTTP_ADDR=")
	})
	p := proctest.Start(t, worker(t), env)
	p.WaitForOutputFrom(t, 0, "worker started", waitTimeout)
	out := p.Output()
	var warning string
	for l := range strings.SplitSeq(out, "\n") {
		if strings.Contains(l, "HTTP API not started") {
			warning = l
		}
	}
	if !strings.Contains(warning, "level=WARN") || !strings.Contains(warning, dashboard.DefaultAddr) ||
		!strings.Contains(warning, "set CAIRN_HTTP_ADDR to another address, or to an empty value to turn the HTTP server off") {
		t.Errorf("no warning naming the address and CAIRN_HTTP_ADDR:\n%s", out)
	}
	p.Signal(t, syscall.SIGTERM)
	if code := p.Wait(t, waitTimeout); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0\n%s", code, p.Output())
	}
}
