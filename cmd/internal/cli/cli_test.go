package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/cairn/cmd/internal/cli"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

func TestStartPrintsRunIDAndStatusJSONDescribesIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())

	r := e.run("start", "demo")
	mustSucceed(t, r)
	if r.stderr != "" {
		t.Errorf("start printed on stderr: %q", r.stderr)
	}
	id := runID(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := e.client.Wait(ctx, id, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}

	r = e.run("status", id, "--json")
	mustSucceed(t, r)
	var m map[string]any
	decode(t, r.stdout, &m)
	for _, k := range []string{"id", "workflow", "status", "warning", "needs_attention", "failure_reason",
		"created_at", "finished_at", "steps"} {
		if _, ok := m[k]; !ok {
			t.Errorf("status --json has no %q field", k)
		}
	}
	want := map[string]any{"id": id, "workflow": "demo", "status": "succeeded", "warning": "",
		"needs_attention": false, "failure_reason": ""}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %#v, want %#v", k, m[k], v)
		}
	}
	for _, k := range []string{"created_at", "finished_at"} {
		s, ok := m[k].(string)
		if _, err := time.Parse(time.RFC3339Nano, s); !ok || err != nil {
			t.Errorf("%s = %#v, want an RFC 3339 time", k, m[k])
		}
	}
	steps, ok := m["steps"].([]any)
	if !ok || len(steps) != 3 {
		t.Fatalf("steps = %#v, want 3 steps", m["steps"])
	}
	for i, name := range []string{"fetch", "transform", "deliver"} {
		st, ok := steps[i].(map[string]any)
		if !ok {
			t.Fatalf("steps[%d] = %#v, want an object", i, steps[i])
		}
		next, present := st["next_attempt_at"]
		if !present || next != nil {
			t.Errorf("step %s: next_attempt_at = %#v (present %v), want null", name, next, present)
		}
		want := map[string]any{"name": name, "status": "succeeded", "attempts": float64(1),
			"retry_state": "none", "last_error": "", "optional": false}
		for k, v := range want {
			if st[k] != v {
				t.Errorf("step %s: %s = %#v, want %#v", name, k, st[k], v)
			}
		}
	}

	// The readable form has the same facts.
	r = e.run("status", id)
	mustSucceed(t, r)
	for _, s := range []string{id, "demo", "succeeded", "needs attention:  no", "STEP", "RETRY", "NEXT ATTEMPT",
		"fetch", "transform", "deliver"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("status output does not contain %q:\n%s", s, r.stdout)
		}
	}
}

func TestStartJSONPrintsTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())
	r := e.run("start", "demo", "--json", "--input", `{"step_sleep_ms": 1}`)
	mustSucceed(t, r)
	var run workflow.Run
	decode(t, r.stdout, &run)
	if !workflow.ValidRunID(run.ID) || run.Workflow != "demo" || run.Owner != "cli" || len(run.Steps) != 3 {
		t.Errorf("start --json printed %+v", run)
	}
	var input bytes.Buffer
	if err := json.Compact(&input, run.Input); err != nil || input.String() != `{"step_sleep_ms":1}` {
		t.Errorf("input %s, want the compacted --input", run.Input)
	}
}

func TestStartWaitRetriesThenSucceeds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())
	r := e.run("start", "demo", "--wait", "--input", `{"fail_step":"transform","fail_times":2}`)
	mustSucceed(t, r)
	id := runID(t, r)
	for _, s := range []string{
		"transform: attempt 1 failed: transform: injected failure on attempt 1 of 2",
		"transform: attempt 2 failed: transform: injected failure on attempt 2 of 2",
		"next attempt 2", "next attempt 3",
		"transform: attempt 3 succeeded",
		"run " + id + " succeeded",
	} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr does not contain %q:\n%s", s, r.stderr)
		}
	}
	// One line per transition: the journal is read once per change.
	for _, l := range []string{
		"transform: attempt 1 failed: transform: injected failure on attempt 1 of 2",
		"transform: attempt 2 failed: transform: injected failure on attempt 2 of 2",
		"transform: attempt 2 started",
	} {
		if n := strings.Count("\n"+r.stderr, "\n"+l+"\n"); n != 1 {
			t.Errorf("%d lines with %q, want 1:\n%s", n, l, r.stderr)
		}
	}
	if last := lastLine(r.stderr); !strings.HasPrefix(last, "run "+id+" succeeded in ") {
		t.Errorf("the last stderr line is %q, want the final status", last)
	}
	if got := e.get(id).Status; got != workflow.StatusSucceeded {
		t.Errorf("run status %s, want succeeded", got)
	}
}

func lastLine(s string) string {
	s = strings.TrimSuffix(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

func TestStartWaitPermanentFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())
	r := e.run("start", "--wait", "demo", "--input", `{"fail_step":"fetch","permanent":true}`)
	if r.code != 1 {
		t.Fatalf("want exit 1, got %v", r)
	}
	id := runID(t, r)
	last := lastLine(r.stderr)
	if !strings.HasPrefix(last, "enqueue: run "+id+" failed: ") || !strings.Contains(last, "permanent error") {
		t.Errorf("last stderr line %q, want the failure reason", last)
	}
	if !strings.Contains(r.stderr, "fetch: attempt 1 failed permanently: ") {
		t.Errorf("stderr does not show the permanent failure:\n%s", r.stderr)
	}
	run := e.get(id)
	if run.Status != workflow.StatusFailed || !run.NeedsAttention || !strings.Contains(last, run.FailureReason) {
		t.Errorf("run %+v; last line %q", run, last)
	}
}

func TestStartWaitRetriesExhausted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())
	r := e.run("start", "demo", "--wait", "--json", "--input", `{"fail_step":"fetch","fail_times":10}`)
	if r.code != 1 {
		t.Fatalf("want exit 1, got %v", r)
	}
	// --json prints the run as it ended.
	var run workflow.Run
	decode(t, r.stdout, &run)
	if run.Status != workflow.StatusFailed || run.FailureCode != workflow.CodeRetriesExhausted {
		t.Errorf("final run: status %s, code %s", run.Status, run.FailureCode)
	}
	if st := run.Step("fetch"); st == nil || st.Attempts != 4 || st.RetryState != workflow.RetryExhausted {
		t.Errorf("fetch step %+v, want 4 attempts, retries exhausted", st)
	}
	if n := len(lines(r.stderr, "fetch: attempt ")); n < 4 {
		t.Errorf("stderr shows %d attempt lines:\n%s", n, r.stderr)
	}
	last := lastLine(r.stderr)
	if !strings.HasPrefix(last, "enqueue: run "+run.ID+" failed: ") || !strings.Contains(last, "after 4 attempts") {
		t.Errorf("last stderr line %q, want the reason", last)
	}
}

func TestStartWaitCountdown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Long enough a backoff for the countdown to be seen several times.
	e.startWorker(workflow.Policy{InitialInterval: 1500 * time.Millisecond, MaxInterval: 2 * time.Second,
		Jitter: workflow.JitterNone})
	input := `{"fail_step":"fetch","fail_times":1}`

	t.Run("terminal", func(t *testing.T) {
		r := e.invoke(invocation{args: []string{"start", "demo", "--wait", "--input", input}, tty: true,
			environ: e.environ("COLUMNS=200")})
		mustSucceed(t, r)
		// On a terminal the countdown rewrites one line in place.
		const redraw = "\r\x1b[Kfetch: attempt 1 failed: fetch: injected failure on attempt 1 of 1; next attempt 2 "
		if n := strings.Count(r.stderr, redraw); n < 3 {
			t.Errorf("countdown drawn %d times, want at least 3:\n%q", n, r.stderr)
		}
		for l := range strings.SplitSeq(r.stderr, "\n") {
			if strings.Contains(l, "; next attempt") && !strings.HasPrefix(l, "\r") {
				t.Errorf("countdown on a line of its own: %q", l)
			}
		}
		// It is erased before the next line.
		if !strings.Contains(r.stderr, "\r\x1b[Kfetch: attempt 2 started\n") {
			t.Errorf("countdown not erased before the next line:\n%q", r.stderr)
		}
	})
	t.Run("not a terminal", func(t *testing.T) {
		began := time.Now()
		r := e.invoke(invocation{args: []string{"start", "demo", "--wait", "--input", input}, environ: e.environ()})
		took := time.Since(began)
		mustSucceed(t, r)
		if strings.Contains(r.stderr, "\r") {
			t.Errorf("carriage return on a non-terminal:\n%q", r.stderr)
		}
		// One countdown line for the retry, however long it waits (1.5s,
		// plus until the retry is delivered: longer on a loaded machine).
		n := len(lines(r.stderr, "fetch: attempt 1 failed: fetch: injected failure on attempt 1 of 1; next attempt 2 "))
		if n != 1 {
			t.Errorf("%d countdown lines in %s, want 1:\n%s", n, took.Round(time.Millisecond), r.stderr)
		}
		// Each line is said once: no line repeats.
		seen := map[string]bool{}
		for l := range strings.SplitSeq(strings.TrimSuffix(r.stderr, "\n"), "\n") {
			if seen[l] {
				t.Errorf("line %q printed twice:\n%s", l, r.stderr)
			}
			seen[l] = true
		}
	})
}

// TestStartWaitStdoutPiped: with stdout piped (enqueue start --wait | ...)
// the countdown does not rewrite itself on the terminal's stderr either:
// one line for the retry.
func TestStartWaitStdoutPiped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(workflow.Policy{InitialInterval: 1500 * time.Millisecond, MaxInterval: 2 * time.Second,
		Jitter: workflow.JitterNone})
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	c := &cli.CLI{Stdout: &stdout, Stderr: &stderr, Environ: e.environ("COLUMNS=200"),
		IsTerminal: func(w io.Writer) bool { return w == &stderr }}
	code := c.Run(ctx, []string{"start", "demo", "--wait", "--input", `{"fail_step":"fetch","fail_times":1}`})
	r := result{stdout: stdout.String(), stderr: stderr.String(), code: code}
	mustSucceed(t, r)
	if strings.Contains(r.stderr, "\r") {
		t.Errorf("carriage return with stdout piped:\n%q", r.stderr)
	}
	if n := len(lines(r.stderr, "; next attempt 2 ")); n != 1 {
		t.Errorf("%d countdown lines, want 1:\n%s", n, r.stderr)
	}
}

func TestStartWaitInterrupted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(workflow.Policy{InitialInterval: 5 * time.Second, MaxInterval: 10 * time.Second,
		Jitter: workflow.JitterNone})
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	go func() {
		// Interrupt once the run waits for its retry, as SIGINT would.
		defer interrupt()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			runs, _, err := e.client.List(context.Background(), workflow.ListOptions{})
			if err == nil && len(runs) == 1 && runs[0].Warning == workflow.WarningRetryPending {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	r := e.invoke(invocation{ctx: ctx, args: []string{"start", "demo", "--wait", "--input", `{"fail_step":"fetch","fail_times":3}`},
		environ: e.environ()})
	if r.code != 1 {
		t.Fatalf("want exit 1, got %v", r)
	}
	id := runID(t, r)
	want := "enqueue: interrupted: stopped waiting for run " + id + ", which is running (see: enqueue status " + id + ")"
	if last := lastLine(r.stderr); !strings.HasPrefix(last, want) {
		t.Errorf("last stderr line %q, want %q...", last, want)
	}
	if run := e.get(id); run.Status != workflow.StatusRunning || run.Warning != workflow.WarningRetryPending {
		t.Errorf("the interrupted wait changed the run: %+v", run)
	}
}

func TestFlagsBeforeOrAfterTheArgument(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())
	for _, args := range [][]string{
		{"start", "demo", "--wait"},
		{"start", "--wait", "demo"},
		{"start", "-wait", "demo", "--input={}"},
	} {
		r := e.run(args...)
		mustSucceed(t, r)
		id := runID(t, r)
		if got := e.get(id).Status; got != workflow.StatusSucceeded {
			t.Errorf("%v: run %s, want succeeded (--wait ignored?)", args, got)
		}
		a, b := e.run("status", id, "--json"), e.run("status", "--json", id)
		mustSucceed(t, a)
		if a.stdout != b.stdout || !strings.HasPrefix(a.stdout, "{") {
			t.Errorf("status <id> --json and status --json <id> differ:\n%s\n%s", a.stdout, b.stdout)
		}
	}
}

func TestInputFromFileAndStdin(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())
	path := filepath.Join(t.TempDir(), "input.json")
	if err := os.WriteFile(path, []byte("{\n  \"source\": \"file\",\n  \"n\": 1\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	r := e.run("start", "demo", "--input", "@"+path)
	mustSucceed(t, r)
	if got := string(e.get(runID(t, r)).Input); got != `{"source":"file","n":1}` {
		t.Errorf("input from @file = %s", got)
	}

	r = e.invoke(invocation{args: []string{"start", "demo", "--input", "@-"}, stdin: ` {"source": "stdin"} `,
		environ: e.environ()})
	mustSucceed(t, r)
	if got := string(e.get(runID(t, r)).Input); got != `{"source":"stdin"}` {
		t.Errorf("input from @- = %s", got)
	}

	r = e.run("start", "demo")
	mustSucceed(t, r)
	if got := string(e.get(runID(t, r)).Input); got != `{}` {
		t.Errorf("input without --input = %s, want {}", got)
	}
}

func TestIdempotencyKeyStartsOneRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())
	first := e.run("start", "demo", "--idempotency-key", "order-42")
	mustSucceed(t, first)
	second := e.run("start", "--idempotency-key=order-42", "demo", "--input", `{"other":true}`)
	mustSucceed(t, second)
	if a, b := runID(t, first), runID(t, second); a != b {
		t.Fatalf("same key started two runs: %s and %s", a, b)
	}
	r := e.run("list", "--json")
	mustSucceed(t, r)
	var runs []workflow.Run
	decode(t, r.stdout, &runs)
	if len(runs) != 1 || runs[0].ID != runID(t, first) || runs[0].IdempotencyKey != "order-42" {
		t.Errorf("list after two starts with one key: %+v", runs)
	}
}

func TestListAndEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())
	r := e.run("start", "demo", "--wait", "--input", `{"fail_step":"fetch","fail_times":1}`)
	mustSucceed(t, r)
	retried := runID(t, r)
	r = e.run("start", "demo", "--wait", "--input", `{"fail_step":"deliver","permanent":true}`)
	if r.code != 1 {
		t.Fatalf("want exit 1, got %v", r)
	}
	failed := runID(t, r)

	ids := func(args ...string) []string {
		t.Helper()
		r := e.run(append([]string{"list", "--json"}, args...)...)
		mustSucceed(t, r)
		var runs []workflow.Run
		decode(t, r.stdout, &runs)
		var out []string
		for _, run := range runs {
			out = append(out, run.ID)
		}
		return out
	}
	if got, want := ids(), []string{failed, retried}; !slices.Equal(got, want) {
		t.Errorf("list = %v, want %v (newest first)", got, want)
	}
	if got := ids("--status", "failed"); !slices.Equal(got, []string{failed}) {
		t.Errorf("list --status failed = %v, want [%s]", got, failed)
	}
	if got := ids("--status=succeeded"); !slices.Equal(got, []string{retried}) {
		t.Errorf("list --status=succeeded = %v, want [%s]", got, retried)
	}
	if got := ids("--status", "cancelled"); len(got) != 0 {
		t.Errorf("list --status cancelled = %v, want none", got)
	}
	if r := e.run("list", "--status", "running", "--json"); r.stdout != "[]\n" {
		t.Errorf("empty list --json printed %q, want []", r.stdout)
	}
	r = e.run("list", "--limit", "1", "--json")
	mustSucceed(t, r)
	var page []workflow.Run
	decode(t, r.stdout, &page)
	cursor, ok := strings.CutPrefix(strings.TrimSuffix(r.stderr, "\n"), "more runs: add --cursor ")
	if len(page) != 1 || !ok {
		t.Fatalf("list --limit 1: %d runs, stderr %q", len(page), r.stderr)
	}
	// The cursor it printed is taken: the next page is the other run.
	if got := ids("--limit", "1", "--cursor", cursor); !slices.Equal(got, []string{retried}) {
		t.Errorf("list --limit 1 --cursor %s = %v, want [%s]", cursor, got, retried)
	}

	r = e.run("list")
	mustSucceed(t, r)
	table := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(table) != 3 || !strings.HasPrefix(table[0], "ID") || !strings.Contains(table[0], "CREATED") ||
		!strings.HasPrefix(table[1], failed) || !strings.Contains(table[1], "failed") ||
		!strings.HasPrefix(table[2], retried) || !strings.Contains(table[2], "succeeded") {
		t.Errorf("list table:\n%s", r.stdout)
	}

	r = e.run("events", retried, "--json")
	mustSucceed(t, r)
	var evs []map[string]any
	decode(t, r.stdout, &evs)
	types := map[string]bool{}
	for _, ev := range evs {
		typ, _ := ev["type"].(string)
		types[typ] = true
		if at, ok := ev["at"].(string); !ok {
			t.Errorf("event %v has no time", ev)
		} else if _, err := time.Parse(time.RFC3339Nano, at); err != nil {
			t.Errorf("event time %q: %v", at, err)
		}
		if strings.HasPrefix(typ, "attempt_") || typ == workflow.EventRetryScheduled {
			if _, ok := ev["step"].(string); !ok {
				t.Errorf("%s event has no step: %v", typ, ev)
			}
			if _, ok := ev["attempt"].(float64); !ok {
				t.Errorf("%s event has no attempt: %v", typ, ev)
			}
		}
	}
	for _, typ := range []string{workflow.EventRunStarted, workflow.EventAttemptStarted, workflow.EventAttemptFailed,
		workflow.EventRetryScheduled, workflow.EventRunSucceeded} {
		if !types[typ] {
			t.Errorf("events --json has no %s event:\n%s", typ, r.stdout)
		}
	}

	r = e.run("events", retried)
	mustSucceed(t, r)
	if n := strings.Count(r.stdout, "\n"); n != len(evs)+1 {
		t.Errorf("events printed %d lines for %d events:\n%s", n, len(evs), r.stdout)
	}
	if !strings.Contains(r.stdout, `error="fetch: injected failure on attempt 1 of 1"`) ||
		!strings.Contains(r.stdout, "retry_scheduled") {
		t.Errorf("events table lacks the failure details:\n%s", r.stdout)
	}
	// Each attempt names the worker that ran it (host:pid:random).
	for line := range strings.SplitSeq(r.stdout, "\n") {
		if strings.Contains(line, workflow.EventAttemptStarted) && !regexp.MustCompile(`worker=\S+:\d+:[0-9a-f]+`).MatchString(line) {
			t.Errorf("an attempt_started line names no worker: %s", line)
		}
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A long backoff keeps the retry pending while the test cancels.
	e.startWorker(workflow.Policy{InitialInterval: 5 * time.Second, MaxInterval: 10 * time.Second,
		Jitter: workflow.JitterNone})
	r := e.run("start", "demo", "--input", `{"fail_step":"fetch","fail_times":3}`)
	mustSucceed(t, r)
	id := runID(t, r)
	testkit.Eventually(t, 10*time.Second, "the retry of fetch to be scheduled", func() bool {
		st := e.get(id).Step("fetch")
		return st != nil && st.RetryState == workflow.RetryScheduled
	})

	r = e.run("cancel", id)
	mustSucceed(t, r)
	if r.stdout != "cancelled "+id+"\n" || r.stderr != "" {
		t.Errorf("cancel printed %v", r)
	}
	r = e.run("status", id, "--json")
	mustSucceed(t, r)
	var run workflow.Run
	decode(t, r.stdout, &run)
	if run.Status != workflow.StatusCancelled || run.Warning != "" || run.FinishedAt == nil {
		t.Errorf("after cancel: %+v", run)
	}
	if st := run.Step("fetch"); st == nil || st.RetryState != workflow.RetryNone || st.NextAttemptAt != nil {
		t.Errorf("fetch after cancel: %+v", st)
	}

	// Idempotent.
	r = e.run("cancel", id)
	mustSucceed(t, r)
	if r.stdout != "cancelled "+id+"\n" {
		t.Errorf("second cancel printed %v", r)
	}
	r = e.run("events", id, "--json")
	mustSucceed(t, r)
	var evs []workflow.Event
	decode(t, r.stdout, &evs)
	n := 0
	for _, ev := range evs {
		if ev.Type == workflow.EventRunCancelled {
			n++
			if ev.Details["actor"] != "cli" {
				t.Errorf("run_cancelled actor %q, want cli", ev.Details["actor"])
			}
		}
	}
	if n != 1 {
		t.Errorf("%d run_cancelled events, want 1", n)
	}

	// A finished run cannot be cancelled.
	r = e.run("start", "demo", "--wait")
	mustSucceed(t, r)
	done := runID(t, r)
	r = e.run("cancel", done)
	checkOneErrorLine(t, r, 1, "run "+done+" already finished (succeeded)")
	if got := e.get(done).Status; got != workflow.StatusSucceeded {
		t.Errorf("cancel of a succeeded run left it %s", got)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy()) // so that "demo" is known and only the input is wrong
	unknownID := workflow.NewRunID(time.Now())
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte("{}"+strings.Repeat(" ", 1<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  string
	}{
		{"unknown workflow", []string{"start", "nope"}, "", 2, `unknown workflow "nope": no worker on queue`},
		{"malformed workflow name", []string{"start", "no such/name"}, "", 2, `unknown workflow "no such/name"`},
		{"malformed input", []string{"start", "demo", "--input", `{"fail_step":`}, "", 2, "--input is not valid JSON"},
		{"two JSON values", []string{"start", "demo", "--input", `{} {}`}, "", 2, "--input is not valid JSON"},
		{"malformed stdin", []string{"start", "demo", "--input", "@-"}, "{oops", 2, "--input @- (stdin) is not valid JSON"},
		{"empty input", []string{"start", "demo", "--input", ""}, "", 2, "--input is empty"},
		{"empty stdin", []string{"start", "demo", "--input", "@-"}, "", 2, "is empty"},
		{"missing file", []string{"start", "demo", "--input", "@/nonexistent/input.json"}, "", 2,
			"--input @/nonexistent/input.json: open /nonexistent/input.json: no such file or directory"},
		{"input too large", []string{"start", "demo", "--input", "@-"}, `"` + strings.Repeat("x", 1<<20) + `"`, 2,
			"--input @- (stdin): input larger than 1048576 bytes"},
		{"idempotency key too long", []string{"start", "demo", "--idempotency-key", strings.Repeat("k", 300)}, "", 2,
			"idempotency key longer than 256 bytes"},
		{"missing workflow", []string{"start", "--wait"}, "", 2, "start: missing workflow name"},
		{"extra argument", []string{"start", "demo", "more"}, "", 2, `start: unexpected argument "more"`},
		{"unknown flag", []string{"start", "demo", "--bogus"}, "", 2, `start: unknown flag "--bogus"`},
		{"flag without value", []string{"start", "demo", "--input"}, "", 2, "start: flag --input needs a value"},
		{"unknown command", []string{"frobnicate"}, "", 2, `unknown command "frobnicate"`},
		{"help for unknown command", []string{"help", "frobnicate"}, "", 2, `unknown command "frobnicate"`},
		{"help with two commands", []string{"help", "start", "list"}, "", 2, "help: too many arguments"},
		{"unknown run ID", []string{"status", unknownID}, "", 2, "run not found: " + unknownID},
		{"unknown run ID events", []string{"events", unknownID, "--json"}, "", 2, "run not found"},
		{"unknown run ID cancel", []string{"cancel", unknownID}, "", 2, "run not found"},
		{"invalid run ID", []string{"status", "not-a-run-id"}, "", 2, `invalid run ID "not-a-run-id"`},
		{"invalid run ID events", []string{"events", "01J"}, "", 2, "invalid run ID"},
		{"invalid run ID cancel", []string{"cancel", strings.ToUpper(unknownID)}, "", 2, "invalid run ID"},
		{"missing run ID", []string{"status", "--json"}, "", 2, "status: missing run ID"},
		{"invalid status", []string{"list", "--status", "done"}, "", 2, `list: invalid --status "done"`},
		{"invalid limit", []string{"list", "--limit", "0"}, "", 2, "list: invalid --limit 0"},
		{"limit not a number", []string{"list", "--limit", "ten"}, "", 2, `invalid value "ten" for flag --limit`},
		{"list argument", []string{"list", "failed"}, "", 2, `list: unexpected argument "failed"`},
		{"malformed cursor", []string{"list", "--cursor", "garbage"}, "", 2, `list: malformed cursor "garbage": pass the cursor`},
		{"cursor without a run ID", []string{"list", "--cursor=1700000000000:X_"}, "", 2, `list: malformed cursor "1700000000000:X_"`},
		{"cursor without a time", []string{"list", "--cursor", ":" + unknownID}, "", 2, "list: malformed cursor"},
		{"bad boolean", []string{"list", "--json=maybe"}, "", 2, `invalid value "maybe" for flag --json`},
		{"input @ without a name", []string{"start", "demo", "--input", "@"}, "", 2, "--input @: missing file name"},
		{"input from a directory", []string{"start", "demo", "--input", "@" + dir}, "", 2,
			"--input @" + dir + ": " + dir + " is a directory, not a regular file"},
		{"input from a named pipe", []string{"start", "demo", "--input", "@" + fifo}, "", 2,
			"--input @" + fifo + ": " + fifo + " is a named pipe (FIFO), not a regular file"},
		{"input from /dev/zero", []string{"start", "demo", "--input", "@/dev/zero"}, "", 2,
			"--input @/dev/zero: /dev/zero is a character device, not a regular file"},
		{"input file too large", []string{"start", "demo", "--input", "@" + big}, "", 2, "input larger than 1048576 bytes"},
		{"retry without --step", []string{"retry", unknownID}, "", 2, "retry needs --step NAME"},
		{"cancel with a bad --compensate", []string{"cancel", unknownID, "--compensate=maybe"}, "", 2,
			`cancel: invalid value "maybe" for flag --compensate`},
		{"cancel with an unknown flag", []string{"cancel", unknownID, "--compensated"}, "", 2,
			`cancel: unknown flag "--compensated": did you mean "--compensate"?`},
		{"cancel --compensate of an unknown run", []string{"cancel", "--compensate", unknownID}, "", 2, "run not found"},
		{"cancel --compensate without a run", []string{"cancel", "--compensate"}, "", 2, "cancel: missing run ID"},
		{"cancel --compensate with two runs", []string{"cancel", "--compensate", unknownID, unknownID}, "", 2,
			"cancel: unexpected argument"},
		{"list of a bad status", []string{"list", "--status", "compensate"}, "", 2,
			`list: invalid --status "compensate": want pending, running, succeeded, failed, cancelled, compensating, compensated`},
		{"recover with --step", []string{"recover", unknownID, "--step", "fetch"}, "", 2, "recover takes no --step"},
		{"validate /dev/zero", []string{"validate", "/dev/zero"}, "", 2, "validate: /dev/zero is a character device, not a regular file"},
		{"validate a named pipe", []string{"validate", fifo}, "", 2, "validate: " + fifo + " is a named pipe (FIFO)"},
		{"validate a directory", []string{"validate", dir}, "", 2, "validate: " + dir + " is a directory"},
		{"validate a missing file", []string{"validate", filepath.Join(dir, "nope.yaml")}, "", 2, "no such file or directory"},
	}
	t.Run("cases", func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				// Promptly: a command that blocks on its input fails
				// rather than hangs.
				r := invokePromptly(t, invocation{args: tc.args, stdin: tc.stdin, environ: e.environ()}, nil)
				checkOneErrorLine(t, r, tc.code, tc.want)
			})
		}
	})
	// None of them wrote a run.
	if keys := e.runKeys(); len(keys) != 0 {
		t.Errorf("bad input wrote run keys: %v", keys)
	}
	// Whereas a good start does (the check above can fail).
	mustSucceed(t, e.run("start", "demo"))
	if keys := e.runKeys(); len(keys) == 0 {
		t.Errorf("a good start wrote no run keys under cairn:{%s}:run:*", e.queue)
	}
}

func TestBadConfig(t *testing.T) {
	t.Parallel()
	r := invoke(t, invocation{args: []string{"list"}, environ: []string{"CAIRN_LOG_FORMAT=xml"}})
	checkOneErrorLine(t, r, 2, `enqueue: bad configuration: CAIRN_LOG_FORMAT: "xml": want text or json`)
	r = invoke(t, invocation{args: []string{"list"}, environ: []string{"CAIRN_RETENTION=soon"}})
	checkOneErrorLine(t, r, 2, "enqueue: bad configuration: CAIRN_RETENTION: cannot parse")
	// A Sentinel URL without its master, a cluster URL with a database:
	// one line, without the password.
	r = invoke(t, invocation{args: []string{"list"}, environ: []string{"CAIRN_REDIS_URL=redis-sentinel://:hunter2@10.0.0.1,10.0.0.2"}})
	checkOneErrorLine(t, r, 2, "enqueue: bad configuration: CAIRN_REDIS_URL: no master name: add ?master=NAME")
	r = invoke(t, invocation{args: []string{"list"}, environ: []string{"CAIRN_REDIS_URL=redis-cluster://:hunter2@h:1/3"}})
	checkOneErrorLine(t, r, 2, "enqueue: bad configuration: CAIRN_REDIS_URL: database \"3\": a Redis Cluster has only database 0")
	r = invoke(t, invocation{args: []string{"list"}, environ: []string{"CAIRN_REDIS_URL=redis://:hunter2@h:port"}})
	checkOneErrorLine(t, r, 2, "enqueue: bad configuration: CAIRN_REDIS_URL: not a URL")
	if strings.Contains(r.stderr, "hunter2") {
		t.Errorf("the error shows the password: %q", r.stderr)
	}

	// One line per problem, each naming its variable.
	r = invoke(t, invocation{args: []string{"status", workflow.NewRunID(time.Now())},
		environ: []string{"CAIRN_LOG_FORMAT=xml", "CAIRN_REDIS_URL=http://example.com", "CAIRN_QUEUE=a:b"}})
	if r.code != 2 || r.stdout != "" {
		t.Errorf("want exit 2 and no stdout, got %v", r)
	}
	got := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(got) != 3 {
		t.Fatalf("want 3 lines, got %v", r)
	}
	for _, v := range []string{"CAIRN_QUEUE", "CAIRN_REDIS_URL", "CAIRN_LOG_FORMAT"} {
		if !slices.ContainsFunc(got, func(l string) bool {
			return strings.HasPrefix(l, "enqueue: bad configuration: "+v+": ")
		}) {
			t.Errorf("stderr lacks a line naming %s: %v", v, r)
		}
	}
}

func TestRedisUnreachable(t *testing.T) {
	t.Parallel()
	addr := testkit.FreeAddr(t)
	for _, tc := range []struct {
		name    string
		environ []string
		want    string
	}{
		{"url", []string{"CAIRN_REDIS_URL=redis://" + addr}, "(is Redis running there? check CAIRN_REDIS_URL)"},
		{"embedded", []string{"CAIRN_EMBEDDED_ADDR=" + addr}, "(is the worker running? with CAIRN_REDIS_URL unset"},
		{"sentinel", []string{"CAIRN_REDIS_URL=redis-sentinel://:hunter2@" + addr + "?master=m"},
			"(is Redis running there? check CAIRN_REDIS_URL)"},
		{"cluster", []string{"CAIRN_REDIS_URL=redis-cluster://:hunter2@" + addr}, "(is Redis running there? check CAIRN_REDIS_URL)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Through Main, as the binary runs it.
			var stdout, stderr bytes.Buffer
			start := time.Now()
			code := cli.Main(context.Background(), []string{"list"}, strings.NewReader(""), &stdout, &stderr, tc.environ)
			took := time.Since(start)
			r := result{stdout: stdout.String(), stderr: stderr.String(), code: code}
			where := map[string]string{"sentinel": "sentinel master m via " + addr + " db 0", "cluster": "cluster " + addr}[tc.name]
			if where == "" {
				where = addr
			}
			checkOneErrorLine(t, r, 1, "enqueue: cannot reach Redis at "+where+": ")
			if strings.Contains(r.stderr, "hunter2") {
				t.Errorf("the error shows the password: %q", r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q lacks the hint %q", r.stderr, tc.want)
			}
			// Nothing listens there: the connection is refused at once,
			// and the CLI waits for Redis at most its ping timeout (3s)
			// whatever happens. Twice that is a ceiling only a CLI that
			// waits on (go-redis's retries, a dial timeout per attempt)
			// misses.
			if limit := 2 * cli.PingTimeout; took > limit {
				t.Errorf("took %v to report an unreachable Redis; want within %s", took, limit)
			}
		})
	}

	// Bad input is reported as such, before any connection is tried.
	r := invoke(t, invocation{args: []string{"start", "demo", "--input", "{"},
		environ: []string{"CAIRN_REDIS_URL=redis://" + addr}})
	checkOneErrorLine(t, r, 2, "--input is not valid JSON")
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"help", "help"}} {
		r := invoke(t, invocation{args: args})
		mustSucceed(t, r)
		if r.stderr != "" {
			t.Errorf("%v printed on stderr: %q", args, r.stderr)
		}
		for _, s := range []string{"Usage: enqueue <command>", "start <workflow>", "status <run-id>", "list",
			"events <run-id>", "cancel <run-id>", "--compensate", "compensate:STEP", "--input JSON|@file", "--idempotency-key", "--wait", "--json",
			"--status S", "--limit N", "Exit codes:", "  2  usage error", "CAIRN_REDIS_URL", "CAIRN_QUEUE",
			"compensating or compensated", "failed, cancelled or compensated"} {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("%v: usage lacks %q", args, s)
			}
		}
	}
	for _, args := range [][]string{{"help", "start"}, {"start", "-h"}, {"start", "demo", "--help"}} {
		r := invoke(t, invocation{args: args})
		mustSucceed(t, r)
		if !strings.HasPrefix(r.stdout, "Usage: enqueue start <workflow>") || !strings.Contains(r.stdout, "--idempotency-key") {
			t.Errorf("%v printed %v", args, r)
		}
	}
	r := invoke(t, invocation{args: []string{"cancel", "--help"}})
	mustSucceed(t, r)
	if !strings.HasPrefix(r.stdout, "Usage: enqueue cancel <run-id> [flags]") || !strings.Contains(r.stdout, "--compensate") ||
		!strings.Contains(r.stdout, "compensated with code cancelled") {
		t.Errorf("cancel --help printed %v", r)
	}
	checkOneErrorLine(t, invoke(t, invocation{args: []string{"--help", "bogus"}}), 2, `help: unknown command "bogus"`)
	checkOneErrorLine(t, invoke(t, invocation{args: []string{"help", "statsu"}}), 2,
		`help: unknown command "statsu": did you mean "status"?`)
	// No command: the usage, as an error.
	r = invoke(t, invocation{})
	if r.code != 2 || r.stdout != "" || !strings.HasPrefix(r.stderr, "Usage: enqueue <command>") {
		t.Errorf("no arguments: %v", r)
	}
}
