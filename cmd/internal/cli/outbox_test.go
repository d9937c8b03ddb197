package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/cmd/internal/cli"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestOutboxCommands: with CAIRN_OUTBOX, start and signal queue while Redis
// is unreachable (exit 0, "queued"), enqueue outbox shows them, and the
// next command that reaches Redis sends them first; what Redis refuses is a
// dead letter.
func TestOutboxCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := filepath.Join(t.TempDir(), "outbox.db")
	down := []string{"CAIRN_REDIS_URL=redis://" + testkit.FreeAddr(t), "CAIRN_QUEUE=" + e.queue, "CAIRN_OUTBOX=" + path}
	runDown := func(args ...string) result { return e.invoke(invocation{args: args, environ: down}) }

	r := runDown("start", "demo", "--ordering-key", "k1")
	mustSucceed(t, r)
	id, ok := strings.CutPrefix(strings.TrimSpace(r.stdout), "queued ")
	if !ok || !workflow.ValidRunID(id) {
		t.Fatalf("start while Redis is down: %v; want queued and the run ID", r)
	}
	r = runDown("signal", id, "approve", "--payload", `{"ok":true}`)
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, "queued signal approve for "+id) {
		t.Fatalf("signal while Redis is down: %v", r)
	}
	r = runDown("start", "demo", "--json")
	mustSucceed(t, r)
	var run workflow.Run
	if err := json.Unmarshal([]byte(r.stdout), &run); err != nil || !run.Queued || run.Workflow != "demo" {
		t.Fatalf("start --json while Redis is down: %v (%v)", r, err)
	}
	r = runDown("start", "nosuch")
	mustSucceed(t, r)
	unknownID := strings.TrimPrefix(strings.TrimSpace(r.stdout), "queued ")
	r = runDown("start", "demo", "--wait")
	if r.code != 1 || !strings.HasPrefix(r.stdout, "queued ") || !strings.Contains(r.stderr, "cannot --wait") {
		t.Fatalf("start --wait while Redis is down: %v", r)
	}
	r = runDown("status", id)
	if r.code != 1 || !strings.Contains(r.stderr, "cannot reach Redis") {
		t.Fatalf("status while Redis is down: %v", r)
	}

	r = runDown("outbox")
	mustSucceed(t, r)
	for _, want := range []string{"5 queued", id, "signal", "approve", "k1", "no dead letters"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("outbox: no %q in %v", want, r)
		}
	}
	r = runDown("outbox", "--json")
	mustSucceed(t, r)
	var contents workflow.OutboxContents
	if err := json.Unmarshal([]byte(r.stdout), &contents); err != nil || len(contents.Queued) != 5 ||
		contents.Queued[0].RunID != id || contents.Queued[1].Kind != workflow.OutboxSignal || contents.Queued[0].Attempts == 0 || contents.Queued[0].LastError == "" {
		t.Fatalf("outbox --json: %v (%v)", r, err)
	}

	// Redis reachable: list sends the queue first. demo has no await: the
	// signal is refused, a dead letter; so is the start of an unknown
	// workflow.
	e.startWorker(fastPolicy())
	up := e.environ("CAIRN_OUTBOX=" + path)
	r = e.invoke(invocation{args: []string{"list"}, environ: up})
	mustSucceed(t, r)
	if !strings.Contains(r.stderr, "outbox: sent 3 queued entries") || !strings.Contains(r.stderr, "2 queued entries were refused") ||
		!strings.Contains(r.stdout, id) {
		t.Fatalf("list with a queued outbox: %v", r)
	}
	r = e.invoke(invocation{args: []string{"status", unknownID}, environ: up})
	if r.code != 2 || !strings.Contains(r.stderr, "dead letter") || !strings.Contains(r.stderr, "unknown workflow") {
		t.Fatalf("status of a dead-lettered start: %v", r)
	}
	r = e.invoke(invocation{args: []string{"outbox"}, environ: up})
	mustSucceed(t, r)
	if !strings.Contains(r.stdout, "nothing queued") || !strings.Contains(r.stdout, "2 dead letters") ||
		!strings.Contains(r.stdout, "approve") || !strings.Contains(r.stdout, "nosuch") {
		t.Fatalf("outbox after the flush: %v", r)
	}
	r = e.invoke(invocation{args: []string{"outbox", "--drop-dead"}, environ: up})
	mustSucceed(t, r)
	if !strings.Contains(r.stderr, "dropped 2 dead letters") || !strings.Contains(r.stdout, "no dead letters") {
		t.Fatalf("outbox --drop-dead: %v", r)
	}
	// start goes straight to Redis now.
	r = e.invoke(invocation{args: []string{"start", "demo", "--wait"}, environ: up})
	mustSucceed(t, r)
	if strings.Contains(r.stdout, "queued") {
		t.Fatalf("start with Redis up: %v", r)
	}
}

// TestOutboxInUse: while another process has the outbox open, start and
// signal fail (they need it) and other commands go on without sending it.
func TestOutboxInUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())
	path := filepath.Join(t.TempDir(), "outbox.db")
	rdb := redis.NewClient(&redis.Options{Addr: testkit.FreeAddr(t), MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	holder, err := workflow.OpenClient(rdb, workflow.ClientConfig{Queue: e.queue, Outbox: path, Logger: testkit.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	invokeWith := func(args ...string) result {
		t.Helper()
		return invokeCLI(t, args, e.environ("CAIRN_OUTBOX="+path), 100*time.Millisecond)
	}
	r := invokeWith("start", "demo")
	if r.code != 1 || !strings.Contains(r.stderr, "in use by another process") {
		t.Fatalf("start with the outbox in use: %v", r)
	}
	r = invokeWith("list")
	mustSucceed(t, r)
	if !strings.Contains(r.stderr, "outbox: not sent") {
		t.Fatalf("list with the outbox in use: %v", r)
	}
	r = e.invoke(invocation{args: []string{"outbox"}, environ: e.environ()})
	if r.code != 2 || !strings.Contains(r.stderr, "CAIRN_OUTBOX is not set") {
		t.Fatalf("outbox without CAIRN_OUTBOX: %v", r)
	}
}

// invokeCLI runs the CLI with a short wait for the outbox's lock.
func invokeCLI(t *testing.T, args, environ []string, lockTimeout time.Duration) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	c := &cli.CLI{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Environ: environ,
		OutboxLockTimeout: lockTimeout}
	code := c.Run(ctx, args)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}
