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

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/cmd/internal/config"
	"github.com/cairnhq/cairn/internal/demo"
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
// the demo workflow (CAIRN_DEMO), plus extra settings. The HTTP API is off unless extra
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
		"CAIRN_DEMO=true",
	}, extra...)
}

// workerConfig is the configuration a worker binary started with env
// reads (its defaults and env's settings): the tests derive their time
// bounds from it, so that a bound follows the settings it depends on.
func workerConfig(t *testing.T, env []string) config.Config {
	t.Helper()
	cfg, err := config.Load(env)
	if err != nil {
		t.Fatalf("the workers' environment: %v", err)
	}
	return cfg
}

// The reconciler's settings that the worker binary leaves at their
// defaults (workflow.ReconcilerConfig), which some tests' bounds include.
const (
	// outageGrace: after a call of the reconciler to Redis failed or took
	// more than a second (as calls can on a loaded machine), expired
	// fences and stalled deliveries wait this long.
	outageGrace = 5 * time.Second
	// stalledAfter: a dequeued task whose lease no worker has extended
	// for this long is given a new dispatch.
	stalledAfter = 8 * time.Second
	// stalledEvery: a sweep with nothing else to do reads asynq's leases
	// for stalled deliveries at most this often.
	stalledEvery = 2 * time.Second
)

// asynqFallback is the earliest asynq's own lease recovery redelivers the
// task of a worker that stopped extending its lease (it died, or never got
// its dequeue's reply): the lease (30s, extended every 5s while the worker
// lives) must have expired 30s before its recoverer, which runs every
// minute, takes the task: at least 55s after the worker stopped (60s after
// a dequeue whose reply was lost). Cairn's reconciler exists to act well
// before; a test whose bound lets it pass at this figure cannot tell the
// reconciler's repair from asynq's.
const asynqFallback = 30*time.Second + 30*time.Second - 5*time.Second

// dueCeiling is how late a due task (a retry, a timer) may start on a
// worker with cfg, counted from its due time or the worker's start,
// whichever is later: asynq's schedule keeps whole seconds (1s), then its
// forwarder moves the task to the queue (every DelayedTaskCheckInterval)
// and a fetch takes it (every TaskCheckInterval when idle); ten times each,
// and 2s for a loaded machine's scheduling (5.2s with the defaults). A due
// task that waited for the reconciler's pass (every ReconcileInterval, 30s)
// rather than the forwarder misses it.
func dueCeiling(cfg config.Config) time.Duration {
	return time.Second + 10*(cfg.DelayedTaskCheckInterval+cfg.TaskCheckInterval) + 2*time.Second
}

// readAudit returns the audit records (demo.AuditKey) that the step bodies
// of runID on queue wrote, in order; all runs' when runID is "".
func readAudit(t *testing.T, rdb redis.UniversalClient, queue, runID string) []demo.AuditEntry {
	t.Helper()
	raw, err := rdb.LRange(ctxb, demo.AuditKey(queue), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []demo.AuditEntry
	seen := make(map[string]bool, len(raw))
	for _, s := range raw {
		// A body writes each record until Redis acknowledges it, and the
		// client retries too: a push whose reply was lost to a Redis restart
		// is written twice. A record names its process and nanosecond, so
		// identical entries are one record.
		if seen[s] {
			continue
		}
		seen[s] = true
		a, err := demo.ParseAudit(s)
		if err != nil {
			t.Fatal(err)
		}
		if runID == "" || a.RunID == runID {
			out = append(out, a)
		}
	}
	return out
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
