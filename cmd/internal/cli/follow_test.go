package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/cmd/internal/cli"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// syncBuffer is a bytes.Buffer that a test may read while the CLI writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

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

// following is an events --follow running in the background.
type following struct {
	stdout, stderr syncBuffer
	cancel         context.CancelFunc
	done           chan result
}

// follow starts "enqueue events <id> --follow args..." in the background.
func (e *env) follow(id string, args ...string) *following {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	e.t.Cleanup(cancel)
	f := &following{cancel: cancel, done: make(chan result, 1)}
	c := &cli.CLI{Stdout: &f.stdout, Stderr: &f.stderr, Environ: e.environ(),
		IsTerminal: func(io.Writer) bool { return false }}
	go func() {
		code := c.Run(ctx, append([]string{"events", id, "--follow"}, args...))
		f.done <- result{stdout: f.stdout.String(), stderr: f.stderr.String(), code: code}
	}()
	return f
}

// result waits for the command to end.
func (f *following) result(t *testing.T) result {
	t.Helper()
	select {
	case r := <-f.done:
		return r
	case <-time.After(runTimeout + 5*time.Second):
		t.Fatal("events --follow did not end")
		return result{}
	}
}

// typesOf returns the TYPE column of an events table, header left out.
func typesOf(table string) []string {
	var out []string
	for i, l := range strings.Split(strings.TrimSuffix(table, "\n"), "\n") {
		if f := strings.Fields(l); i > 0 && len(f) > 1 {
			out = append(out, f[1]) // time, type
		}
	}
	return out
}

// journalTypes returns the types of a run's journal, oldest first.
func (e *env) journalTypes(id string) []string {
	e.t.Helper()
	evs, err := e.client.Events(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

func approveDefinition() workflow.Definition {
	return workflow.Definition{Name: "approve", Steps: []workflow.Step{
		{Name: "approval", Await: &workflow.Await{Signal: "approved", Timeout: 48 * time.Hour}},
		{Name: "done", Run: func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }},
	}}
}

// TestEventsFollow: events --follow prints the journal so far, then the
// events as they come, each once and in order, and ends with the run:
// exit 0 when it succeeds.
func TestEventsFollow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy(), approveDefinition())
	id := runID(t, e.run("start", "approve"))
	f := e.follow(id)
	testkit.Eventually(t, 30*time.Second, "the await to be shown", func() bool {
		return strings.Contains(f.stdout.String(), "await_started")
	})
	if strings.Contains(f.stdout.String(), "run_succeeded") {
		t.Fatalf("the run ended before its signal:\n%s", f.stdout.String())
	}
	// signal completes the signal the run awaits.
	for _, args := range [][]string{{"signal", id, ""}, {"signal", "--last", "app"}} {
		if answers, _ := completions(t, e.environ(), args...); len(answers) != 1 ||
			answers[0] != "approved\tawaited by step approval" {
			t.Errorf("completing %q: %q, want approved", args, answers)
		}
	}
	if answers, _ := completions(t, e.environ(), "signal", id, "x"); len(answers) != 0 {
		t.Errorf("completing signal x: %q, want nothing", answers)
	}
	mustSucceed(t, e.run("signal", id, "approved"))
	r := f.result(t)
	mustSucceed(t, r)
	if got, want := typesOf(r.stdout), e.journalTypes(id); !slices.Equal(got, want) {
		t.Errorf("printed events %q, want the journal's %q:\n%s", got, want, r.stdout)
	}
	if n := strings.Count(r.stdout, "TIME "); n != 1 {
		t.Errorf("%d headers, want 1:\n%s", n, r.stdout)
	}
	for _, want := range []string{"signal_received", "run_succeeded"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %s in\n%s", want, r.stdout)
		}
	}
	if !strings.HasPrefix(r.stderr, "run "+id+" succeeded") {
		t.Errorf("stderr %q, want the run's success", r.stderr)
	}
	// The rows line up with the header.
	rows := strings.Split(r.stdout, "\n")
	col := strings.Index(rows[0], "STEP")
	for _, row := range rows[1 : len(rows)-1] {
		if len(row) <= col || row[col-1] != ' ' || row[col] == ' ' {
			t.Errorf("row not aligned on STEP (column %d): %q", col, row)
		}
	}
}

// TestEventsFollowEnded: a run that has ended is printed at once, with
// --wait's exit code for its status; --json prints one event a line.
func TestEventsFollowEnded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())
	ok := runID(t, e.run("start", "demo", "--wait"))
	r := e.run("events", ok, "--follow")
	mustSucceed(t, r)
	if got, want := typesOf(r.stdout), e.journalTypes(ok); !slices.Equal(got, want) {
		t.Errorf("printed %q, want %q", got, want)
	}

	r = e.run("events", ok, "--follow", "--json")
	mustSucceed(t, r)
	evs, err := e.client.Events(context.Background(), ok)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != len(evs) {
		t.Fatalf("%d JSON lines, want %d events:\n%s", len(lines), len(evs), r.stdout)
	}
	for i, l := range lines {
		var ev workflow.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.ID != evs[i].ID || ev.Type != evs[i].Type {
			t.Errorf("line %d: %v %+v, want event %s %s", i, err, ev, evs[i].ID, evs[i].Type)
		}
	}

	failed := e.run("start", "demo", "--input", `{"fail_step":"fetch","permanent":true}`)
	id := runID(t, failed)
	e.waitStatus(id, workflow.StatusFailed)
	r = e.run("events", "--last", "--follow")
	if r.code != 1 || !strings.Contains(r.stdout, "run_failed") || !strings.HasPrefix(r.stderr, "enqueue: run "+id+" failed") {
		t.Errorf("a failed run: %v", r)
	}
	checkOneErrorLine(t, e.run("events", workflow.NewRunID(time.Now()), "--follow"), 2, "run not found")
	checkOneErrorLine(t, e.run("events", id, "--folow"), 2, `did you mean "--follow"?`)
}

// TestEventsFollowInterrupted: SIGINT (the context) stops following with
// exit 1 and the run's state; the run goes on.
func TestEventsFollowInterrupted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy(), approveDefinition())
	id := runID(t, e.run("start", "approve"))
	f := e.follow(id)
	testkit.Eventually(t, 30*time.Second, "the await to be shown", func() bool {
		return strings.Contains(f.stdout.String(), "await_started")
	})
	f.cancel()
	r := f.result(t)
	if r.code != 1 || r.stderr != "enqueue: interrupted: stopped following run "+id+", which is running (see: enqueue status "+id+")\n" {
		t.Errorf("interrupted: %v", r)
	}
	if st := e.get(id).Status; st != workflow.StatusRunning {
		t.Errorf("the run is %s, want it still running", st)
	}
}
