package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnhq/cairn/workflow"
)

// parseTest parses args as the command line of a command "test" with the
// flags --wait, --input and --limit, as Run does (normalizeArgs, then
// cobra), and returns its positional arguments.
func parseTest(args []string) (pos []string, wait bool, input string, limit int, err error) {
	root := &cobra.Command{Use: "enqueue", SilenceErrors: true, SilenceUsage: true}
	cmd := &cobra.Command{Use: "test", Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, a []string) error { pos = a; return nil }}
	w := cmd.Flags().Bool("wait", false, "")
	in := cmd.Flags().String("input", "", "")
	lim := cmd.Flags().Int("limit", 0, "")
	root.AddCommand(cmd)
	root.SetFlagErrorFunc(flagError)
	root.SetArgs(normalizeArgs(root, append([]string{"test"}, args...)))
	root.SetOut(io.Discard)
	err = root.Execute()
	return pos, *w, *in, *lim, err
}

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
		{args: []string{"-input", "-wait", "demo"}, pos: []string{"demo"}, input: "-wait"},
		{args: []string{"--input", "--wait", "demo"}, pos: []string{"demo"}, input: "--wait"},
		{args: []string{"--input={\"a\": 1}", "demo", "--limit", "-5"}, pos: []string{"demo"}, input: `{"a": 1}`, limit: -5},
		{args: []string{"-limit=7", "demo"}, pos: []string{"demo"}, limit: 7},
		{args: []string{"demo", "--", "--wait"}, pos: []string{"demo", "--wait"}},
		{args: []string{"demo", "--", "-wait"}, pos: []string{"demo", "-wait"}},
		{args: []string{"-", "x"}, pos: []string{"-", "x"}},
		{args: []string{"--wait=false", "demo"}, pos: []string{"demo"}},
	} {
		pos, wait, input, limit, err := parseTest(tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if !slices.Equal(pos, tc.pos) || wait != tc.wait || input != tc.input || limit != tc.limit {
			t.Errorf("%q: positional %q wait %v input %q limit %d; want %q %v %q %d",
				tc.args, pos, wait, input, limit, tc.pos, tc.wait, tc.input, tc.limit)
		}
	}
}

// TestFlagErrors: a mistyped flag is a usage error that names it with two
// dashes and suggests the closest flag; a bad value names the flag.
func TestFlagErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--wiat"}, `test: unknown flag "--wiat": did you mean "--wait"? (run "enqueue help test" for usage)`},
		{[]string{"demo", "-wiat"}, `test: unknown flag "--wiat": did you mean "--wait"?`},
		{[]string{"--inptu", "{}"}, `did you mean "--input"?`},
		{[]string{"--lim", "3"}, `did you mean "--limit"?`},
		{[]string{"--nope"}, `test: unknown flag "--nope" (run "enqueue help test" for usage)`},
		{[]string{"--limit", "ten"}, `test: invalid value "ten" for flag --limit: want a whole number`},
		{[]string{"--wait=maybe"}, `test: invalid value "maybe" for flag --wait: want true or false`},
		{[]string{"--input"}, `test: flag --input needs a value`},
	} {
		_, _, _, _, err := parseTest(tc.args)
		if err == nil || exitCode(err) != ExitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v (exit %d), want %q", tc.args, err, exitCode(err), tc.want)
		}
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

// TestCountdownWithoutTerminalPrintsOncePerState: piped, a countdown is
// one line when the retry is scheduled, not one per tick; the next retry
// scheduled is another line.
func TestCountdownWithoutTerminalPrintsOncePerState(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0
	var buf bytes.Buffer
	p := &progress{w: &buf, width: 80, now: func() time.Time { return now }}
	run := scheduledRun(t0.Add(3 * time.Second))
	for range 30 { // 3s in steps of 100ms
		p.countdown(run, false)
		p.countdown(run, true)
		now = now.Add(100 * time.Millisecond)
	}
	run = scheduledRun(now.Add(2 * time.Second))
	run.Steps[0].Attempts = 2
	for range 10 {
		p.countdown(run, false)
		now = now.Add(100 * time.Millisecond)
	}
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	want := []string{
		"fetch: attempt 1 failed: boom with a tab; next attempt 2 in 3.0s",
		"fetch: attempt 2 failed: boom with a tab; next attempt 3 in 2.0s",
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
		{workflow.Event{Type: workflow.EventRunCompensating, Step: "ship",
			Details: map[string]string{"code": "permanent_error", "reason": "ship refused"}},
			"compensating after step ship: ship refused [permanent_error]"},
		{workflow.Event{Type: workflow.EventRunCompensating, Step: "gift",
			Details: map[string]string{"code": "retries_exhausted", "reason": "out of stock", "group": "promo"}},
			`compensating after step gift (group "promo"): out of stock [retries_exhausted]`},
		{workflow.Event{Type: workflow.EventCompensationStarted, Step: "charge", Attempt: 1, Details: map[string]string{"task": "t1"}},
			"charge: compensation started (attempt 1)"},
		{workflow.Event{Type: workflow.EventAttemptFailed, Step: "compensate:charge", Attempt: 1,
			Details: map[string]string{"class": "transient", "error": "503"}}, "compensate:charge: attempt 1 failed: 503"},
		{workflow.Event{Type: workflow.EventCompensationSucceeded, Step: "charge", Attempt: 2,
			Details: map[string]string{"duration_ms": "1500"}}, "charge: compensated in 1.5s"},
		{workflow.Event{Type: workflow.EventCompensationFailed, Step: "charge",
			Details: map[string]string{"code": "retries_exhausted", "reason": "refund\nrejected"}},
			"charge: compensation failed for good: refund rejected [retries_exhausted]"},
		{workflow.Event{Type: workflow.EventGroupRolledBack, Step: "gift",
			Details: map[string]string{"group": "promo", "code": "permanent_error", "reason": "no gift"}},
			`group "promo" rolled back after step gift failed: no gift [permanent_error]; the run goes on after the group`},
		{workflow.Event{Type: workflow.EventRunCancelled, Step: "hold", Details: map[string]string{"actor": "ops", "compensate": "1"}},
			"cancelled by ops at step hold: its compensations run"},
		{workflow.Event{Type: workflow.EventRunCancelled, Step: "hold", Details: map[string]string{"actor": "ops"}}, ""},
		{workflow.Event{Type: workflow.EventRunCompensated, Details: map[string]string{"code": "cancelled"}}, ""},
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
	if err := writeRun(&b, layout{}, run, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"iterations:       7 (2 gotos)", "snoozed (3)", "in 30s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
}

// TestWriteRunShowsSaga: status shows a compensating run's saga, the
// groups, and the compensations that ran or are to run under their steps.
func TestWriteRunShowsSaga(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	due := now.Add(3 * time.Second)
	comp := func(name string, status workflow.StepStatus, attempts int) *workflow.StepState {
		return &workflow.StepState{Name: "compensate:" + name, Status: status, Attempts: attempts, RetryState: workflow.RetryNone}
	}
	retrying := comp("debit", workflow.StepPending, 1)
	retrying.RetryState, retrying.NextAttemptAt, retrying.LastError = workflow.RetryScheduled, &due, "bank\tdown"
	run := &workflow.Run{ID: "r1", Workflow: "transfer", Status: workflow.StatusCompensating, OnFailure: "compensate",
		FailureCode: "permanent_error", FailureReason: "credit refused", CurrentStep: "compensate:debit", CreatedAt: now,
		Compensating: &workflow.Compensating{Then: "compensated", FailedStep: "credit", Group: "move", FromStep: "order",
			ToStep: "credit", Code: "permanent_error", Reason: "credit refused"},
		Steps: []workflow.StepState{
			{Name: "order", Status: workflow.StepSucceeded, Attempts: 1, RetryState: workflow.RetryNone,
				Compensation: comp("order", workflow.StepPending, 0)},
			{Name: "debit", Status: workflow.StepSucceeded, Attempts: 1, RetryState: workflow.RetryNone, Group: "move",
				Compensation: retrying},
			{Name: "credit", Status: workflow.StepFailed, Attempts: 1, RetryState: workflow.RetryNone, Group: "move",
				Compensation: comp("credit", workflow.StepPending, 0)},
			{Name: "notify", Status: workflow.StepPending, RetryState: workflow.RetryNone,
				Compensation: comp("notify", workflow.StepPending, 0)},
		}}
	var b strings.Builder
	if err := writeRun(&b, layout{}, run, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, re := range []string{
		`(?m)^status:\s+compensating$`,
		`(?m)^on failure:\s+compensate$`,
		`(?m)^compensations:\s+undo the succeeded steps from order to credit, last first; then the run ends compensated$`,
		`(?m)^started by:\s+credit refused \[permanent_error\] at step credit \(group "move"\)$`,
		`(?m)^current step:\s+compensate:debit$`,
		`(?m)^STEP\s+GROUP\s+STATUS\s+ATTEMPTS\s+RETRY\s+NEXT ATTEMPT\s+LAST ERROR$`,
		`(?m)^order\s+-\s+succeeded\s+1\s+none\s+-\s+-$`,
		`(?m)^  compensate:order\s+pending\s+0\s+none\s+-\s+-$`,
		`(?m)^debit\s+move\s+succeeded\s+1\s`,
		`(?m)^  compensate:debit\s+pending\s+1\s+scheduled\s+in 3.0s\s+bank down$`,
		`(?m)^credit\s+move\s+failed\s+1\s`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("status lacks %s:\n%s", re, out)
		}
	}
	// Nothing to undo for a step that failed or never ran.
	if strings.Contains(out, "compensate:credit") || strings.Contains(out, "compensate:notify") || strings.Contains(out, "resume with") {
		t.Errorf("status shows a compensation that will not run, or a resume hint of a live run:\n%s", out)
	}
	if st := scheduledStep(run); st == nil || st.Name != "compensate:debit" {
		t.Errorf("scheduledStep = %+v, want the compensation's retry", st)
	}

	// The compensation fails for good: the run is failed, and status says
	// how to resume it.
	run.Status, run.FailureCode, run.NeedsAttention = workflow.StatusFailed, "compensation_failed", true
	run.Steps[1].Compensation = comp("debit", workflow.StepFailed, 4)
	b.Reset()
	if err := writeRun(&b, layout{}, run, now); err != nil {
		t.Fatal(err)
	}
	if want := "resume with:      enqueue retry r1 --step compensate:debit (its compensation runs again)"; !strings.Contains(b.String(), want) {
		t.Errorf("status lacks %q:\n%s", want, b.String())
	}
	if strings.Contains(b.String(), "current step:") {
		t.Errorf("status of a failed run shows a current step:\n%s", b.String())
	}
}

// TestFingerprintSeesCompensations: start --wait reads the journal again
// when a compensation's progress changes, the rest of the run alike.
func TestFingerprintSeesCompensations(t *testing.T) {
	t.Parallel()
	run := &workflow.Run{ID: "r1", Status: workflow.StatusCompensating, Steps: []workflow.StepState{
		{Name: "a", Status: workflow.StepSucceeded, Compensation: &workflow.StepState{Name: "compensate:a",
			Status: workflow.StepRunning, Attempts: 1}}}}
	before := fingerprint(run)
	run.Steps[0].Compensation.LastError = "boom"
	if fingerprint(run) == before {
		t.Error("a compensation's new error leaves the fingerprint as it was")
	}
}
