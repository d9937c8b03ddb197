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
// then recovers, behind one circuit breaker of threshold 3. Every request
// the dependency gets was begun (its attempt_started, found by the
// request's Idempotency-Key) while the breaker was closed, or as the one
// probe of a half-open period, whichever worker began it: none while it was
// open, and one per half-open period. The breaker opened once plus once
// per failed probe; every run succeeded, with one attempt more than its
// failures (deferrals spend no attempt), and some attempts were deferred.
//
// The breaker decides when an attempt begins (begin.lua), so that is when
// the test judges each request: by the breaker's changes (its
// breaker_opened and breaker_closed notifications) in the order the
// scripts ran (stream IDs), not by the state the request finds when it
// arrives, which on a loaded machine can be a later one.
func TestCircuitBreakerAcrossWorkers(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	srv := redistest.Start(t, nil)
	rdb := srv.Client(t)
	const queue = "breakers"

	type request struct {
		key    string // Idempotency-Key: run:step:attempt
		failed bool   // answered 503
	}
	var (
		mu   sync.Mutex
		log  []request
		fail = 10
	)
	dep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		failing := fail > 0
		fail--
		log = append(log, request{key: r.Header.Get("Idempotency-Key"), failed: failing})
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
      circuit_breaker: {name: dep, failure_threshold: 3, window: 1m, cooldown: 500ms, max_cooldown: 1s}
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
	// began: each attempt's last attempt_started, by its idempotency key.
	began := map[string]workflow.Event{}
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
		for _, ev := range evs {
			if ev.Type == workflow.EventAttemptStarted {
				began[workflow.IdempotencyKey(r.ID, ev.Step, ev.Attempt)] = ev
			}
		}
	}

	// The breaker's changes, in the order their scripts ran.
	type change struct {
		id        streamID
		opened    bool
		openUntil time.Time
	}
	var changes []change
	xs, err := rdb.XRange(ctxb, "cairn:{"+queue+"}:notifications", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range xs {
		typ, _ := x.Values["type"].(string)
		if (typ != "breaker_opened" && typ != "breaker_closed") || x.Values["breaker"] != "dep" {
			continue
		}
		c := change{opened: typ == "breaker_opened"}
		id, ok := parseStreamID(x.ID)
		until, err := strconv.ParseInt(fmt.Sprint(x.Values["open_until"]), 10, 64)
		if !ok || (c.opened && err != nil) {
			t.Fatalf("notification %+v", x)
		}
		c.id, c.openUntil = id, time.UnixMilli(until)
		changes = append(changes, c)
	}

	mu.Lock()
	defer mu.Unlock()
	// probes: the requests begun half-open, by the opening they follow.
	probes := map[int][]string{}
	failedProbes := 0
	for i, req := range log {
		ev, ok := began[req.key]
		id, okID := parseStreamID(ev.ID)
		if !ok || !okID {
			t.Errorf("request %d (%q) matches no attempt_started", i, req.key)
			continue
		}
		// The last change before the begin. A change in the begin's own
		// millisecond came after it: begin.lua defers an attempt while the
		// breaker is open, and while a probe is out (an opening or a failed
		// probe's reopening begins neither).
		last := -1
		for j, c := range changes {
			if c.id.ms < id.ms {
				last = j
			}
		}
		switch {
		case last < 0 || !changes[last].opened:
			// closed
		case ev.At.Before(changes[last].openUntil):
			t.Errorf("request %d (%s) was begun at %s while the breaker was open (until %s)", i, req.key,
				ev.At.Format(tsFormat), changes[last].openUntil.Format(tsFormat))
		default:
			probes[last] = append(probes[last], req.key)
			if req.failed {
				failedProbes++
			}
		}
	}
	for j, keys := range probes {
		if len(keys) != 1 {
			t.Errorf("the half-open period after opening %d let %d requests through (%q); want 1", j, len(keys), keys)
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
