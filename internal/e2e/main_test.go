package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// What the tests need that -short leaves out (testkit.SkipShort).
const (
	needsProcesses = "builds the worker binary and runs, kills and restarts worker and redis-server processes"
	needsChaos     = "runs the chaos suite, worker binaries and redis-server killed and restarted at random for a few minutes (make chaos runs the long version)"
	needsBrowser   = "builds the worker binary and drives its dashboard in a headless Chromium (apt-get install -y chromium)"
)

var ctxb = context.Background()

const workerPkg = "github.com/cairnhq/cairn/cmd/worker"

// workerEnv is the environment of a worker binary on srv and queue, with
// quick retries, plus extra settings.
func workerEnv(srv *redistest.Server, queue string, extra ...string) []string {
	return append([]string{
		"CAIRN_REDIS_URL=" + srv.URL(),
		"CAIRN_QUEUE=" + queue,
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
