package e2e

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestMain runs four of the parallel tests at a time, not GOMAXPROCS (two
// on CI), unless -parallel is given: they spend most of their time waiting
// (for fences, leases, backoffs, processes and failovers), the package
// using about a quarter of two cores at two at a time. Four at a time take
// the package from about 130 s to about 80 s on two cores.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(max(4, runtime.GOMAXPROCS(0)))); err != nil {
			panic(err)
		}
	}
	testkit.Main(m)
}

// What the tests need that -short leaves out (testkit.SkipShort).
const (
	needsProcesses = "builds the worker binary and runs, kills and restarts worker and redis-server processes"
	needsChaos     = "runs the chaos suite, worker binaries and redis-server killed and restarted at random for a few minutes (make chaos runs the long version)"
	needsBrowser   = "builds the worker binary and drives its dashboard in a headless Chromium (apt-get install -y chromium)"
)

var ctxb = context.Background()

const workerPkg = "github.com/cairnhq/cairn/cmd/worker"

// workerEnv is the environment of a worker binary on srv and queue, with
// quick retries, plus extra settings. The HTTP API is off unless extra
// gives CAIRN_HTTP_ADDR (the last setting of a variable wins): the
// default, 127.0.0.1:8080, is a fixed port, which the workers of parallel
// tests, and whatever else runs on the machine, would contend for.
func workerEnv(srv *redistest.Server, queue string, extra ...string) []string {
	return append([]string{
		"CAIRN_REDIS_URL=" + srv.URL(),
		"CAIRN_QUEUE=" + queue,
		"CAIRN_HTTP_ADDR=",
		"CAIRN_LOG_LEVEL=debug",
		"CAIRN_LOG_FORMAT=text",
	}, extra...)
}

func startWorker(t *testing.T, bin string, env []string) *proctest.Proc {
	t.Helper()
	p := proctest.Start(t, bin, env)
	p.WaitForOutput(t, "worker started", 30*time.Second)
	return p
}

// startAPIWorker starts the worker binary bin on srv and queue with its
// HTTP API on a free loopback address and the browser tests' tokens
// (browserUserToken: alice, a user; browserAdminToken: root, an admin),
// plus extra settings, and waits until the API listens. It returns the
// worker, the API's base URL and a client of the queue.
func startAPIWorker(t *testing.T, bin string, srv *redistest.Server, queue string, extra ...string) (*proctest.Proc, string, *workflow.Client) {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(browserUserToken+" alice user\n"+browserAdminToken+" root admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	w := startWorker(t, bin, workerEnv(srv, queue, append([]string{"CAIRN_HTTP_ADDR=" + addr, "CAIRN_API_TOKENS_FILE=" + tokens},
		extra...)...))
	w.WaitForOutput(t, "HTTP API listening", 30*time.Second)
	return w, "http://" + addr, workflow.NewClient(srv.Client(t), workflow.ClientConfig{Queue: queue})
}
