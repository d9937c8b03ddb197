package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// Test tokens: alice and bob are users, root is an admin.
const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789ab"
	rootToken  = "root-token-0123456789a"
	wrongToken = "wrong-token-0123456789"
)

const tokensFile = `# test tokens
alice-token-0123456789  alice  user

bob-token-0123456789ab  bob    user
root-token-0123456789a  root   admin
`

// env is one test's isolated slice of a shared redis-server (its own queue),
// with a worker running the demo workflow and a dashboard server on
// httptest.
type env struct {
	t      *testing.T
	rdb    *redis.Client
	queue  string
	client *workflow.Client
	srv    *dashboard.Server
	http   *httptest.Server
	logs   *syncBuffer
}

type envOptions struct {
	noTokens  bool
	heartbeat time.Duration
	// noWorker publishes the definitions but runs no worker (also with ui).
	noWorker bool
	// Event stream bounds (dashboard.Config); zero: the defaults.
	writeTimeout  time.Duration
	replayEntries int
	replayAge     time.Duration
	// ui adds the web UI (dashboard.WebUI) and runs a worker of the demo,
	// optional and flaky workflows (ui_test.go).
	ui bool
	// queue, when set, is the test's queue (it must be unique to the
	// test); else testkit.Queue's.
	queue string
}

// syncBuffer is a bytes.Buffer safe for concurrent use (the server logs from
// its handlers' goroutines).
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	q := testkit.Queue(t, "d")
	if o.queue != "" {
		q = o.queue
	}
	logs := newSyncBuffer()
	log := testkit.LoggerTo(t, logs)
	e := &env{t: t, rdb: rdb, queue: q, logs: logs,
		client: workflow.NewClient(rdb, workflow.ClientConfig{Queue: q, Logger: log})}
	switch {
	case o.noWorker:
		// (With ui too: the pages need no worker, and a worker would move
		// the runs a test looks at.)
		e.publish(log)
	case o.ui:
		e.startUIWorker(log)
	default:
		e.startWorker(log)
	}
	cfg := dashboard.Config{
		Client:     e.client,
		Redis:      rdb,
		Logger:     log,
		Monitoring: asynq.RedisClientOpt{Addr: srv.Addr()},
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintln(w, "cairn_test_metric 1")
		}),
		Heartbeat:          o.heartbeat,
		EventWriteTimeout:  o.writeTimeout,
		EventReplayEntries: o.replayEntries,
		EventReplayAge:     o.replayAge,
	}
	if o.ui {
		cfg.UI = dashboard.WebUI
	}
	if !o.noTokens {
		toks, err := dashboard.ParseTokens(strings.NewReader(tokensFile), "tokens")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Tokens = toks
	}
	s, err := dashboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = s
	e.http = httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		e.http.CloseClientConnections()
		e.http.Close()
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return e
}

// demoPolicy retries fast, with a budget of two attempts.
var demoPolicy = workflow.Policy{MaxAttempts: 2, InitialInterval: 50 * time.Millisecond, BackoffCoefficient: 1,
	MaxInterval: 50 * time.Millisecond, Jitter: workflow.JitterNone}

// publish publishes the demo workflow's definition without running a
// worker: runs can start, and stay pending.
func (e *env) publish(log *slog.Logger) {
	e.t.Helper()
	eng, err := workflow.NewEngine(e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: log})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := eng.Register(e.definitions()...); err != nil {
		e.t.Fatal(err)
	}
	if err := eng.Publish(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// startWorker runs an in-process worker of the demo workflow, with fast
// retries and a budget of two attempts, until the test ends.
func (e *env) startWorker(log *slog.Logger) {
	e.t.Helper()
	testkit.StartWorker(e.t, e.rdb, workerConfig(e.queue, log), e.definitions()...)
}

// definitions are the workflows of the tests' workers: the demo, an
// approval, the sagas, and the ordering suite's ordered workflows.
func (e *env) definitions() []workflow.Definition {
	defs := append([]workflow.Definition{demo.Definition(demoPolicy), approvalDefinition(), backoffDefinition()},
		sagaDefinitions()...)
	return append(defs, demo.Ordered(e.rdb, e.queue, demoPolicy)...)
}

// workerConfig is the configuration of the tests' workers: a short
// shutdown, so that a test ends soon after its last step.
func workerConfig(queue string, log *slog.Logger) workflow.WorkerConfig {
	return workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{Queue: queue, Logger: log},
		ShutdownTimeout: 200 * time.Millisecond}
}

// response is an answer of the server.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) problem(t *testing.T) dashboard.Problem {
	t.Helper()
	var p dashboard.Problem
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q, want application/problem+json (status %d, body %s)", ct, r.status, r.body)
	}
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem: %v: %s", err, r.body)
	}
	return p
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// req is a request to the test server.
type req struct {
	method string
	path   string
	token  string // bearer token; "" for none
	body   string
	header map[string]string
	cookie string // cairn_token cookie
	// stream: return once the headers are in (an event stream's body
	// does not end).
	stream bool
}

func (e *env) do(r req) response {
	e.t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, r.method, e.http.URL+r.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if r.token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.cookie != "" {
		hr.AddCookie(&http.Cookie{Name: dashboard.CookieName, Value: r.cookie})
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(hr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if r.stream && resp.StatusCode == http.StatusOK {
		return response{status: resp.StatusCode, header: resp.Header}
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// start starts a demo run owned by owner through the client.
func (e *env) start(owner string, input string) *workflow.Run {
	e.t.Helper()
	run, err := e.client.Start(context.Background(), demo.Name, json.RawMessage(input), &workflow.StartOptions{Owner: owner})
	if err != nil {
		e.t.Fatal(err)
	}
	return run
}

// Inputs of the demo workflow.
const (
	inputOK        = `{}`
	inputPermanent = `{"fail_step":"transform","permanent":true}`
	inputSlow      = `{"step_sleep_ms":60000}`
)

// wait waits for a run to end.
func (e *env) wait(id string) *workflow.Run {
	e.t.Helper()
	return testkit.WaitRun(e.t, e.client, id, 20*time.Second)
}

// failedRun starts a run of owner that fails at transform, and waits for
// it to fail.
func (e *env) failedRun(owner string) *workflow.Run {
	e.t.Helper()
	run := e.wait(e.start(owner, inputPermanent).ID)
	if run.Status != workflow.StatusFailed {
		e.t.Fatalf("run %s is %s, want failed", run.ID, run.Status)
	}
	return run
}

// runningRun starts a run of owner whose first step sleeps a minute, and
// waits for it to run.
func (e *env) runningRun(owner string) *workflow.Run {
	e.t.Helper()
	run := e.start(owner, inputSlow)
	testkit.Eventually(e.t, 10*time.Second, "run running", func() bool {
		r, err := e.client.Get(context.Background(), run.ID)
		return err == nil && r.Status == workflow.StatusRunning && r.Steps[0].Status == workflow.StepRunning
	})
	return run
}

// snapshot is what must not change when a request is refused: the run's
// JSON and the length of its journal.
type snapshot struct {
	json    string
	journal int
}

func (e *env) snapshot(id string) snapshot {
	e.t.Helper()
	run, err := e.client.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	b, err := json.Marshal(run)
	if err != nil {
		e.t.Fatal(err)
	}
	evs, err := e.client.Events(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return snapshot{json: string(b), journal: len(evs)}
}

func (e *env) audit() []workflow.AuditEntry {
	e.t.Helper()
	es, err := e.client.Audit(context.Background(), "", 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	return es
}

func (e *env) countRuns() int {
	e.t.Helper()
	runs, _, err := e.client.List(context.Background(), workflow.ListOptions{Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(runs)
}
