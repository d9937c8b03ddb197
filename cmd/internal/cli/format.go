package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/cairnhq/cairn/workflow"
)

// timeLayout is how the tables show times: UTC, to the millisecond.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// maxErrorWidth is how much of a step's last error the steps table shows
// when stdout is not a terminal (on a terminal: as much as fits).
const maxErrorWidth = 60

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeRun writes a run as a header and a table of its steps.
func writeRun(w io.Writer, lay layout, run *workflow.Run, now time.Time) error {
	if err := runHeader(lay, run, now).write(w); err != nil {
		return err
	}
	if len(run.Steps) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	return runStepsTable(lay, run, now).write(w)
}

// runHeader returns the header of a run: one "name: value" line per
// field, its status in the status's colour and a run that needs
// attention in red.
func runHeader(lay layout, run *workflow.Run, now time.Time) *table {
	head := newTable(lay)
	head.style = func(row []string, col int) string {
		switch {
		case col == 0:
		case row[0] == "status:":
			return statusStyle(row[1])
		case row[0] == "needs attention:" && row[1] == "yes":
			return styleRed
		}
		return ""
	}
	field := func(name, value string) { head.add(name+":", cell(value)) }
	field("id", run.ID)
	field("workflow", run.Workflow)
	field("status", string(run.Status))
	if run.Queued {
		field("queued", "in the outbox (CAIRN_OUTBOX): not in Redis yet, sent when Redis is reachable")
	}
	field("warning", dash(run.Warning))
	attention := "no"
	if run.NeedsAttention {
		attention = "yes"
	}
	field("needs attention", attention)
	if p := run.Paused; p != nil {
		what := fmt.Sprintf("by %s since %s: no new attempt begins until enqueue resume", p.By, fmtTime(&p.At))
		if p.Parked {
			what += " (its next dispatch is parked)"
		}
		field("paused", what)
	}
	iters := strconv.Itoa(run.Iterations)
	if run.Gotos > 0 {
		iters += fmt.Sprintf(" (%d gotos)", run.Gotos)
	}
	field("iterations", iters)
	runProgressFields(field, run, now)
	return head
}

// runProgressFields gives field the header's lines on where a run is: its
// failure and compensations, its current step and what it waits for,
// its ordering key, when it was created and when it finished.
func runProgressFields(field func(name, value string), run *workflow.Run, now time.Time) {
	if run.OnFailure != "" {
		field("on failure", string(run.OnFailure))
	}
	if run.FailureCode != "" || run.FailureReason != "" {
		field("reason", failureText(run))
	}
	if c := run.Compensating; c != nil {
		field("compensations", compensationsText(c))
		field("started by", startedByText(c))
	}
	if !run.Terminal() && run.CurrentStep != "" {
		field("current step", run.CurrentStep)
	}
	if run.Status == workflow.StatusFailed && strings.HasPrefix(run.CurrentStep, workflow.CompensationPrefix) {
		field("resume with", fmt.Sprintf("enqueue retry %s --step %s (its compensation runs again)", run.ID, run.CurrentStep))
	}
	if run.OrderingKey != "" {
		field("ordering key", strconv.Quote(run.OrderingKey))
	}
	if w := waitingText(run.WaitingFor, now); w != "" && !run.Terminal() {
		field("waiting for", w)
	}
	field("created", fmtTime(&run.CreatedAt))
	if run.FinishedAt != nil {
		field("finished", fmt.Sprintf("%s (took %s)", fmtTime(run.FinishedAt), fmtDuration(run.FinishedAt.Sub(run.CreatedAt))))
	} else {
		field("finished", "-")
	}
}

// runStepsTable returns the table of a run's steps, with a GROUP column
// when a step is in a group, and under each step its compensation when
// that is in play; the status is in the status's colour.
func runStepsTable(lay layout, run *workflow.Run, now time.Time) *table {
	grouped := slices.ContainsFunc(run.Steps, func(st workflow.StepState) bool { return st.Group != "" })
	steps := newTable(lay)
	steps.head = true
	status := 1 // the STATUS column
	if grouped {
		status = 2
		steps.add("STEP", "GROUP", "STATUS", "ATTEMPTS", "RETRY", "NEXT ATTEMPT", "LAST ERROR")
	} else {
		steps.add("STEP", "STATUS", "ATTEMPTS", "RETRY", "NEXT ATTEMPT", "LAST ERROR")
	}
	steps.flex, steps.flexMax = len(steps.rows[0])-1, maxErrorWidth
	steps.style = func(row []string, col int) string {
		if col == status {
			return statusStyle(row[col])
		}
		return ""
	}
	for i, st := range run.Steps {
		name := st.Name
		if st.Optional {
			name += " (optional)"
		}
		group := ""
		if grouped {
			group = dash(st.Group)
			if st.GroupOptional {
				group += " (optional)"
			}
		}
		steps.add(stepRow(name, group, grouped, st, now)...)
		if c := st.Compensation; c != nil && run.CompensationInPlay(i) {
			steps.add(stepRow("  "+c.Name, "", grouped, *c, now)...)
		}
	}
	return steps
}

// stepRow is a row of the steps table: a step's, or (indented under it)
// its compensation's. Its last error is cut by the table.
func stepRow(name, group string, grouped bool, st workflow.StepState, now time.Time) []string {
	next := "-"
	retry := string(st.RetryState)
	if st.RetryState == workflow.RetryScheduled && st.NextAttemptAt != nil {
		next = inDuration(st.NextAttemptAt.Sub(now))
	}
	if st.Snoozed && st.Status == workflow.StepPending {
		retry = fmt.Sprintf("snoozed (%d)", st.Snoozes)
	}
	if st.Status == workflow.StepWaiting && st.WaitingFor != nil && st.WaitingFor.Until != nil {
		next = "wakes " + inDuration(st.WaitingFor.Until.Sub(now))
	}
	row := []string{cell(name)}
	if grouped {
		row = append(row, cell(group))
	}
	return append(row, cell(string(st.Status)), strconv.Itoa(st.Attempts), cell(retry), next,
		cell(dash(st.LastError)))
}

// compensationsText says what a run's compensations undo and what follows
// them.
func compensationsText(c *workflow.Compensating) string {
	what := fmt.Sprintf("undo the succeeded steps from %s to %s, last first", dash(c.FromStep), dash(c.ToStep))
	if c.FromStep == c.ToStep {
		what = "undo step " + dash(c.FromStep)
	}
	switch c.Then {
	case "compensated":
		return what + "; then the run ends compensated"
	case "failed":
		return what + "; then the run fails (its required group " + strconv.Quote(c.Group) + " was rolled back)"
	case "continue":
		return what + "; then the run goes on after its optional group " + strconv.Quote(c.Group)
	}
	return what + "; then " + dash(c.Then)
}

// startedByText says what started a run's compensations.
func startedByText(c *workflow.Compensating) string {
	var what string
	switch {
	case c.Reason != "" && c.Code != "":
		what = c.Reason + " [" + c.Code + "]"
	case c.Reason != "":
		what = c.Reason
	default:
		what = dash(c.Code)
	}
	where := " at step " + dash(c.FailedStep)
	if c.Group != "" {
		where += " (group " + strconv.Quote(c.Group) + ")"
	}
	return what + where
}

// waitingText says what a waiting run or step waits for, or "".
func waitingText(w *workflow.WaitingFor, now time.Time) string {
	if w == nil {
		return ""
	}
	pos := ""
	if w.Position > 0 {
		pos = fmt.Sprintf(" (position %d in line)", w.Position)
	}
	when := ""
	if w.Until != nil {
		when = fmtTime(w.Until) + " (" + inDuration(w.Until.Sub(now)) + ")"
	}
	switch w.Reason() {
	case workflow.WaitOrderingKey:
		s := "its turn under ordering key " + strconv.Quote(w.OrderingKey)
		if w.Shared {
			s += " (its shared line)"
		}
		s += pos
		if len(w.HeldBy) > 0 {
			s += ", held by " + strings.Join(w.HeldBy, ", ")
		}
		return s
	case workflow.WaitWorkflowLimit:
		return fmt.Sprintf("a slot: its workflow runs at most %d at once%s", w.WorkflowLimit, pos)
	case workflow.WaitSignal:
		return "signal " + strconv.Quote(w.Signal) + " until " + when
	case workflow.WaitTimer:
		return "the end of its sleep at " + when
	}
	return ""
}

// writeKeyRuns writes an ordering key's line: its active runs, then its
// waiting runs in the order they will start.
func writeKeyRuns(w io.Writer, lay layout, k *workflow.KeyRuns) error {
	t := newTable(lay)
	t.head = true
	t.style = func(row []string, col int) string {
		if col == 3 {
			return statusStyle(row[col])
		}
		return ""
	}
	line := "shared line of ordering key " + strconv.Quote(k.Key)
	if !k.Shared {
		line = "line of " + k.Owner + "'s runs with ordering key " + strconv.Quote(k.Key)
	}
	if _, err := fmt.Fprintln(w, line); err != nil {
		return err
	}
	t.add("POSITION", "RUN", "WORKFLOW", "STATUS", "CREATED")
	for _, r := range k.Active {
		t.add("active", r.ID, cell(r.Workflow), string(r.Status), fmtTime(&r.CreatedAt))
	}
	for _, r := range k.Waiting {
		pos := "-"
		if r.WaitingFor != nil && r.WaitingFor.Position > 0 {
			pos = strconv.Itoa(r.WaitingFor.Position)
		}
		t.add(pos, r.ID, cell(r.Workflow), string(r.Status), fmtTime(&r.CreatedAt))
	}
	if err := t.write(w); err != nil {
		return err
	}
	if more := k.WaitingTotal - int64(len(k.Waiting)); more > 0 && len(k.Waiting) > 0 {
		_, err := fmt.Fprintf(w, "(%d more waiting runs not shown)\n", more)
		return err
	}
	return nil
}

// writeRunList writes runs as a table. On a terminal their warnings are
// cut to fit its width.
func writeRunList(w io.Writer, lay layout, runs []*workflow.Run) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintln(w, "no runs")
		return err
	}
	t := newTable(lay)
	t.head, t.flex = true, 3
	t.style = func(row []string, col int) string {
		switch {
		case col == 2:
			return statusStyle(row[col])
		case col == 4 && row[col] == "yes":
			return styleRed
		}
		return ""
	}
	t.add("ID", "WORKFLOW", "STATUS", "WARNING", "ATTENTION", "CREATED")
	for _, r := range runs {
		attention := "-"
		if r.NeedsAttention {
			attention = "yes"
		}
		warning := r.Warning
		if r.Paused != nil {
			warning = strings.TrimSuffix("paused, "+warning, ", ")
		}
		t.add(r.ID, cell(r.Workflow), string(r.Status), cell(dash(warning)), attention, fmtTime(&r.CreatedAt))
	}
	return t.write(w)
}

// detailOrder is the order in which the events table shows an event's
// details; the others follow in alphabetical order.
var detailOrder = []string{
	"workflow", "owner", "actor", "group", "class", "code", "error", "reason", "message",
	"delay_ms", "due_at", "duration_ms", "crashes", "resumed",
}

// writeEvents writes a journal, one event per line. On a terminal the
// details are cut to fit its width.
func writeEvents(w io.Writer, lay layout, evs []workflow.Event) error {
	if len(evs) == 0 {
		_, err := fmt.Fprintln(w, "no events")
		return err
	}
	t := newTable(lay)
	t.head, t.flex = true, 4
	t.add("TIME", "TYPE", "STEP", "ATTEMPT", "DETAILS")
	for _, ev := range evs {
		attempt := "-"
		if ev.Attempt > 0 {
			attempt = strconv.Itoa(ev.Attempt)
		}
		t.add(fmtTime(&ev.At), cell(ev.Type), cell(dash(ev.Step)), attempt, formatDetails(ev.Details))
	}
	return t.write(w)
}

// formatDetails writes an event's details as key=value pairs, quoting
// values that need it. The task ID (in the --json output) and resumed=0 are
// left out.
func formatDetails(d map[string]string) string {
	keys := make([]string, 0, len(d))
	for k := range d {
		if k == "task" || (k == "resumed" && d[k] == "0") {
			continue
		}
		keys = append(keys, k)
	}
	rank := func(k string) int {
		if i := slices.Index(detailOrder, k); i >= 0 {
			return i
		}
		return len(detailOrder)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := d[k]
		if v == "" || strings.ContainsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || r == '"' || !unicode.IsPrint(r) }) {
			v = strconv.Quote(v)
		}
		parts[i] = k + "=" + v
	}
	return strings.Join(parts, " ")
}

// cell makes s safe for a table cell: one line, no tabs (a table cuts its
// free-text column to a width: see table).
func cell(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// truncate shortens s to width runes, ending with "…"; width <= 0 keeps s.
func truncate(s string, width int) string {
	if width <= 0 {
		return s
	}
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	return string(r[:width-1]) + "…"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func fmtTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(timeLayout)
}

// fmtDuration shows d rounded for people: 0.2s, 1.4s, 12s, 3m4s.
func fmtDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDuration(-d)
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	default:
		return d.Round(time.Second).String()
	}
}

// inDuration shows a time d from now: "in 1.4s", or "due now" once past.
func inDuration(d time.Duration) string {
	if d <= 0 {
		return "due now"
	}
	if d < 10*time.Second {
		// Round up so that the countdown ends at 0.1s, not 0.0s.
		tenths := (d + 100*time.Millisecond - 1) / (100 * time.Millisecond)
		return fmt.Sprintf("in %.1fs", float64(tenths)/10)
	}
	return "in " + d.Round(time.Second).String()
}
