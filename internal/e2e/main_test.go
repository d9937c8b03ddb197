package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/workflow"
)

func TestMain(m *testing.M) {
	code := m.Run()
	_ = redistest.StopShared()
	_ = proctest.RemoveBuilds()
	os.Exit(code)
}

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

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitRun(t *testing.T, c *workflow.Client, id string, timeout time.Duration) *workflow.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctxb, timeout)
	defer cancel()
	r, err := c.Wait(ctx, id, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("run %s did not finish: %v (last: %+v)", id, err, r)
	}
	return r
}

func count(evs []workflow.Event, typ, step string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ && (step == "" || e.Step == step) {
			n++
		}
	}
	return n
}
