package e2e

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestRecoveryNotified: automatic recovery is not silent. A worker process
// is killed with SIGKILL mid-step and another resumes the run: SSE
// subscribers and the webhook receiver get run_recovered (by reconciler,
// kind crashed_attempt). The second worker is killed too, and with
// CAIRN_MAX_AUTO_RECOVERIES=1 the run is left for an operator: both get
// run_needs_attention.
func TestRecoveryNotified(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	bin := proctest.Build(t, workerPkg)
	const (
		queue  = "notified"
		secret = "e2e-secret"
	)
	rdb := srv.Client(t)
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue})

	rcvURL, hooks := hookReceiver(t, secret, func(int) int { return http.StatusOK })
	var mu sync.Mutex // guards streamed

	// The event stream, from a dashboard server of the test's own.
	ds, err := dashboard.New(dashboard.Config{Client: client, Redis: rdb, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(ds.Handler())
	t.Cleanup(api.Close)
	var streamed []workflow.Notification
	resp, err := http.Get(api.URL + "/api/v1/events")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("event stream: %v %v", resp, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var n workflow.Notification
				if json.Unmarshal([]byte(data), &n) == nil {
					mu.Lock()
					streamed = append(streamed, n)
					mu.Unlock()
				}
			}
		}
	}()
	// seen waits for a notification of the run on both channels.
	seen := func(runID, typ string, match func(workflow.Notification) bool) {
		t.Helper()
		testkit.Eventually(t, 60*time.Second, typ+" on the event stream and the webhook", func() bool {
			mu.Lock()
			defer mu.Unlock()
			onStream, onHook := false, false
			for _, n := range streamed {
				onStream = onStream || (n.RunID == runID && n.Type == typ && match(n))
			}
			for _, h := range hooks() {
				onHook = onHook || (h.verified && h.event == typ && h.note.RunID == runID && match(h.note))
			}
			return onStream && onHook
		})
	}

	env := workerEnv(srv, queue, "CAIRN_LOG_LEVEL=info", "CAIRN_HTTP_ADDR=", "CAIRN_FENCE_TTL=5s",
		"CAIRN_MAX_AUTO_RECOVERIES=1", "CAIRN_WEBHOOK_URL="+rcvURL, "CAIRN_WEBHOOK_SECRET="+secret)
	a := startWorker(t, bin, env)
	a.WaitForOutput(t, "webhook notifier started", 30*time.Second)
	run, err := client.Start(ctxb, demo.Name, demo.Input{StepSleepMS: 120_000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = client.Cancel(ctxb, run.ID, nil) })
	running := func(what string) {
		t.Helper()
		testkit.Eventually(t, 60*time.Second, what, func() bool {
			r, err := client.Get(ctxb, run.ID)
			return err == nil && r.Step("fetch").Status == workflow.StepRunning
		})
	}
	running("fetch to be running")

	b := startWorker(t, bin, env)
	a.Kill(t)
	seen(run.ID, workflow.NotifyRunRecovered, func(n workflow.Notification) bool {
		return n.Details["by"] == "reconciler" && n.Details["kind"] == "crashed_attempt" && n.Details["step"] == "fetch"
	})
	// The reconciler notifies when it repairs the run, before the other
	// worker's resumed attempt has started: wait for that attempt.
	testkit.Eventually(t, 60*time.Second, "the run to be resumed on the other worker", func() bool {
		evs, err := client.Events(ctxb, run.ID)
		ev := lastEvent(evs, workflow.EventAttemptStarted)
		return err == nil && ev != nil && ev.Details["resumed"] == "1"
	})
	running("fetch to run again")

	startWorker(t, bin, env)
	b.Kill(t)
	seen(run.ID, workflow.NotifyRunNeedsAttention, func(n workflow.Notification) bool {
		return n.Details["code"] == "auto_recovery_exhausted"
	})
	if r, err := client.Get(ctxb, run.ID); err != nil || !r.NeedsAttention {
		t.Fatalf("after the second kill: %+v %v", r, err)
	}
}

func lastEvent(evs []workflow.Event, typ string) *workflow.Event {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return &evs[i]
		}
	}
	return nil
}
