package main_test

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/workflow"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := redistest.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if err := proctest.RemoveBuilds(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

func enqueue(t *testing.T) string {
	t.Helper()
	return proctest.Build(t, "github.com/cairnhq/cairn/cmd/enqueue")
}

func TestBinaryHelp(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := proctest.Run(t, enqueue(t), nil, "", "help")
	if code != 0 || stderr != "" {
		t.Fatalf("help: exit %d, stderr %q", code, stderr)
	}
	for _, s := range []string{"Usage: enqueue <command>", "start <workflow>", "Exit codes:", "CAIRN_REDIS_URL"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("help output lacks %q:\n%s", s, stdout)
		}
	}
}

func TestBinaryUnknownCommand(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := proctest.Run(t, enqueue(t), nil, "", "frobnicate")
	if code != 2 || stdout != "" || stderr != "enqueue: unknown command \"frobnicate\" (run \"enqueue help\" for usage)\n" {
		t.Fatalf("unknown command: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestBinaryRedisUnreachable checks that go-redis's own logging does not
// add lines to the one-line error.
func TestBinaryRedisUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	bin := enqueue(t)
	start := time.Now()
	stdout, stderr, code := proctest.Run(t, bin, []string{"CAIRN_REDIS_URL=redis://" + addr}, "", "list")
	if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 ||
		!strings.HasPrefix(stderr, "enqueue: cannot reach Redis at "+addr+": ") {
		t.Fatalf("unreachable Redis: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v to report an unreachable Redis", took)
	}
}

// TestBinaryUnknownRun runs the binary against a real Redis.
func TestBinaryUnknownRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	id := workflow.NewRunID(time.Now())
	stdout, stderr, code := proctest.Run(t, enqueue(t),
		[]string{"CAIRN_REDIS_URL=" + srv.URL(), "CAIRN_QUEUE=binary_unknown_run"}, "", "status", id)
	if code != 2 || stdout != "" || stderr != "enqueue: run not found: "+id+"\n" {
		t.Fatalf("status of an unknown run: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = proctest.Run(t, enqueue(t),
		[]string{"CAIRN_REDIS_URL=" + srv.URL(), "CAIRN_QUEUE=binary_unknown_run"}, "", "list", "--json")
	if code != 0 || stdout != "[]\n" || stderr != "" {
		t.Fatalf("list of an empty queue: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
