package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestCircuitBreakerAcrossWorkers: two worker processes run http steps
// against a loopback dependency that fails its first 10 requests (503) and
// then recovers, behind one circuit breaker of threshold 3. The dependency
// reads the breaker's state from Redis as each request arrives, so its log
// says what the breaker was then: no request comes while the breaker is
// open (but for the attempts already on their way when it opened), and
// each half-open period lets exactly one probe through, whichever worker
// sends it. The breaker opened once plus once per failed probe; every run
// succeeded, with one attempt more than its failures (deferrals spend no
// attempt), and some attempts were deferred.
func TestCircuitBreakerAcrossWorkers(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	srv := redistest.Start(t, nil)
	rdb := srv.Client(t)
	const queue = "breakers"
	bk := "cairn:{" + queue + "}:breaker:dep"

	type request struct {
		state, probe string
		openFor      time.Duration // how long the breaker had been open
	}
	var (
		mu   sync.Mutex
		log  []request
		fail = 10
	)
	dep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := rdb.HMGet(r.Context(), bk, "state", "probe", "changed_at").Val()
		req := request{}
		if s, ok := h[0].(string); ok {
			req.state = s
		}
		if s, ok := h[1].(string); ok {
			req.probe = s
		}
		if s, ok := h[2].(string); ok && req.state == "open" {
			if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
				req.openFor = time.Since(time.UnixMilli(ms))
			}
		}
		mu.Lock()
		log = append(log, req)
		failing := fail > 0
		fail--
		mu.Unlock()
		if failing {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(dep.Close)

	file := filepath.Join(t.TempDir(), "workflows.yaml")
	yaml := fmt.Sprintf(`workflows:
  call-dep:
    resiliency:
      retry: {max_attempts: 12, initial_delay: 50ms, max_delay: 50ms, jitter: none}  # more than the 10 failures: one run may probe every time
      circuit_breaker: {name: dep, failure_threshold: 3, window: 1m, cooldown: 1s, max_cooldown: 1500ms}
    steps:
      - {name: call, type: http, with: {method: GET, url: "%s/status"}}
`, dep.URL)
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := proctest.Build(t, workerPkg)
	env := workerEnv(srv, queue, "CAIRN_WORKFLOWS_FILE="+file, "CAIRN_CONCURRENCY=2")
	startWorker(t, bin, env)
	startWorker(t, bin, env)

	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue})
	var runs []*workflow.Run
	for range 6 {
		r, err := client.Start(ctxb, "call-dep", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	deferred := 0
	for _, r := range runs {
		got := testkit.WaitRun(t, client, r.ID, 60*time.Second)
		if got.Status != workflow.StatusSucceeded {
			t.Fatalf("run %s: %s %s", r.ID, got.Status, got.FailureReason)
		}
		evs, err := client.Events(ctxb, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		fails := testkit.CountEvents(evs, workflow.EventAttemptFailed, "call")
		if st := got.Step("call"); st.Attempts != fails+1 {
			t.Errorf("run %s: %d attempts for %d failures\n%s", r.ID, st.Attempts, fails, journalText(evs))
		}
		deferred += testkit.CountEvents(evs, "attempt_deferred", "call")
	}

	mu.Lock()
	defer mu.Unlock()
	probes := map[string]int{}
	failedProbes := 0
	for i, req := range log {
		switch req.state {
		case "open":
			// Only an attempt begun before the breaker opened may still
			// arrive: within the cooldown of the opening (a request held
			// up longer, on a loaded machine, would arrive half-open and
			// fail the one-probe check below).
			if req.openFor > time.Second {
				t.Errorf("request %d came %s after the breaker opened", i, req.openFor)
			}
		case "half_open":
			probes[req.probe]++
			if i < 10 {
				failedProbes++
			}
		}
	}
	for p, n := range probes {
		if n != 1 {
			t.Errorf("half-open period of probe %s let %d requests through; want 1", p, n)
		}
	}
	bs, err := client.Breakers(ctxb)
	if err != nil || len(bs) != 1 {
		t.Fatalf("breakers %+v, %v", bs, err)
	}
	if b := bs[0]; b.State != "closed" || int(b.Opened) != 1+failedProbes || len(probes) != failedProbes+1 || deferred == 0 {
		t.Errorf("breaker %+v: %d probes (%d failed), %d deferrals; want closed, opened 1 + failed probes, the last probe succeeded",
			b, len(probes), failedProbes, deferred)
	}
	if len(log) != 10+len(runs) {
		t.Errorf("the dependency got %d requests; want 10 failures and one success per run (%d)", len(log), 10+len(runs))
	}
}
