package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cairnhq/cairn/workflow"
)

// Countdown refresh rates of start --wait.
const (
	// ttyRedraw is how often the countdown line is rewritten on a terminal.
	ttyRedraw = 250 * time.Millisecond
	// maxCountdownError is how much of the last error a countdown shows.
	maxCountdownError = 80
)

// wait polls run until it ends, showing its progress on stderr, and
// returns its final state. On an error (ctx done included) it returns the
// error and the last state read.
func (s *session) wait(ctx context.Context, run *workflow.Run) (*workflow.Run, error) {
	return s.waitFrom(ctx, run, "")
}

// waitFrom is wait showing only the journal events after the event with ID
// after ("" for all of them): what happens after an operator's action.
func (s *session) waitFrom(ctx context.Context, run *workflow.Run, after string) (*workflow.Run, error) {
	// The countdown rewrites itself only when both streams are a
	// terminal: piped or redirected, either way, a line is printed per
	// change of the run's state and no more.
	tty := s.cli.isTerminal(s.stderr()) && s.cli.isTerminal(s.stdout())
	p := &progress{w: s.stderr(), tty: tty, width: s.cli.columns(s.stderr()), now: s.cli.now, lastEvent: after}
	poll := time.NewTicker(s.cli.pollInterval())
	defer poll.Stop()
	var redraw <-chan time.Time
	if p.tty {
		t := time.NewTicker(ttyRedraw)
		defer t.Stop()
		redraw = t.C
	}
	err := func() error {
		for {
			if err := p.journal(ctx, s.client, run); err != nil {
				return err
			}
			if run.Terminal() {
				return nil
			}
			p.countdown(run, false)
			if err := p.sleep(ctx, poll.C, redraw, run); err != nil {
				return err
			}
			next, err := s.client.Get(ctx, run.ID)
			if err != nil {
				return err
			}
			run = next
		}
	}()
	p.clear()
	if err != nil {
		if ctx.Err() != nil {
			// Tell the run's state now, not as last polled.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pingTimeout)
			defer cancel()
			if now, err := s.client.Get(rctx, run.ID); err == nil {
				run = now
			}
			return run, failuref("interrupted: stopped waiting for run %s, which is %s (see: enqueue status %s)",
				run.ID, run.Status, run.ID)
		}
		return run, err
	}
	if run.Status == workflow.StatusSucceeded {
		took := ""
		if run.FinishedAt != nil {
			took = " in " + fmtDuration(run.FinishedAt.Sub(run.CreatedAt))
		}
		fmt.Fprintf(p.w, "run %s succeeded%s\n", run.ID, took)
	}
	// A run that failed, was cancelled or compensated is reported by the
	// caller, as the error line.
	return run, nil
}

// progress shows a run's journal as it grows and, while a retry is
// scheduled, a countdown to it.
type progress struct {
	w   io.Writer
	tty bool
	// width is the terminal's width: a countdown line must not wrap, or
	// "\r" would not take the cursor back to its start.
	width int
	now   func() time.Time

	// lastEvent is the journal ID of the last event shown.
	lastEvent string
	// seen is the fingerprint of the run state the journal was last read
	// at; the journal is read again only when the state has changed.
	seen string
	// onScreen: a countdown line without a newline is on the terminal.
	onScreen bool
	// plainShown is the fingerprint of the run state whose countdown line
	// was printed last (not a tty): one line per state, not per tick.
	plainShown string
}

// journal prints the events of run not shown yet.
func (p *progress) journal(ctx context.Context, client *workflow.Client, run *workflow.Run) error {
	fp := fingerprint(run)
	if fp == p.seen {
		return nil
	}
	evs, err := client.Events(ctx, run.ID)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if p.lastEvent != "" && compareStreamIDs(ev.ID, p.lastEvent) <= 0 {
			continue
		}
		p.lastEvent = ev.ID
		if line := progressLine(run, ev); line != "" {
			p.println(line)
		}
	}
	p.seen = fp
	return nil
}

// sleep waits for the next poll, redrawing the countdown meanwhile.
func (p *progress) sleep(ctx context.Context, poll, redraw <-chan time.Time, run *workflow.Run) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-poll:
			return nil
		case <-redraw:
			p.countdown(run, true)
		}
	}
}

// println prints a progress line, replacing the countdown on a terminal
// (the next countdown redraws it below).
func (p *progress) println(line string) {
	p.clear()
	fmt.Fprintln(p.w, line)
}

// clear erases the countdown line from a terminal.
func (p *progress) clear() {
	if p.onScreen {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.onScreen = false
	}
}

// countdown shows the time to the run's scheduled retry, if any. On a
// terminal it draws one line, which it rewrites when redraw is set (every
// ttyRedraw); otherwise it prints a line once per state of the run (a
// retry scheduled, a sleep or an await begun), never again as time passes.
func (p *progress) countdown(run *workflow.Run, redraw bool) {
	now := p.now()
	if !p.tty {
		fp := fingerprint(run)
		if fp == p.plainShown {
			return
		}
		p.plainShown = fp
	}
	st := scheduledStep(run)
	if st == nil {
		if line := waitCountdown(run, now); line != "" { // an await or a sleep (waits.go)
			p.show(line, redraw)
			return
		}
		p.clear()
		return
	}
	if st.Snoozed {
		p.show(fmt.Sprintf("%s: snoozed (%d so far); runs again %s", cell(st.Name), st.Snoozes,
			inDuration(st.NextAttemptAt.Sub(now))), redraw)
		return
	}
	head := fmt.Sprintf("%s: attempt %d failed: ", cell(st.Name), st.Attempts)
	tail := fmt.Sprintf("; next attempt %d %s", st.Attempts+1, inDuration(st.NextAttemptAt.Sub(now)))
	errWidth := maxCountdownError
	if p.tty {
		// Shorten the error, not the countdown, to fit the line.
		errWidth = min(errWidth, max(p.width-1-utf8.RuneCountInString(head+tail), 1))
	}
	p.show(head+truncate(cell(st.LastError), errWidth)+tail, redraw)
}

// show draws a countdown line: on a terminal one line, rewritten when
// redraw is set; otherwise a line (countdown prints one per state).
func (p *progress) show(line string, redraw bool) {
	if p.tty {
		if !p.onScreen || redraw {
			fmt.Fprint(p.w, "\r\x1b[K"+truncate(line, p.width-1))
			p.onScreen = true
		}
		return
	}
	fmt.Fprintln(p.w, line)
}

// scheduledStep returns the step (or compensation, named
// "compensate:<step>") of run waiting for a scheduled retry, or nil.
func scheduledStep(run *workflow.Run) *workflow.StepState {
	for i := range run.Steps {
		st := &run.Steps[i]
		if st.RetryState == workflow.RetryScheduled && st.NextAttemptAt != nil {
			return st
		}
		if c := st.Compensation; c != nil && c.RetryState == workflow.RetryScheduled && c.NextAttemptAt != nil {
			return c
		}
	}
	return nil
}

// fingerprint summarises the parts of a run's state that change with each
// journaled transition.
func fingerprint(run *workflow.Run) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%d|%d|%s", run.Status, run.Iterations, run.UpdatedAt.UnixNano(), run.CurrentStep)
	step := func(st *workflow.StepState) {
		next := int64(0)
		if st.NextAttemptAt != nil {
			next = st.NextAttemptAt.UnixNano()
		}
		fmt.Fprintf(&b, "|%s,%d,%s,%d,%d,%q", st.Status, st.Attempts, st.RetryState, next, st.Crashes, st.LastError)
	}
	for i := range run.Steps {
		step(&run.Steps[i])
		if c := run.Steps[i].Compensation; c != nil {
			step(c)
		}
	}
	return b.String()
}

// progressLine describes a journal event for start --wait, or returns ""
// for the events the final line reports.
func progressLine(run *workflow.Run, ev workflow.Event) string {
	d := ev.Details
	switch ev.Type {
	case workflow.EventRunStarted:
		return fmt.Sprintf("run %s of %s started", run.ID, run.Workflow)
	case workflow.EventAttemptStarted:
		line := fmt.Sprintf("%s: attempt %d started", ev.Step, ev.Attempt)
		switch d["resumed"] {
		case "", "0":
		case "interrupted":
			line += " (resumed after its worker lost Redis)"
		case "snoozed":
			line = fmt.Sprintf("%s: attempt %d runs again after its snooze", ev.Step, ev.Attempt)
		default:
			line += " (resumed after a worker crash)"
		}
		return line
	case workflow.EventAttemptSucceeded:
		return fmt.Sprintf("%s: attempt %d succeeded%s", ev.Step, ev.Attempt, msSuffix(d["duration_ms"]))
	case workflow.EventAttemptFailed:
		how := "failed"
		if d["class"] == workflow.ClassPermanent {
			how = "failed permanently"
		}
		return fmt.Sprintf("%s: attempt %d %s: %s", ev.Step, ev.Attempt, how, cell(d["error"]))
	case workflow.EventAttemptCrashed:
		return fmt.Sprintf("%s: attempt %d was interrupted: its worker was lost (crash %s)", ev.Step, ev.Attempt,
			dash(d["crashes"]))
	case workflow.EventAttemptInterrupted:
		return fmt.Sprintf("%s: attempt %d was interrupted: its worker could not reach Redis and handed it back",
			ev.Step, ev.Attempt)
	case workflow.EventRetryScheduled:
		return fmt.Sprintf("%s: retry scheduled: next attempt %d%s", ev.Step, ev.Attempt, msSuffix(d["delay_ms"]))
	case workflow.EventStepSnoozed:
		return fmt.Sprintf("%s: snoozed: attempt %d runs again%s", ev.Step, ev.Attempt, msSuffix(d["delay_ms"]))
	case workflow.EventStepGoto:
		return fmt.Sprintf("%s: goto %s", ev.Step, cell(d["to"]))
	case workflow.EventStepSuperseded:
		return fmt.Sprintf("%s: checkpoint of attempt %d superseded by the goto", ev.Step, ev.Attempt)
	case workflow.EventRunWaiting:
		what := "ordering key " + strconv.Quote(d["gate"])
		if d["reason"] == string(workflow.WaitWorkflowLimit) {
			what = "a slot under workflow " + d["gate"] + "'s max_running"
		}
		return fmt.Sprintf("waiting for %s: position %s in line", what, dash(d["position"]))
	case workflow.EventRunAdmitted:
		return "admitted: its turn came"
	case workflow.EventRunCancelled:
		if d["compensate"] == "1" {
			return fmt.Sprintf("cancelled by %s at step %s: its compensations run", dash(d["actor"]), dash(ev.Step))
		}
		return ""
	case workflow.EventRunCompensating:
		where := "step " + dash(ev.Step)
		if d["group"] != "" {
			where += " (group " + strconv.Quote(d["group"]) + ")"
		}
		return fmt.Sprintf("compensating after %s: %s", where, reasonCode(d["reason"], d["code"]))
	case workflow.EventCompensationStarted:
		return fmt.Sprintf("%s: compensation started (attempt %d)", dash(ev.Step), ev.Attempt)
	case workflow.EventCompensationSucceeded:
		return fmt.Sprintf("%s: compensated%s", dash(ev.Step), msSuffix(d["duration_ms"]))
	case workflow.EventCompensationFailed:
		return fmt.Sprintf("%s: compensation failed for good: %s", dash(ev.Step), reasonCode(d["reason"], d["code"]))
	case workflow.EventGroupRolledBack:
		return fmt.Sprintf("group %s rolled back after step %s failed: %s; the run goes on after the group",
			strconv.Quote(d["group"]), dash(ev.Step), reasonCode(d["reason"], d["code"]))
	case workflow.EventRunSucceeded, workflow.EventRunFailed, workflow.EventRunCompensated:
		return ""
	}
	if line, ok := waitProgressLine(ev); ok { // an await or a sleep (waits.go)
		return line
	}
	// Events this version does not know, shown as they are.
	line := ev.Type
	if ev.Step != "" {
		line = ev.Step + ": " + line
	}
	if details := formatDetails(d); details != "" {
		line += " " + details
	}
	return line
}

// reasonCode shows a failure as "reason [code]".
func reasonCode(reason, code string) string {
	switch {
	case reason != "" && code != "":
		return cell(reason) + " [" + cell(code) + "]"
	case reason != "":
		return cell(reason)
	}
	return dash(cell(code))
}

// msSuffix returns " in " and the duration of ms milliseconds, or "".
func msSuffix(ms string) string {
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return ""
	}
	return " in " + fmtDuration(time.Duration(n)*time.Millisecond)
}

// compareStreamIDs compares two Redis stream entry IDs ("ms-seq").
func compareStreamIDs(a, b string) int {
	am, as := splitStreamID(a)
	bm, bs := splitStreamID(b)
	if c := cmp.Compare(am, bm); c != 0 {
		return c
	}
	return cmp.Compare(as, bs)
}

func splitStreamID(id string) (ms, seq uint64) {
	l, r, _ := strings.Cut(id, "-")
	ms, _ = strconv.ParseUint(l, 10, 64)
	seq, _ = strconv.ParseUint(r, 10, 64)
	return ms, seq
}
