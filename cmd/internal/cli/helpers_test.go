package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/cmd/internal/cli"
	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// runTimeout bounds one CLI invocation, start --wait included.
const runTimeout = 60 * time.Second

// env is one test's slice of the shared redis-server: its own queue.
type env struct {
	t      *testing.T
	url    string
	rdb    *redis.Client
	queue  string
	client *workflow.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := redistest.Shared(t)
	q := testkit.Queue(t, "cli")
	rdb := srv.Client(t)
	return &env{t: t, url: srv.URL(), rdb: rdb, queue: q,
		client: workflow.NewClient(rdb, workflow.ClientConfig{Queue: q, Logger: testkit.Logger(t)})}
}

// fastPolicy retries quickly: 200ms, 400ms, 800ms, with the default 4
// attempts.
func fastPolicy() workflow.Policy {
	return workflow.Policy{InitialInterval: 200 * time.Millisecond, MaxInterval: time.Second, Jitter: workflow.JitterNone}
}

// startWorker runs an in-process worker with the demo workflow on the
// test's queue until the test ends, and waits until it has published it.
func (e *env) startWorker(defaults workflow.Policy, defs ...workflow.Definition) {
	e.t.Helper()
	testkit.StartWorker(e.t, e.rdb, workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{
		Queue: e.queue, Defaults: defaults, Logger: testkit.Logger(e.t),
	}}, append([]workflow.Definition{demo.Definition(workflow.Policy{})}, defs...)...)
}

// environ is the environment of the CLI for the test's queue, then extra.
func (e *env) environ(extra ...string) []string {
	return append([]string{"CAIRN_REDIS_URL=" + e.url, "CAIRN_QUEUE=" + e.queue}, extra...)
}

// result is the outcome of one CLI invocation.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// invocation describes a CLI run.
type invocation struct {
	// ctx, if set, is the CLI's context (as SIGINT cancels it).
	ctx     context.Context
	args    []string
	stdin   string
	tty     bool
	environ []string
}

// run runs the CLI in-process with args against the test's queue.
func (e *env) run(args ...string) result {
	return e.invoke(invocation{args: args, environ: e.environ()})
}

func (e *env) invoke(inv invocation) result {
	e.t.Helper()
	return invoke(e.t, inv)
}

func invoke(t testing.TB, inv invocation) result {
	t.Helper()
	parent := inv.ctx
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, runTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	c := &cli.CLI{
		Stdin: strings.NewReader(inv.stdin), Stdout: &stdout, Stderr: &stderr, Environ: inv.environ,
		IsTerminal: func(io.Writer) bool { return inv.tty },
	}
	code := c.Run(ctx, inv.args)
	if ctx.Err() != nil && (inv.ctx == nil || inv.ctx.Err() == nil) {
		t.Fatalf("enqueue %s did not finish within %v", strings.Join(inv.args, " "), runTimeout)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// mustSucceed fails the test unless r exited 0.
func mustSucceed(t testing.TB, r result) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("want exit 0, got %v", r)
	}
}

// runID returns the run ID r printed: its only stdout line.
func runID(t testing.TB, r result) string {
	t.Helper()
	id := strings.TrimSuffix(r.stdout, "\n")
	if !workflow.ValidRunID(id) || strings.Contains(id, "\n") {
		t.Fatalf("stdout is not one run ID line: %v", r)
	}
	return id
}

// checkOneErrorLine checks the error conventions: exit code want, nothing
// on stdout, exactly one stderr line prefixed "enqueue: " containing
// substr.
func checkOneErrorLine(t testing.TB, r result, wantCode int, substr string) {
	t.Helper()
	if r.code != wantCode {
		t.Errorf("exit code %d, want %d", r.code, wantCode)
	}
	if r.stdout != "" {
		t.Errorf("stdout is not empty")
	}
	if !strings.HasPrefix(r.stderr, "enqueue: ") || !strings.HasSuffix(r.stderr, "\n") ||
		strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr is not one line starting with \"enqueue: \"")
	}
	if !strings.Contains(r.stderr, substr) {
		t.Errorf("stderr does not contain %q", substr)
	}
	if t.Failed() {
		t.Logf("%v", r)
	}
}

// decode unmarshals the JSON in s into v.
func decode(t testing.TB, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("not JSON (%v):\n%s", err, s)
	}
}

// runKeys returns the run keys of the test's queue.
func (e *env) runKeys() []string {
	e.t.Helper()
	keys, err := e.rdb.Keys(context.Background(), "cairn:{"+e.queue+"}:run:*").Result()
	if err != nil {
		e.t.Fatal(err)
	}
	return keys
}

// get reads a run through the workflow client.
func (e *env) get(id string) *workflow.Run {
	e.t.Helper()
	run, err := e.client.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return run
}

// lines returns the lines of s containing substr.
func lines(s, substr string) []string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// promptly bounds an invocation that must not wait for anything but a
// closed port, a local file or a few Redis round trips: refusing a named
// pipe, a device or input over the limit, or stopping on a cancelled
// context. It is generous: on a loaded machine (two cores shared with
// other test binaries) a Redis command can outlast the CLI's 3s read
// timeout and be retried, which took TestBadInput's cases that reach Redis
// past 10s; a regression that blocks still fails rather than hangs.
const promptly = 30 * time.Second

// invokePromptly runs the CLI in-process through Main, as the binary does,
// with stdin (if not nil) as its standard input, and fails the test if it has not
// returned within promptly: a regression that blocks (on a named pipe, on
// stdin) fails the test instead of hanging it. The blocked invocation is
// then left behind.
func invokePromptly(t testing.TB, inv invocation, stdin io.Reader) result {
	t.Helper()
	ctx := inv.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if stdin == nil {
		stdin = strings.NewReader(inv.stdin)
	}
	done := make(chan result, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		code := cli.Main(ctx, inv.args, stdin, &stdout, &stderr, inv.environ)
		done <- result{stdout: stdout.String(), stderr: stderr.String(), code: code}
	}()
	timer := time.NewTimer(promptly)
	defer timer.Stop()
	select {
	case r := <-done:
		return r
	case <-timer.C:
		t.Fatalf("enqueue %s has not returned after %v", strings.Join(inv.args, " "), promptly)
		return result{}
	}
}
