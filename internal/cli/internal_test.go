package cli

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

func TestParseArgsAcceptsFlagsAnywhere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args  []string
		pos   []string
		wait  bool
		input string
		limit int
	}{
		{args: []string{"demo", "--wait"}, pos: []string{"demo"}, wait: true},
		{args: []string{"--wait", "demo"}, pos: []string{"demo"}, wait: true},
		{args: []string{"-wait", "demo", "--input", "{}"}, pos: []string{"demo"}, wait: true, input: "{}"},
		{args: []string{"--input", "--wait", "demo"}, pos: []string{"demo"}, input: "--wait"},
		{args: []string{"--input={\"a\": 1}", "demo", "--limit", "-5"}, pos: []string{"demo"}, input: `{"a": 1}`, limit: -5},
		{args: []string{"demo", "--", "--wait"}, pos: []string{"demo", "--wait"}},
		{args: []string{"-", "x"}, pos: []string{"-", "x"}},
		{args: []string{"--wait=false", "demo"}, pos: []string{"demo"}},
	} {
		fs := newFlagSet("test")
		wait := fs.Bool("wait", false, "")
		input := fs.String("input", "", "")
		limit := fs.Int("limit", 0, "")
		pos, err := parseArgs(fs, tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if !slices.Equal(pos, tc.pos) || *wait != tc.wait || *input != tc.input || *limit != tc.limit {
			t.Errorf("%q: positional %q wait %v input %q limit %d; want %q %v %q %d",
				tc.args, pos, *wait, *input, *limit, tc.pos, tc.wait, tc.input, tc.limit)
		}
	}
}

func TestParseArgsErrors(t *testing.T) {
	t.Parallel()
	fs := newFlagSet("test")
	fs.Bool("wait", false, "")
	if _, err := parseArgs(fs, []string{"demo", "-h"}); !errors.Is(err, errHelp) {
		t.Errorf("-h: %v, want errHelp", err)
	}
	_, err := parseArgs(newFlagSet("test"), []string{"demo", "--nope"})
	if err == nil || exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "-nope") {
		t.Errorf("unknown flag: %v (exit %d)", err, exitCode(err))
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		code int
	}{
		{workflow.ErrUnknownWorkflow, ExitUsage},
		{errors.Join(errors.New("ctx"), workflow.ErrRunNotFound), ExitUsage},
		{workflow.ErrInvalidRunID, ExitUsage},
		{workflow.ErrInvalidInput, ExitUsage},
		{workflow.ErrInvalidStatus, ExitUsage},
		{workflow.ErrIdempotencyConflict, ExitUsage},
		{fmt.Errorf("list: %w", workflow.ErrInvalidCursor), ExitUsage},
		{usageErrorf("x"), ExitUsage},
		{failuref("x"), ExitFailure},
		{workflow.ErrRunFinished, ExitFailure},
		{errors.New("redis: connection reset"), ExitFailure},
	} {
		if got := exitCode(tc.err); got != tc.code {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.code)
		}
	}
}

// TestDocumentedLimits: the help (and the README) say 1 MiB and 8 MiB.
func TestDocumentedLimits(t *testing.T) {
	t.Parallel()
	if maxInputBytes != 1<<20 || maxWorkflowsFileBytes != 8<<20 {
		t.Errorf("limits %d and %d bytes; the help says 1 MiB and 8 MiB", maxInputBytes, maxWorkflowsFileBytes)
	}
	for _, s := range []string{"over 1 MiB", "over 8 MiB", "SIGINT or SIGTERM"} {
		if !strings.Contains(usage(), s) {
			t.Errorf("usage lacks %q", s)
		}
	}
}

func TestOneLine(t *testing.T) {
	t.Parallel()
	if got := oneLine("a\nb\r\n c \n"); got != "a; b; c" {
		t.Errorf("oneLine = %q", got)
	}
}

func TestInDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		-time.Second:            "due now",
		0:                       "due now",
		time.Millisecond:        "in 0.1s",
		1400 * time.Millisecond: "in 1.4s",
		1401 * time.Millisecond: "in 1.5s",
		42 * time.Second:        "in 42s",
		90 * time.Second:        "in 1m30s",
	} {
		if got := inDuration(d); got != want {
			t.Errorf("inDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestCompareStreamIDs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1-0", "1-0", 0},
		{"1-1", "1-0", 1},
		{"9-0", "10-0", -1}, // numerically, not as strings
		{"10-2", "10-10", -1},
	} {
		if got := compareStreamIDs(tc.a, tc.b); got != tc.want {
			t.Errorf("compareStreamIDs(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// scheduledRun returns a run whose fetch step waits for attempt 2 at due.
func scheduledRun(due time.Time) *workflow.Run {
	return &workflow.Run{ID: "r", Status: workflow.StatusRunning, Steps: []workflow.StepState{{
		Name: "fetch", Status: workflow.StepPending, Attempts: 1, RetryState: workflow.RetryScheduled,
		NextAttemptAt: &due, LastError: "boom\twith a tab",
	}}}
}

func TestCountdownWithoutTerminalPrintsAtMostOnceASecond(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0
	var buf bytes.Buffer
	p := &progress{w: &buf, width: 80, now: func() time.Time { return now }}
	run := scheduledRun(t0.Add(3 * time.Second))
	for range 30 { // 3s in steps of 100ms
		p.countdown(run, false)
		now = now.Add(100 * time.Millisecond)
	}
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	want := []string{
		"fetch: attempt 1 failed: boom with a tab; next attempt 2 in 3.0s",
		"fetch: attempt 1 failed: boom with a tab; next attempt 2 in 2.0s",
		"fetch: attempt 1 failed: boom with a tab; next attempt 2 in 1.0s",
	}
	if !slices.Equal(got, want) {
		t.Errorf("countdown lines:\n%q\nwant\n%q", got, want)
	}
}

func TestCountdownOnTerminalRewritesOneLine(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0
	var buf bytes.Buffer
	p := &progress{w: &buf, tty: true, width: 60, now: func() time.Time { return now }}
	run := scheduledRun(t0.Add(time.Second))
	p.countdown(run, false)
	p.countdown(run, false) // a poll without a redraw tick: nothing new
	now = now.Add(250 * time.Millisecond)
	p.countdown(run, true)
	p.println("fetch: attempt 2 started")
	want := "\r\x1b[Kfetch: attempt 1 failed: boom with…; next attempt 2 in 1.0s" +
		"\r\x1b[Kfetch: attempt 1 failed: boom with…; next attempt 2 in 0.8s" +
		"\r\x1b[Kfetch: attempt 2 started\n"
	if buf.String() != want {
		t.Errorf("terminal output\n%q\nwant\n%q", buf.String(), want)
	}
	for l := range strings.SplitSeq(buf.String(), "\r\x1b[K") {
		if n := len([]rune(strings.TrimSuffix(l, "\n"))); n >= 60 {
			t.Errorf("line of %d runes on a 60-column terminal: %q", n, l)
		}
	}
}

func TestProgressLines(t *testing.T) {
	t.Parallel()
	run := &workflow.Run{ID: "r1", Workflow: "demo"}
	for _, tc := range []struct {
		ev   workflow.Event
		want string
	}{
		{workflow.Event{Type: workflow.EventRunStarted}, "run r1 of demo started"},
		{workflow.Event{Type: workflow.EventAttemptStarted, Step: "fetch", Attempt: 2, Details: map[string]string{"resumed": "0"}},
			"fetch: attempt 2 started"},
		{workflow.Event{Type: workflow.EventAttemptFailed, Step: "fetch", Attempt: 2,
			Details: map[string]string{"class": "transient", "error": "boom"}}, "fetch: attempt 2 failed: boom"},
		{workflow.Event{Type: workflow.EventAttemptFailed, Step: "fetch", Attempt: 1,
			Details: map[string]string{"class": "permanent", "error": "bad"}}, "fetch: attempt 1 failed permanently: bad"},
		{workflow.Event{Type: workflow.EventRetryScheduled, Step: "fetch", Attempt: 3, Details: map[string]string{"delay_ms": "1400"}},
			"fetch: retry scheduled: next attempt 3 in 1.4s"},
		{workflow.Event{Type: workflow.EventAttemptSucceeded, Step: "deliver", Attempt: 1, Details: map[string]string{"duration_ms": "12"}},
			"deliver: attempt 1 succeeded in 12ms"},
		{workflow.Event{Type: workflow.EventAttemptStarted, Step: "fetch", Attempt: 2, Details: map[string]string{"resumed": "1"}},
			"fetch: attempt 2 started (resumed after a worker crash)"},
		{workflow.Event{Type: workflow.EventAttemptInterrupted, Step: "fetch", Attempt: 2},
			"fetch: attempt 2 was interrupted: its worker could not reach Redis and handed it back"},
		{workflow.Event{Type: workflow.EventAttemptStarted, Step: "fetch", Attempt: 2, Details: map[string]string{"resumed": "interrupted"}},
			"fetch: attempt 2 started (resumed after its worker lost Redis)"},
		{workflow.Event{Type: workflow.EventStepSnoozed, Step: "poll", Attempt: 1, Details: map[string]string{"delay_ms": "30000"}},
			"poll: snoozed: attempt 1 runs again in 30s"},
		{workflow.Event{Type: workflow.EventAttemptStarted, Step: "poll", Attempt: 1, Details: map[string]string{"resumed": "snoozed"}},
			"poll: attempt 1 runs again after its snooze"},
		{workflow.Event{Type: workflow.EventStepGoto, Step: "check", Attempt: 1, Details: map[string]string{"from": "check", "to": "fetch"}},
			"check: goto fetch"},
		{workflow.Event{Type: workflow.EventStepSuperseded, Step: "fetch", Attempt: 1, Details: map[string]string{"by": "check"}},
			"fetch: checkpoint of attempt 1 superseded by the goto"},
		{workflow.Event{Type: workflow.EventRunFailed}, ""},
		{workflow.Event{Type: "reconciler_repair", Step: "fetch", Details: map[string]string{"why": "task missing"}},
			`fetch: reconciler_repair why="task missing"`},
	} {
		if got := progressLine(run, tc.ev); got != tc.want {
			t.Errorf("progressLine(%s) = %q, want %q", tc.ev.Type, got, tc.want)
		}
	}
}

// TestWriteRunShowsLoops: status shows the run's iterations and gotos, and a
// snoozed step's snooze count and countdown.
func TestWriteRunShowsLoops(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	due := now.Add(30 * time.Second)
	run := &workflow.Run{ID: "r1", Workflow: "demo", Status: workflow.StatusRunning, Iterations: 7, Gotos: 2,
		CreatedAt: now, Steps: []workflow.StepState{{Name: "poll", Status: workflow.StepPending, Attempts: 1,
			RetryState: workflow.RetryScheduled, NextAttemptAt: &due, Snoozes: 3, Snoozed: true}}}
	var b strings.Builder
	if err := writeRun(&b, run, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"iterations:       7 (2 gotos)", "snoozed (3)", "in 30s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
}
