package dashboard

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// The run page's timeline: from the run's journal, one bar per attempt of
// each step, and between them the gaps, each with what the run waited for:
// a backoff before a retry, a snooze, a timer, a signal, a circuit breaker
// that deferred the attempt, its turn under an ordering key or its
// workflow's max_running, or a worker to take its due task (from the
// moment the step was due, after the run's start, its admission, the step
// before it or its backoff, to its attempt's start; waits under
// minWorkerWait are not drawn), or for an operator's resume (a pause, on the
// run's own row). Crashes, repairs and operators' actions are
// marks. Everything is drawn to scale on one time axis, from the run's
// creation to its end (or now).

// Kinds of timeline segments: the outcomes of attempts, then the gaps.
const (
	segRunning     = "running"
	segSucceeded   = "succeeded"
	segFailed      = "failed"
	segCrashed     = "crashed"
	segInterrupted = "interrupted"
	segSnoozed     = "snoozed"
	segStopped     = "stopped" // the run ended (cancelled, failed) during the attempt

	gapBackoff  = "backoff"
	gapSnooze   = "snooze"
	gapTimer    = "timer"
	gapSignal   = "signal"
	gapBreaker  = "breaker"
	gapOrdering = "ordering"
	gapWorker   = "worker"
	gapPaused   = "paused"
)

// Kinds of timeline marks.
const (
	markCrash     = "crash"
	markOperator  = "operator"
	markRepair    = "repair"
	markAttention = "attention"
	markGoto      = "goto"
)

// tlSegment is an attempt or a gap on a row of the timeline.
type tlSegment struct {
	Kind       string
	Gap        bool
	Start, End time.Time
	// Open: still going at the end of the timeline (now).
	Open    bool
	Attempt int
	// Label says what the segment is, for its title; Detail adds the
	// error of a failed attempt.
	Label  string
	Detail string
}

// tlMark is an instant on the timeline: a crash, a repair, an operator's
// action.
type tlMark struct {
	At    time.Time
	Kind  string
	Step  string
	Label string
}

// tlRow is a row of the timeline: a step (or the run's own waits).
type tlRow struct {
	Name     string
	Segments []tlSegment
	// retryDue is when the step's scheduled retry is due (its backoff's
	// end), until its attempt starts.
	retryDue time.Time
}

// minWorkerWait is the shortest wait for a worker the timeline draws: a
// busy worker takes a due task within a few milliseconds.
const minWorkerWait = 10 * time.Millisecond

// timeline is a run's timeline before layout.
type timeline struct {
	Start, End time.Time
	Rows       []tlRow
	Marks      []tlMark
	// Truncated: the journal had more segments than the timeline shows.
	Truncated bool
}

// runRowName is the name of the row of the run's own waits (ordering key,
// workflow limit, a pause).
const runRowName = "(run)"

// maxTimelineSegments bounds the segments of a timeline: a run that
// looped through many attempts shows its first ones, and says so.
const maxTimelineSegments = 600

// buildTimeline reads a run's journal (oldest first) into its timeline,
// as of now.
func buildTimeline(run *workflow.Run, evs []workflow.Event, now time.Time) timeline {
	b := newTimelineBuilder(run, evs, now)
	for _, ev := range evs {
		b.add(ev)
	}
	return b.finish(run.Terminal())
}

// timelineBuilder builds a timeline one journal event at a time: a row
// is made when a step first appears, and segments open and close as the
// step's attempts and waits start and end.
type timelineBuilder struct {
	tl timeline
	// rows indexes tl.Rows by name.
	rows map[string]int
	// segments counts the segments opened, up to maxTimelineSegments.
	segments int
	// due is when the next step's first attempt became due (the run
	// started or was admitted, or a step ended), until an attempt starts
	// or a wait that explains the time begins.
	due time.Time
}

// newTimelineBuilder starts the timeline of a run with journal evs: from
// the run's creation (or its first event, if earlier) to its end (or
// now), with the run's own row first.
func newTimelineBuilder(run *workflow.Run, evs []workflow.Event, now time.Time) *timelineBuilder {
	b := &timelineBuilder{tl: timeline{Start: run.CreatedAt}, rows: map[string]int{}}
	if len(evs) > 0 && (b.tl.Start.IsZero() || evs[0].At.Before(b.tl.Start)) {
		b.tl.Start = evs[0].At
	}
	b.tl.End = now
	if run.FinishedAt != nil {
		b.tl.End = *run.FinishedAt
	}
	// The run's own row comes first when it has segments.
	b.row(runRowName)
	return b
}

// row returns the row of the given name, made (last) if new.
func (b *timelineBuilder) row(name string) *tlRow {
	i, ok := b.rows[name]
	if !ok {
		i = len(b.tl.Rows)
		b.rows[name] = i
		b.tl.Rows = append(b.tl.Rows, tlRow{Name: name})
	}
	return &b.tl.Rows[i]
}

// open adds s to row r as an open segment, unless the timeline already
// has its most segments (then it is marked truncated).
func (b *timelineBuilder) open(r *tlRow, s tlSegment) {
	if b.segments >= maxTimelineSegments {
		b.tl.Truncated = true
		return
	}
	b.segments++
	s.Open = true
	r.Segments = append(r.Segments, s)
}

// last returns the row's last open segment that is an attempt (gap false)
// or a gap (gap true), if any.
func (r *tlRow) last(gap bool) *tlSegment {
	for i := len(r.Segments) - 1; i >= 0; i-- {
		s := &r.Segments[i]
		if s.Open && s.Gap == gap {
			return s
		}
	}
	return nil
}

// closeSeg ends segment s (if any) at at, as kind unless kind is "".
func closeSeg(s *tlSegment, at time.Time, kind string) {
	if s == nil {
		return
	}
	s.Open = false
	s.End = at
	if kind != "" {
		s.Kind = kind
	}
}

// closeAll ends every open segment at at: the gaps as they are, the
// attempts as attemptKind.
func (b *timelineBuilder) closeAll(at time.Time, attemptKind string) {
	for i := range b.tl.Rows {
		for j := range b.tl.Rows[i].Segments {
			s := &b.tl.Rows[i].Segments[j]
			if !s.Open {
				continue
			}
			if s.Gap {
				closeSeg(s, at, "")
			} else {
				closeSeg(s, at, attemptKind)
			}
		}
	}
}

// mark adds a mark of the given kind at ev's time, on ev's step.
func (b *timelineBuilder) mark(ev workflow.Event, kind, label string) {
	b.tl.Marks = append(b.tl.Marks, tlMark{At: ev.At, Kind: kind, Step: ev.Step, Label: label})
}

// add reads one journal event into the timeline, on the row of its step
// (the run's own row for the run's events): attempts, gaps, the run's
// waits for its turn, its end, and marks each go to their own method.
func (b *timelineBuilder) add(ev workflow.Event) {
	name := ev.Step
	if name == "" {
		name = runRowName
	}
	r := b.row(name)
	switch ev.Type {
	case workflow.EventRunStarted:
		b.due = ev.At // the first step's task is due
	case workflow.EventAttemptSucceeded, workflow.EventStepSkipped:
		b.due = ev.At // the next step's is (or the run ends)
	}
	switch ev.Type {
	case workflow.EventAttemptStarted:
		b.attemptStarted(r, ev)
	case workflow.EventAttemptSucceeded, workflow.EventAttemptFailed, workflow.EventAttemptInterrupted,
		workflow.EventStepSnoozed:
		b.attemptEnded(r, ev)
	case workflow.EventAttemptCrashed:
		closeSeg(r.last(false), ev.At, segCrashed)
		b.mark(ev, markCrash, fmt.Sprintf("%s attempt %d: the worker stopped (crash %s)", ev.Step, ev.Attempt,
			ev.Details["crashes"]))
	case workflow.EventRetryScheduled, "attempt_deferred", workflow.EventTimerSet, workflow.EventTimerFired,
		"await_started", "signal_received", "signal_consumed", "await_timed_out":
		b.stepGap(r, ev)
	case workflow.EventRunWaiting, workflow.EventRunAdmitted:
		b.runTurn(ev)
	case workflow.EventRunSucceeded, workflow.EventRunCompensated, workflow.EventRunFailed,
		workflow.EventRunCancelled:
		b.runEnded(ev)
	case workflow.EventRunRecovered, workflow.EventStepSkipped, workflow.EventRepair,
		workflow.EventNeedsAttention, workflow.EventStepGoto, workflow.EventRetryNow:
		b.operatorMark(ev)
	case workflow.EventPaused, workflow.EventResumed:
		b.paused(ev)
	}
}

// paused reads an operator's pause and resume into the run's own row: the
// pause opens a gap of kind paused, with who paused, the resume ends it.
// A step that came due while paused waits for a worker from the resume
// on, not before (its dispatch was parked).
func (b *timelineBuilder) paused(ev workflow.Event) {
	rr := b.row(runRowName)
	if ev.Type == workflow.EventResumed {
		if g := rr.last(true); g != nil && g.Kind == gapPaused {
			closeSeg(g, ev.At, "")
			g.Label += ", resumed by " + orDash(ev.Details["actor"])
		}
		if !b.due.IsZero() {
			b.due = ev.At
		}
		return
	}
	if g := rr.last(true); g != nil && g.Kind == gapPaused {
		return // (paused twice: the first pause goes on)
	}
	b.open(rr, tlSegment{Kind: gapPaused, Gap: true, Start: ev.At, Label: "paused by " + orDash(ev.Details["actor"])})
}

// attemptStarted opens an attempt on row r, ending the row's gap and any
// earlier attempt still open (one that never reported: crashed).
func (b *timelineBuilder) attemptStarted(r *tlRow, ev workflow.Event) {
	due := b.due
	if g := r.last(true); g != nil {
		due = time.Time{}
		if g.Kind == gapBackoff && !r.retryDue.IsZero() && r.retryDue.Before(ev.At) {
			// The backoff ends when the retry is due; from then on the
			// attempt waited for a worker.
			closeSeg(g, r.retryDue, "")
			due = r.retryDue
		}
	}
	b.due, r.retryDue = time.Time{}, time.Time{}
	closeSeg(r.last(true), ev.At, "")
	if !due.IsZero() && ev.At.Sub(due) >= minWorkerWait {
		b.open(r, tlSegment{Kind: gapWorker, Gap: true, Start: due, Attempt: ev.Attempt,
			Label: fmt.Sprintf("due, waiting %s for a worker", humanDuration(ev.At.Sub(due)))})
		closeSeg(r.last(true), ev.At, "")
	}
	closeSeg(r.last(false), ev.At, segCrashed) // an attempt that never reported
	label := fmt.Sprintf("%s attempt %d", ev.Step, ev.Attempt)
	if ev.Details["resumed"] == "1" {
		label += " (resumed)"
	}
	if w := ev.Details["worker"]; w != "" {
		label += " on " + w
	}
	b.open(r, tlSegment{Kind: segRunning, Start: ev.At, Attempt: ev.Attempt, Label: label})
}

// attemptOutcomes are the segment kinds of the events that end an
// attempt.
var attemptOutcomes = map[string]string{
	workflow.EventAttemptSucceeded:   segSucceeded,
	workflow.EventAttemptFailed:      segFailed,
	workflow.EventAttemptInterrupted: segInterrupted,
	workflow.EventStepSnoozed:        segSnoozed,
}

// attemptEnded ends row r's open attempt with ev's outcome (placing one
// whose start was not journaled by its duration), with a failure's error
// as its detail; a snooze opens its gap.
func (b *timelineBuilder) attemptEnded(r *tlRow, ev workflow.Event) {
	d := ev.Details
	s := r.last(false)
	if s == nil {
		// No start journaled (an inline attempt): its duration,
		// when given, places it.
		start := ev.At
		if ms, err := strconv.ParseInt(d["duration_ms"], 10, 64); err == nil && ms > 0 {
			start = ev.At.Add(-time.Duration(ms) * time.Millisecond)
		}
		b.open(r, tlSegment{Kind: segRunning, Start: start, Attempt: ev.Attempt,
			Label: fmt.Sprintf("%s attempt %d", ev.Step, ev.Attempt)})
		s = r.last(false)
	}
	closeSeg(s, ev.At, attemptOutcomes[ev.Type])
	if s != nil && ev.Type == workflow.EventAttemptFailed {
		s.Detail = d["error"]
		if what := strings.TrimSpace(d["class"] + " " + d["code"]); what != "" {
			s.Detail = what + ": " + s.Detail
		}
	}
	if ev.Type == workflow.EventStepSnoozed {
		b.open(r, tlSegment{Kind: gapSnooze, Gap: true, Start: ev.At,
			Label: "snoozed " + msText(d["delay_ms"])})
	}
}

// stepGap reads a step's wait into row r: a backoff, a circuit breaker's
// deferral, a timer or a signal opens its gap (ending the one before);
// the timer firing or the signal coming ends it.
func (b *timelineBuilder) stepGap(r *tlRow, ev workflow.Event) {
	d := ev.Details
	// A wait explains the time until it ends; its end makes the next step
	// due (a timer or a signal), or its attempt (a backoff, below).
	switch ev.Type {
	case workflow.EventTimerFired, "signal_received", "signal_consumed", "await_timed_out":
		if ev.Step != "" {
			b.due = ev.At
		}
	default:
		b.due = time.Time{}
		r.retryDue = time.Time{}
	}
	switch ev.Type {
	case workflow.EventRetryScheduled:
		if ms, err := strconv.ParseInt(d["delay_ms"], 10, 64); err == nil && ms >= 0 {
			r.retryDue = ev.At.Add(time.Duration(ms) * time.Millisecond)
		}
		closeSeg(r.last(true), ev.At, "")
		b.open(r, tlSegment{Kind: gapBackoff, Gap: true, Start: ev.At, Attempt: ev.Attempt,
			Label: fmt.Sprintf("backoff %s before attempt %d", msText(d["delay_ms"]), ev.Attempt)})
	case "attempt_deferred":
		closeSeg(r.last(true), ev.At, "")
		b.open(r, tlSegment{Kind: gapBreaker, Gap: true, Start: ev.At, Attempt: ev.Attempt,
			Label: "deferred by circuit breaker " + d["breaker"]})
	case workflow.EventTimerSet:
		closeSeg(r.last(true), ev.At, "")
		b.open(r, tlSegment{Kind: gapTimer, Gap: true, Start: ev.At, Label: "sleeping" + prefixed(" until ", d["until"])})
	case workflow.EventTimerFired:
		closeSeg(r.last(true), ev.At, "")
	case "await_started":
		closeSeg(r.last(true), ev.At, "")
		b.open(r, tlSegment{Kind: gapSignal, Gap: true, Start: ev.At, Label: "waiting for signal " + d["signal"] +
			prefixed(" until ", d["until"])})
	case "signal_received", "signal_consumed", "await_timed_out":
		if ev.Step != "" {
			closeSeg(r.last(true), ev.At, "")
		}
	}
}

// runTurn reads the run's wait for its turn, under its ordering key or
// its workflow's max_running, into the run's own row: waiting opens the
// gap, admission ends it.
func (b *timelineBuilder) runTurn(ev workflow.Event) {
	rr := b.row(runRowName)
	if ev.Type == workflow.EventRunAdmitted {
		closeSeg(rr.last(true), ev.At, "")
		b.due = ev.At // its first step's task is written now
		return
	}
	b.due = time.Time{}
	what := "its turn under its ordering key"
	if ev.Details["reason"] == "workflow_limit" {
		what = "a slot under its workflow's max_running"
	}
	if p := ev.Details["position"]; p != "" {
		what += " (position " + p + ")"
	}
	closeSeg(rr.last(true), ev.At, "")
	b.open(rr, tlSegment{Kind: gapOrdering, Gap: true, Start: ev.At, Label: "waiting for " + what})
}

// runEnded ends every open segment with the run (attempts as stopped);
// a cancellation is also marked, with who cancelled.
func (b *timelineBuilder) runEnded(ev workflow.Event) {
	b.closeAll(ev.At, segStopped)
	if ev.Type == workflow.EventRunCancelled {
		b.mark(ev, markOperator, "cancelled by "+orDash(ev.Details["actor"]))
	}
}

// operatorMark marks what an operator or the worker did to the run: a
// recovery, a skipped step, a repair, a call for attention, a goto, a retry
// made due now.
func (b *timelineBuilder) operatorMark(ev workflow.Event) {
	d := ev.Details
	switch ev.Type {
	case workflow.EventRunRecovered:
		b.mark(ev, markOperator, fmt.Sprintf("%s by %s", orDash(d["action"]), orDash(d["actor"])))
	case workflow.EventStepSkipped:
		b.mark(ev, markOperator, fmt.Sprintf("%s skipped by %s", ev.Step, orDash(d["actor"])))
	case workflow.EventRepair:
		b.mark(ev, markRepair, "repaired: "+orDash(d["kind"]))
	case workflow.EventNeedsAttention:
		b.mark(ev, markAttention, "needs attention: "+orDash(d["reason"]))
	case workflow.EventStepGoto:
		b.mark(ev, markGoto, fmt.Sprintf("goto %s", d["to"]))
	case workflow.EventRetryNow:
		b.mark(ev, markOperator, fmt.Sprintf("%s: retry now by %s", ev.Step, orDash(d["actor"])))
	}
}

// finish ends the timeline: what is still open runs to its end (and is
// stopped there if the run is over), the end is stretched over every
// segment and mark, and rows without segments are left out.
func (b *timelineBuilder) finish(terminal bool) timeline {
	b.runOpenToEnd(terminal)
	b.fitEnd()
	// Rows without segments (a step known only by a mark, the run's own
	// row without waits) are left out; their marks span the timeline.
	b.tl.Rows = slices.DeleteFunc(b.tl.Rows, func(r tlRow) bool { return len(r.Segments) == 0 })
	return b.tl
}

// runOpenToEnd runs what is still open to the end of the timeline; if the
// run is over (terminal), it closes there, its attempts as stopped.
func (b *timelineBuilder) runOpenToEnd(terminal bool) {
	for i := range b.tl.Rows {
		for j := range b.tl.Rows[i].Segments {
			s := &b.tl.Rows[i].Segments[j]
			if s.Open {
				s.End = b.tl.End
				if terminal {
					s.Open = false
					if !s.Gap {
						s.Kind = segStopped
					}
				}
			}
		}
	}
}

// fitEnd makes no segment end before it starts, and moves the timeline's
// end past every segment and mark (and at least a millisecond past its
// start).
func (b *timelineBuilder) fitEnd() {
	tl := &b.tl
	for i := range tl.Rows {
		for j := range tl.Rows[i].Segments {
			s := &tl.Rows[i].Segments[j]
			if s.End.Before(s.Start) {
				s.End = s.Start
			}
			if s.End.After(tl.End) {
				tl.End = s.End
			}
		}
	}
	for _, m := range tl.Marks {
		if m.At.After(tl.End) {
			tl.End = m.At
		}
	}
	if !tl.End.After(tl.Start) {
		tl.End = tl.Start.Add(time.Millisecond)
	}
}

// prefixed is prefix and s, or "" for an empty s.
func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// msText writes a duration given in milliseconds ("" for none).
func msText(v string) string {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return ""
	}
	return humanDuration(time.Duration(n) * time.Millisecond)
}

// Geometry of the timeline.
const (
	tlW      = 1000
	tlLabelW = 170
	tlRowH   = 26
	tlTop    = 8
	tlAxisH  = 22
	tlMinBar = 2.0 // attempts are at least this wide, to be seen
)

// tlShape is a segment laid out.
type tlShape struct {
	svgRect
	Gap bool
}

// tlMarkShape is a mark laid out: a line across its row (or the whole
// timeline) and a small triangle on top.
type tlMarkShape struct {
	X, Y1, Y2 float64
	Points    string // the triangle
	Class     string
	Title     string
}

// tlRowView is a row laid out.
type tlRowView struct {
	Name   string
	Y      float64
	Shapes []tlShape
	Label  svgText
}

// timelineView is a timeline laid out, for the template.
type timelineView struct {
	W, H      int
	Rows      []tlRowView
	Marks     []tlMarkShape
	Grid      []svgLine
	Labels    []svgText
	Truncated bool
	// Items lists every segment and mark in time order: the table
	// alternative of the chart.
	Items []tlItem
	// Summary is the chart's text alternative, for its <desc>.
	Summary string
}

// tlItem is a line of the timeline's table.
type tlItem struct {
	At       time.Time
	Row      string
	Kind     string
	Label    string
	Duration string
}

// layoutTimeline lays out a timeline on a linear time axis.
func layoutTimeline(tl timeline) timelineView {
	v := timelineView{W: tlW, Truncated: tl.Truncated}
	span := tl.End.Sub(tl.Start)
	plotW := float64(tlW - tlLabelW - 10)
	x := func(t time.Time) float64 {
		return float64(tlLabelW) + plotW*float64(t.Sub(tl.Start))/float64(span)
	}
	rowY := map[string]float64{}
	for i, r := range tl.Rows {
		y := float64(tlTop + i*tlRowH)
		rowY[r.Name] = y
		rv := tlRowView{Name: r.Name, Y: y, Label: svgText{X: tlLabelW - 8, Y: y + tlRowH/2 + 4, Text: cut(r.Name, 24),
			Anchor: "end", Class: "row-label"}}
		for _, s := range r.Segments {
			x1, x2 := x(s.Start), x(s.End)
			sh := tlShape{Gap: s.Gap}
			sh.Class = "t-" + s.Kind
			if s.Open {
				sh.Class += " open"
			}
			if s.Gap {
				sh.Y, sh.H = y+tlRowH/2-3, 6
				sh.W = max(x2-x1, 1)
			} else {
				sh.Y, sh.H = y+4, tlRowH-8
				sh.W = max(x2-x1, tlMinBar)
			}
			sh.X, sh.W, sh.Y = round2(x1), round2(sh.W), round2(sh.Y)
			dur := humanDuration(s.End.Sub(s.Start))
			sh.Title = s.Label + " — " + dur
			if !s.Gap {
				sh.Title += ", " + s.Kind
			}
			if s.Open {
				sh.Title += " (so far)"
			}
			if s.Detail != "" {
				sh.Title += "\n" + s.Detail
			}
			rv.Shapes = append(rv.Shapes, sh)
			v.Items = append(v.Items, tlItem{At: s.Start, Row: r.Name, Kind: s.Kind, Label: s.Label + detailSuffix(s.Detail),
				Duration: dur})
		}
		v.Rows = append(v.Rows, rv)
	}
	bottom := float64(tlTop + len(tl.Rows)*tlRowH)
	for _, m := range tl.Marks {
		mx := round2(x(m.At))
		y1, y2 := float64(tlTop), bottom
		if y, ok := rowY[m.Step]; ok && m.Step != "" {
			y1, y2 = y, y+tlRowH
		}
		v.Marks = append(v.Marks, tlMarkShape{X: mx, Y1: y1, Y2: y2, Class: "m-" + m.Kind, Title: m.Label,
			Points: fmt.Sprintf("%.2f,%.2f %.2f,%.2f %.2f,%.2f", mx-4, y1, mx+4, y1, mx, y1+6)})
		row := m.Step
		if row == "" {
			row = runRowName
		}
		v.Items = append(v.Items, tlItem{At: m.At, Row: row, Kind: m.Kind, Label: m.Label})
	}
	sortItems(v.Items)
	// Time ticks: relative to the start, at a round interval.
	step := tickStep(span, 6)
	for t := time.Duration(0); t <= span; t += step {
		tx := round2(x(tl.Start.Add(t)))
		v.Grid = append(v.Grid, svgLine{X1: tx, Y1: tlTop, X2: tx, Y2: bottom, Class: "grid"})
		label := "+" + humanDuration(t)
		if t == 0 {
			label = tl.Start.UTC().Format("15:04:05")
		}
		anchor := "middle"
		if t == 0 {
			anchor = "start"
		}
		v.Labels = append(v.Labels, svgText{X: tx, Y: bottom + 15, Text: label, Anchor: anchor, Class: "axis"})
	}
	v.H = int(bottom) + tlAxisH
	attempts, gaps := 0, 0
	for _, r := range tl.Rows {
		for _, s := range r.Segments {
			if s.Gap {
				gaps++
			} else {
				attempts++
			}
		}
	}
	v.Summary = fmt.Sprintf("%d attempts and %d waits over %s, from %s; %d marks (crashes, repairs, operator actions).",
		attempts, gaps, humanDuration(span), tl.Start.UTC().Format("2006-01-02 15:04:05 UTC"), len(tl.Marks))
	return v
}

func detailSuffix(d string) string {
	if d == "" {
		return ""
	}
	return " — " + d
}

// sortItems sorts the table lines by time, stably.
func sortItems(items []tlItem) {
	slices.SortStableFunc(items, func(a, b tlItem) int { return a.At.Compare(b.At) })
}

// tickSteps are the intervals the timeline's ticks may take.
var tickSteps = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 2 * 24 * time.Hour,
	7 * 24 * time.Hour, 14 * 24 * time.Hour, 28 * 24 * time.Hour,
}

// tickStep returns the smallest tick interval that cuts span into at most
// n intervals.
func tickStep(span time.Duration, n int) time.Duration {
	for _, s := range tickSteps {
		if span/s <= time.Duration(n) {
			return s
		}
	}
	return span / time.Duration(n)
}

// stepError is an attempt's error in a step's history.
type stepError struct {
	Attempt int
	At      time.Time
	Class   string
	Code    string
	Error   string
}

// stepErrors returns each step's failed attempts from the journal, oldest
// first, by step name.
func stepErrors(evs []workflow.Event) map[string][]stepError {
	out := map[string][]stepError{}
	for _, ev := range evs {
		if ev.Type != workflow.EventAttemptFailed || ev.Step == "" {
			continue
		}
		out[ev.Step] = append(out[ev.Step], stepError{Attempt: ev.Attempt, At: ev.At, Class: ev.Details["class"],
			Code: ev.Details["code"], Error: ev.Details["error"]})
	}
	return out
}
