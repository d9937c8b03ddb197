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
