package yamldef_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/yamldef"
)

// harness is a test's worker and client on its own queue of the shared
// redis-server.
type harness struct {
	t      *testing.T
	client *workflow.Client
}

// startWorker runs a worker with the file's definitions until the test ends.
func startWorker(t *testing.T, filename, src string) *harness {
	t.Helper()
	defs, err := yamldef.Parse(filename, []byte(src), yamldef.Options{})
	if err != nil {
		t.Fatalf("parse:\n%v", err)
	}
	rdb := redistest.Shared(t).Client(t)
	q := testkit.Queue(t, "y")
	log := testkit.Logger(t)
	ds := make([]workflow.Definition, len(defs))
	for i, d := range defs {
		ds[i] = *d
	}
	testkit.StartWorker(t, rdb, workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{Queue: q, Logger: log}}, ds...)
	return &harness{t: t, client: workflow.NewClient(rdb, workflow.ClientConfig{Queue: q, Logger: log})}
}

// run starts a run and waits for it to end.
func (h *harness) run(wf string, input any, timeout time.Duration) *workflow.Run {
	h.t.Helper()
	run, err := h.client.Start(context.Background(), wf, input, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return testkit.WaitRun(h.t, h.client, run.ID, timeout)
}

func (h *harness) events(id string) []workflow.Event {
	h.t.Helper()
	evs, err := h.client.Events(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

// hit is one request the test server saw.
type hit struct {
	at     time.Time
	path   string
	query  string
	header http.Header
	body   string
}

// TestYAMLWorkflowRunsEndToEnd: a workflow loaded from YAML runs on a real
// engine against a server that answers the first step with 503 twice, then
// 429 with Retry-After: 2, then 200. The retries follow the YAML policy
// (200ms, then 400ms), the 429's retry waits the 2s the server asked for,
// and the second step's request is built from the first step's output.
func TestYAMLWorkflowRunsEndToEnd(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var fetches, pushes []hit
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h := hit{at: time.Now(), path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone(), body: string(b)}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.URL.Path == "/invoices":
			fetches = append(fetches, h)
			switch len(fetches) {
			case 1, 2:
				http.Error(w, "busy", http.StatusServiceUnavailable)
			case 3:
				w.Header().Set("Retry-After", "2")
				http.Error(w, "slow down", http.StatusTooManyRequests)
			default:
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"batch": "b7", "invoices": [{"id": 1}, {"id": 12345678901234567890}]}`)
			}
		case strings.HasPrefix(r.URL.Path, "/push/"):
			pushes = append(pushes, h)
			_, _ = io.WriteString(w, `{"accepted": true}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	h := startWorker(t, "workflows.yaml", fmt.Sprintf(`workflows:
  sync-invoices:
    resiliency:
      retry: {max_attempts: 5, backoff: exponential, initial_delay: 200ms, multiplier: 2, max_delay: 5s, jitter: none}
      timeouts: {step: 10s, total: 2m}
    steps:
      - name: fetch
        type: http
        with: {method: GET, url: "%[1]s/invoices?since={{.input.since}}"}
      - name: push
        type: http
        with:
          method: POST
          url: "%[1]s/push/{{.steps.fetch.body.batch}}"
          headers: {X-Attempt: "{{.attempt}}"}
          body: '{"count": {{len .steps.fetch.body.invoices}}, "invoices": {{json .steps.fetch.body.invoices}}}'
`, srv.URL))

	run := h.run("sync-invoices", map[string]string{"since": "2024-01-01"}, 60*time.Second)
	if run.Status != workflow.StatusSucceeded {
		t.Fatalf("run ended %s (%s: %s)", run.Status, run.FailureCode, run.FailureReason)
	}
	if s := run.Step("fetch"); s.Attempts != 4 || s.RetryAttempts != 3 {
		t.Errorf("fetch: %d attempts, %d retries; want 4, 3", s.Attempts, s.RetryAttempts)
	}
	if s := run.Step("push"); s.Attempts != 1 {
		t.Errorf("push: %d attempts, want 1", s.Attempts)
	}

	// The journal: each failure with its code, each retry with the delay
	// the policy (or the server) gave.
	evs := h.events(run.ID)
	var codes []string
	var delays []time.Duration
	due := map[int]time.Time{}
	for _, ev := range evs {
		if ev.Step != "fetch" {
			continue
		}
		switch ev.Type {
		case workflow.EventAttemptFailed:
			codes = append(codes, ev.Details["code"]+"/"+ev.Details["class"])
		case workflow.EventRetryScheduled:
			ms, err := strconv.Atoi(ev.Details["delay_ms"])
			if err != nil {
				t.Fatalf("retry_scheduled without delay_ms: %+v", ev)
			}
			delays = append(delays, time.Duration(ms)*time.Millisecond)
			at, ok := ev.DueAt()
			if !ok || !at.Equal(ev.At.Add(time.Duration(ms)*time.Millisecond)) {
				t.Errorf("retry of attempt %d: due_at %v, want scheduled time + delay", ev.Attempt, ev.Details["due_at"])
			}
			due[ev.Attempt] = at
		case workflow.EventAttemptStarted:
			if d, ok := due[ev.Attempt]; ev.Attempt > 1 && (!ok || ev.At.Before(d)) {
				t.Errorf("attempt %d started at %s, before its due time %s", ev.Attempt, ev.At, d)
			}
		}
	}
	if got, want := strings.Join(codes, " "), "http_503/transient http_503/transient http_429/transient"; got != want { //nolint:dupword // two 503s, then a 429
		t.Errorf("fetch failures %s, want %s", got, want)
	}
	if want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 2 * time.Second}; fmt.Sprint(delays) != fmt.Sprint(want) {
		t.Errorf("retry delays %v, want %v (the policy's two, then Retry-After)", delays, want)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(fetches) != 4 || len(pushes) != 1 {
		t.Fatalf("server saw %d fetches and %d pushes, want 4 and 1", len(fetches), len(pushes))
	}
	for i, f := range fetches {
		if f.query != "since=2024-01-01" || f.header.Get("Idempotency-Key") != fmt.Sprintf("%s:fetch:%d", run.ID, i+1) {
			t.Errorf("fetch %d: query %q, Idempotency-Key %q", i+1, f.query, f.header.Get("Idempotency-Key"))
		}
	}
	// Measured at the server: each retry came no sooner than asked.
	for i, least := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 2 * time.Second} {
		if gap := fetches[i+1].at.Sub(fetches[i].at); gap < least {
			t.Errorf("fetch %d came %s after fetch %d, want at least %s", i+2, gap, i+1, least)
		}
	}
	p := pushes[0]
	if p.path != "/push/b7" || p.header.Get("X-Attempt") != "1" || p.header.Get("Idempotency-Key") != run.ID+":push:1" ||
		p.header.Get("Content-Type") != "application/json" {
		t.Errorf("push request %s with headers %v", p.path, p.header)
	}
	if want := `{"count": 2, "invoices": [{"id":1},{"id":12345678901234567890}]}`; p.body != want {
		t.Errorf("push body\n got %s\nwant %s", p.body, want)
	}
	var out struct {
		Status int            `json:"status"`
		Body   map[string]any `json:"body"`
	}
	if err := json.Unmarshal(run.Step("push").Output, &out); err != nil || out.Status != 200 || out.Body["accepted"] != true {
		t.Errorf("push output %s (%v)", run.Step("push").Output, err)
	}
}

// TestYAMLNonRetryableCode: a status code listed in non_retryable_codes
// fails the step on its first attempt, with permanent_error.
func TestYAMLNonRetryableCode(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	h := startWorker(t, "codes.yaml", fmt.Sprintf(`workflows:
  strict:
    resiliency:
      retry: {max_attempts: 5, initial_delay: 100ms, non_retryable_codes: [http_503]}
    steps:
      - {name: call, type: http, with: {method: GET, url: "%s/x"}}
`, srv.URL))
	run := h.run("strict", nil, 30*time.Second)
	if run.Status != workflow.StatusFailed || run.FailureCode != workflow.CodePermanentError {
		t.Fatalf("run ended %s (%s: %s), want failed with permanent_error", run.Status, run.FailureCode, run.FailureReason)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("server called %d times, want 1", n)
	}
	s := run.Step("call")
	if s.Attempts != 1 || s.LastErrorCode != "http_503" || !strings.Contains(s.LastError, `error code "http_503" is non-retryable`) ||
		!strings.Contains(s.LastError, "503 Service Unavailable: maintenance") {
		t.Errorf("step: %d attempts, code %q, error %q", s.Attempts, s.LastErrorCode, s.LastError)
	}
}

// TestYAMLHTTPStepSecurity: on a real engine, a step whose input names a
// host outside allowed_hosts fails permanently with http_host_not_allowed
// and nothing is sent there; the error a failed request leaves in the run
// has its query values redacted.
func TestYAMLHTTPStepSecurity(t *testing.T) {
	t.Parallel()
	const secret = "tok-5ecret"
	var apiHits, otherHits atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		apiHits.Add(1)
		http.Error(w, "bad token", http.StatusUnauthorized)
	}))
	defer api.Close()
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	h := startWorker(t, "security.yaml", fmt.Sprintf(`workflows:
  leaky:
    steps:
      - {name: call, type: http, with: {method: GET, url: "%s/v1/items?token={{.input.token}}"}}
  steered:
    allowed_hosts: ['%s']
    steps:
      - {name: call, type: http, with: {method: GET, url: "http://{{.input.host}}/v1/items"}}
`, api.URL, strings.TrimPrefix(api.URL, "http://")))

	run := h.run("leaky", map[string]string{"token": secret}, 30*time.Second)
	s := run.Step("call")
	if run.Status != workflow.StatusFailed || s.LastErrorCode != "http_401" || !strings.Contains(s.LastError, "/v1/items?token=REDACTED: 401") {
		t.Errorf("leaky: run %s, step error %q (%s)", run.Status, s.LastError, s.LastErrorCode)
	}
	for _, ev := range h.events(run.ID) {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("leaky: the journal shows the token: %s", b)
		}
	}
	if strings.Contains(s.LastError, secret) || strings.Contains(run.FailureReason, secret) {
		t.Errorf("leaky: the run shows the token: %q, %q", s.LastError, run.FailureReason)
	}

	run = h.run("steered", map[string]string{"host": strings.TrimPrefix(other.URL, "http://")}, 30*time.Second)
	s = run.Step("call")
	if run.Status != workflow.StatusFailed || s.Attempts != 1 || s.LastErrorCode != "http_host_not_allowed" ||
		!strings.Contains(s.LastError, "is not in allowed_hosts") {
		t.Errorf("steered: run %s, %d attempts, step error %q (%s)", run.Status, s.Attempts, s.LastError, s.LastErrorCode)
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the other server got %d requests", n)
	}
	if n := apiHits.Load(); n != 1 {
		t.Errorf("the api got %d requests, want 1", n)
	}
}

// TestYAMLPollUntilDone: an http step with poll repeats its request, one per
// interval, until its until template is true; the polls are snoozes (no
// retry spent, one attempt), each journaled, and the step's output is the
// last response.
func TestYAMLPollUntilDone(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var hits []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		hits = append(hits, time.Now())
		n := len(hits)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		status := "running"
		if n >= 3 {
			status = "done"
		}
		_, _ = fmt.Fprintf(w, `{"status": %q, "n": %d}`, status, n)
	}))
	defer srv.Close()

	h := startWorker(t, "workflows.yaml", fmt.Sprintf(`workflows:
  wait-job:
    resiliency:
      retry: {max_attempts: 1}
      max_iterations: 10
    steps:
      - name: job
        type: http
        with:
          method: GET
          url: "%s/jobs/1"
          poll: {until: '{{eq .output.body.status "done"}}', interval: 300ms}
`, srv.URL))
	run := h.run("wait-job", nil, 30*time.Second)
	if run.Status != workflow.StatusSucceeded {
		t.Fatalf("run ended %s (%s: %s)", run.Status, run.FailureCode, run.FailureReason)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hits) != 3 {
		t.Fatalf("%d requests, want 3", len(hits))
	}
	for i := 1; i < len(hits); i++ {
		if gap := hits[i].Sub(hits[i-1]); gap < 300*time.Millisecond {
			t.Errorf("request %d came %s after the one before, within the poll interval", i+1, gap)
		}
	}
	s := run.Step("job")
	if s.Attempts != 1 || s.RetryAttempts != 0 || s.Snoozes != 2 {
		t.Errorf("job: %d attempts, %d retries, %d snoozes; want 1, 0, 2", s.Attempts, s.RetryAttempts, s.Snoozes)
	}
	var out struct {
		Body struct {
			Status string `json:"status"`
			N      int    `json:"n"`
		} `json:"body"`
	}
	if err := json.Unmarshal(s.Output, &out); err != nil || out.Body.Status != "done" || out.Body.N != 3 {
		t.Errorf("output %s (%v), want the third response", s.Output, err)
	}
	snoozes := 0
	for _, ev := range h.events(run.ID) {
		if ev.Type == workflow.EventStepSnoozed && ev.Step == "job" {
			snoozes++
		}
	}
	if snoozes != 2 {
		t.Errorf("%d step_snoozed events, want 2", snoozes)
	}
}

// TestYAMLPollCountsAgainstMaxIterations: a poll that is never done fails
// the run at its iteration ceiling.
func TestYAMLPollCountsAgainstMaxIterations(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, `{"status": "running"}`)
	}))
	defer srv.Close()
	h := startWorker(t, "workflows.yaml", fmt.Sprintf(`workflows:
  never:
    resiliency: {max_iterations: 3}
    steps:
      - name: job
        type: http
        with: {method: GET, url: "%s/", poll: {until: '{{eq .output.body.status "done"}}', interval: 10ms}}
`, srv.URL))
	run := h.run("never", nil, 30*time.Second)
	if run.Status != workflow.StatusFailed || run.FailureCode != workflow.CodeMaxIterationsExceeded {
		t.Fatalf("run ended %s (%s), want failed with max_iterations_exceeded", run.Status, run.FailureCode)
	}
	if hits.Load() != 3 {
		t.Errorf("%d requests, want 3", hits.Load())
	}
}
