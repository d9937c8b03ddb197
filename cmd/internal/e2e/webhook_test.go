package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/webhook"
	"github.com/cairnhq/cairn/workflow"
)

// hookRequest is one request the test's webhook receiver got.
type hookRequest struct {
	delivery, event string
	verified        bool
	note            workflow.Notification
	status          int
}

// hookReceiver starts a webhook receiver for the test: it records each
// request, checking its signature with secret, and answers the n-th (from 0)
// with status(n). requests returns what it got so far.
func hookReceiver(t *testing.T, secret string, status func(n int) int) (url string, requests func() []hookRequest) {
	t.Helper()
	var (
		mu   sync.Mutex
		reqs []hookRequest
	)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		// The Standard Webhooks headers verify; the deprecated X-Cairn-*
		// ones, still sent, agree.
		id, ts := r.Header.Get(webhook.HeaderWebhookID), r.Header.Get(webhook.HeaderWebhookTimestamp)
		legacy := r.Header.Get("X-Cairn-Delivery") == id && r.Header.Get("X-Cairn-Timestamp") == ts &&
			webhook.Verify(secret, ts, body, r.Header.Get("X-Cairn-Signature")) //nolint:staticcheck // the deprecated header is still sent
		h := hookRequest{delivery: id, event: r.Header.Get(workflow.HeaderWebhookEvent),
			verified: webhook.VerifyHeaders(secret, r.Header, body, time.Now()) == nil && legacy}
		_ = json.Unmarshal(body, &h.note)
		mu.Lock()
		defer mu.Unlock()
		h.status = status(len(reqs))
		reqs = append(reqs, h)
		w.WriteHeader(h.status)
	}))
	t.Cleanup(rcv.Close)
	return rcv.URL, func() []hookRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]hookRequest(nil), reqs...)
	}
}

// TestWebhookSurvivesWorkerKill: a run fails permanently and its worker is
// killed with SIGKILL once the failure is recorded, before the webhook can
// have been delivered: the receiver fails the first request, and every
// request until the kill. A new worker process delivers the signed
// run_failed event: one delivery ID, answered 2xx once.
func TestWebhookSurvivesWorkerKill(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	bin := proctest.Build(t, workerPkg)
	const (
		queue  = "webhook"
		secret = "e2e-secret"
	)

	// Until the first worker is dead, no delivery succeeds, however long
	// the kill takes on a loaded machine; nor does the first, whenever it
	// comes.
	var killed atomic.Bool
	rcvURL, requests := hookReceiver(t, secret, func(n int) int {
		if n == 0 || !killed.Load() {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})

	env := workerEnv(srv, queue, "CAIRN_WEBHOOK_URL="+rcvURL+"/hooks/cairn", "CAIRN_WEBHOOK_SECRET="+secret)
	rdb := srv.Client(t)
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue})

	w1 := startWorker(t, bin, env)
	// The notifier creates its consumer group at start; wait for it, so
	// that the group exists before the run's notification is written.
	w1.WaitForOutput(t, "webhook notifier started", 30*time.Second)
	run, err := client.Start(ctxb, demo.Name, demo.Input{FailStep: "fetch", Permanent: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Premise(t, 30*time.Second, "the run to fail", func() bool {
		r, err := client.Get(ctxb, run.ID)
		return err == nil && r.Status == workflow.StatusFailed
	})
	w1.Kill(t)
	killed.Store(true)

	w2 := startWorker(t, bin, env)
	var delivered hookRequest
	testkit.Eventually(t, 120*time.Second, "a successful delivery", func() bool {
		for _, r := range requests() {
			if r.status < 300 {
				delivered = r
				return true
			}
		}
		return false
	})
	// Wait until nothing more can be delivered: the delivery task is
	// complete and no notification is left unacknowledged.
	store := retrystate.New(rdb, queue)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	testkit.Eventually(t, 30*time.Second, "the delivery to be settled", func() bool {
		info, err := insp.GetTaskInfo(queue, tasks.WebhookID(delivered.delivery))
		if err != nil || info.State != asynq.TaskStateCompleted {
			return false
		}
		n, err := store.NotifyPending(ctxb, workflow.DefaultWebhookGroup)
		return err == nil && n == 0
	})

	all := requests()
	successes := map[string]int{}
	for i, r := range all {
		if !r.verified {
			t.Errorf("request %d (%s): the signature does not verify", i, r.delivery)
		}
		if r.event != workflow.NotifyRunFailed || r.note.Type != workflow.NotifyRunFailed || r.note.RunID != run.ID {
			t.Errorf("request %d: event %q, body %+v; want only run_failed of run %s", i, r.event, r.note, run.ID)
		}
		if r.delivery != all[0].delivery || r.note.ID != r.delivery {
			t.Errorf("request %d: delivery ID %q (body %q), want %q on every attempt", i, r.delivery, r.note.ID, all[0].delivery)
		}
		if r.status < 300 {
			successes[r.delivery]++
		}
	}
	if len(all) < 2 || all[0].status != http.StatusInternalServerError {
		t.Errorf("%d requests; want the failed first one and a retry", len(all))
	}
	if len(successes) != 1 {
		t.Errorf("%d distinct deliveries succeeded, want exactly 1: %v", len(successes), successes)
	}
	if delivered.note.Details["code"] != workflow.CodePermanentError || delivered.note.Details["step"] != "fetch" {
		t.Errorf("delivered details %v, want code permanent_error at step fetch", delivered.note.Details)
	}
	t.Logf("%d requests, %d successful, delivery %s; new worker output tail:\n%s", len(all), successes[delivered.delivery],
		delivered.delivery, tailLines(w2.Output(), 5))
}
