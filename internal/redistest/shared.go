package redistest

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

var shared struct {
	mu      sync.Mutex
	started bool // Shared has run its start attempt
	srv     *Server
	err     error
}

// Shared returns the test binary's shared server, starting it on first use.
// It is never killed, stopped or restarted by tests (those methods fail the
// test when called on it), and its data is shared by all tests of the
// binary, so use keys unique to the test. If the server could not be
// started, every caller fails with the same reason.
//
// Use [Main] (or [StopShared]) in TestMain so the server is stopped and its data directory
// removed when the tests finish; otherwise the server still dies with the
// test binary but its directory is left in os.TempDir().
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.started {
		shared.started = true
		shared.srv, shared.err = startShared()
	}
	if shared.err != nil {
		t.Fatalf("redistest: shared server: %v", shared.err)
	}
	return shared.srv
}

func startShared() (*Server, error) {
	bin, err := findServer()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-shared-")
	if err != nil {
		return nil, err
	}
	s := newServer(bin, dir, nil)
	s.shared = true
	if err := s.startFreePort(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// Main runs the tests, calls [StopShared], then fails the run if the tests
// left goroutines running (go.uber.org/goleak), and exits with the tests'
// exit code. Call it from TestMain:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
//
// Packages whose tests may import internal/testkit use testkit.Main, which
// also removes built binaries.
func Main(m *testing.M) {
	goleak.VerifyTestMain(stopAfter{m})
}

// stopAfter is m, whose Run also stops the shared server, before goleak
// looks for goroutines.
type stopAfter struct{ m *testing.M }

func (r stopAfter) Run() int {
	code := r.m.Run()
	if err := StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return code
}

// StopShared stops the shared server, if one was started, and removes its
// data directory. It is for a TestMain that cannot use [Main], and must only
// be called after m.Run has returned.
func StopShared() error {
	shared.mu.Lock()
	s := shared.srv
	shared.mu.Unlock()
	if s == nil {
		return nil
	}
	err := s.stop()
	if err != nil {
		_ = s.kill()
	}
	if rmErr := os.RemoveAll(s.dir); err == nil {
		err = rmErr
	}
	return err
}
