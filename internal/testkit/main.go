package testkit

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
)

// Main is the TestMain of a test package that starts goroutines:
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
//
// It runs the tests, stops the shared redis-server ([redistest.Shared]) and
// removes the binaries built with [proctest.Build], if any; then, if the
// tests passed, it fails the run if goroutines are left over
// (go.uber.org/goleak, which waits a little for goroutines on their way
// out), listing their stacks. A goroutine a dependency keeps by design can
// be let through with ignore (goleak.IgnoreTopFunction and the like), with
// a comment saying why it is not a leak; none is needed today: workers,
// clients, servers and streams the tests start all end with their tests.
func Main(m *testing.M, ignore ...goleak.Option) {
	goleak.VerifyTestMain(afterRun{m}, ignore...)
}

// afterRun is m, whose Run also releases what the tests shared, before
// goleak looks for goroutines: the shared redis-server's process has one.
type afterRun struct{ m *testing.M }

func (r afterRun) Run() int {
	code := r.m.Run()
	if err := redistest.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if err := proctest.RemoveBuilds(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return code
}
