package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestSnoozeSurvivesWorkerKill: a YAML http step polls a loopback server
// every 3s; its worker is killed (SIGKILL) while the step is snoozed. The
// snooze is in Redis, its task scheduled in asynq: a new worker sends the
// next request no earlier than the interval after the one before, the step
// succeeds once the server says done, as one attempt with no retry spent.
func TestSnoozeSurvivesWorkerKill(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	var mu sync.Mutex
	var hits []time.Time
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		hits = append(hits, time.Now())
		n := len(hits)
		mu.Unlock()
		status := "running"
		if n >= 3 {
			status = "done"
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, fmt.Sprintf(`{"status": %q}`, status))
	}))
	defer api.Close()
	path := filepath.Join(t.TempDir(), "workflows.yaml")
	src := fmt.Sprintf(`workflows:
  poll:
    resiliency: {retry: {max_attempts: 1}, max_iterations: 20}
    steps:
      - name: job
        type: http
        with:
          method: GET
          url: "%s/job"
          poll: {until: '{{eq .output.body.status "done"}}', interval: 3s}
`, api.URL)
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	bin := proctest.Build(t, workerPkg)
	const queue = "loops"
	env := workerEnv(srv, queue, "CAIRN_WORKFLOWS_FILE="+path)
	client := workflow.NewClient(srv.Client(t), workflow.ClientConfig{Queue: queue})

	a := startWorker(t, bin, env)
	run, err := client.Start(ctxb, "poll", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Premise(t, 20*time.Second, "the first snooze", func() bool {
		r, err := client.Get(ctxb, run.ID)
		return err == nil && r.Step("job").Snoozed
	})
	a.Kill(t)
	b := startWorker(t, bin, env)
	final := testkit.WaitRun(t, client, run.ID, 60*time.Second)
	if final.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s: %s\n%s", final.Status, final.FailureReason, b.Output())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hits) != 3 {
		t.Errorf("%d requests, want 3", len(hits))
	}
	for i := 1; i < len(hits); i++ {
		if gap := hits[i].Sub(hits[i-1]); gap < 3*time.Second {
			t.Errorf("request %d came %s after the one before, within the poll interval", i+1, gap)
		}
	}
	if s := final.Step("job"); s.Attempts != 1 || s.RetryAttempts != 0 || s.Snoozes != 2 {
		t.Errorf("job: %d attempts, %d retries, %d snoozes; want 1, 0, 2", s.Attempts, s.RetryAttempts, s.Snoozes)
	}
}
