package e2e

import (
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestWorkerWaitsForRedis: a worker started while Redis is unreachable keeps
// retrying with backoff and says so; it neither exits nor gives up, and it
// works once Redis is back.
func TestWorkerWaitsForRedis(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true})
	srv.Stop(t)
	bin := proctest.Build(t, workerPkg)
	const queue = "redisdown"
	w := proctest.Start(t, bin, workerEnv(srv, queue, "CAIRN_LOG_LEVEL=info"))
	off := w.WaitForOutputFrom(t, 0, "cannot publish workflow definitions; is Redis reachable? retrying", 30*time.Second)
	w.WaitForOutputFrom(t, off, "cannot publish workflow definitions", 30*time.Second) // it keeps trying
	if w.Exited() {
		t.Fatal("the worker exited while Redis was down")
	}
	srv.Restart(t)
	w.WaitForOutput(t, "worker started", 60*time.Second)
	client := workflow.NewClient(srv.Client(t), workflow.ClientConfig{Queue: queue})
	run, err := client.Start(ctxb, demo.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := testkit.WaitRun(t, client, run.ID, 30*time.Second); r.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.FailureReason)
	}
}
