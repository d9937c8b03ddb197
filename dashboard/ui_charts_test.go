package dashboard

import (
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// t0 is the fixed "now" of the chart and timeline tests: no test here
// reads the wall clock.
var t0 = time.Date(2025, 3, 4, 10, 7, 30, 0, time.UTC)

func TestBucketEdges(t *testing.T) {
	t.Parallel()
	w, _ := windowNamed("1h")
	edges := bucketEdges(w, t0)
	if len(edges) != 31 {
		t.Fatalf("%d edges, want 31 (30 buckets of 2m)", len(edges))
	}
	if want := time.Date(2025, 3, 4, 10, 8, 0, 0, time.UTC); !edges[30].Equal(want) {
		t.Errorf("last edge %s, want %s (the bucket holding now ends there)", edges[30], want)
	}
	if want := time.Date(2025, 3, 4, 9, 8, 0, 0, time.UTC); !edges[0].Equal(want) {
		t.Errorf("first edge %s, want %s", edges[0], want)
	}
	// A moment later, the same buckets.
	if later := bucketEdges(w, t0.Add(20*time.Second)); !later[0].Equal(edges[0]) {
		t.Errorf("edges moved within a bucket: %s", later[0])
	}
	for _, c := range []struct {
		at   time.Time
		want int
	}{
		{edges[0], 0},
		{edges[0].Add(-time.Millisecond), -1},
		{edges[1].Add(-time.Millisecond), 0},
		{edges[1], 1},
		{t0, 29},
		{edges[30], -1},
	} {
		if got := bucketOf(edges, c.at); got != c.want {
			t.Errorf("bucketOf(%s) = %d, want %d", c.at, got, c.want)
		}
	}
	day, _ := windowNamed("24h")
	if e := bucketEdges(day, t0); len(e) != 49 || e[48].Sub(e[0]) != 24*time.Hour {
		t.Errorf("24h: %d edges over %s, want 49 over 24h", len(e), e[len(e)-1].Sub(e[0]))
	}
	if _, ok := windowNamed("7d"); ok {
		t.Error("window 7d accepted")
	}
	if w, ok := windowNamed(""); !ok || w.Name != "1h" {
		t.Errorf("default window %q", w.Name)
	}
}

func TestBucketStamps(t *testing.T) {
	t.Parallel()
	w, _ := windowNamed("1h")
	edges := bucketEdges(w, t0)
	stamps := []workflow.RunStamp{
		{ID: "a", CreatedAt: t0, Status: workflow.StatusSucceeded, Owner: "alice"},
		{ID: "b", CreatedAt: t0.Add(-time.Second), Status: workflow.StatusFailed, Owner: "alice"},
		{ID: "c", CreatedAt: edges[0], Status: workflow.StatusSucceeded, Owner: "alice"},
		{ID: "d", CreatedAt: edges[0].Add(-time.Second), Status: workflow.StatusSucceeded, Owner: "alice"}, // before the window
		{ID: "e", CreatedAt: t0, Status: workflow.StatusSucceeded, Owner: "bob"},
	}
	got := bucketStamps(edges, stamps, func(s workflow.RunStamp) bool { return s.Owner == "alice" })
	if s := got[workflow.StatusSucceeded]; s[29] != 1 || s[0] != 1 || sum(s) != 2 {
		t.Errorf("succeeded %v, want 1 in the first and 1 in the last bucket", s)
	}
	if f := got[workflow.StatusFailed]; f[29] != 1 || sum(f) != 1 {
		t.Errorf("failed %v", f)
	}
	if all := bucketStamps(edges, stamps, nil); sum(all[workflow.StatusSucceeded]) != 3 {
		t.Errorf("without a filter: %v", all[workflow.StatusSucceeded])
	}
}

func sum(ns []int64) int64 {
	var t int64
	for _, n := range ns {
		t += n
	}
	return t
}

func TestBuildRunsChart(t *testing.T) {
	t.Parallel()
	w, _ := windowNamed("1h")
	edges := bucketEdges(w, t0)
	counts := map[workflow.RunStatus][]int64{
		workflow.StatusSucceeded: make([]int64, 30),
		workflow.StatusFailed:    make([]int64, 30),
	}
	counts[workflow.StatusSucceeded][29] = 6
	counts[workflow.StatusFailed][29] = 2
	counts[workflow.StatusSucceeded][3] = 1
	c := buildRunsChart(w, edges, counts)
	if c.Total != 9 || c.Max != 10 || len(c.Buckets) != 30 {
		t.Fatalf("total %d, max %d, %d buckets; want 9, 10 (8 rounded up), 30", c.Total, c.Max, len(c.Buckets))
	}
	last := c.Buckets[29]
	if len(last.Rects) != 2 || last.Rects[0].Class != "s-succeeded" || last.Rects[1].Class != "s-failed" {
		t.Fatalf("last bar %+v, want succeeded under failed", last.Rects)
	}
	plotH := float64(runsChartH - runsChartTop - runsChartBot)
	if h := last.Rects[0].H; h != round2(plotH*6/10) {
		t.Errorf("6 of 10 is %.2f high, want %.2f", h, plotH*6/10)
	}
	if last.Rects[1].Y+last.Rects[1].H != last.Rects[0].Y {
		t.Errorf("failed (%+v) is not stacked on succeeded (%+v)", last.Rects[1], last.Rects[0])
	}
	if last.Title != "10:06–10:08 UTC: 6 succeeded, 2 failed" {
		t.Errorf("title %q", last.Title)
	}
	if c.Buckets[0].Title != "09:08–09:10 UTC: no runs" || len(c.Buckets[0].Rects) != 0 {
		t.Errorf("empty bucket: %q %v", c.Buckets[0].Title, c.Buckets[0].Rects)
	}
	if c.Summary != "9 runs created in the last hour: 7 succeeded, 2 failed." {
		t.Errorf("summary %q", c.Summary)
	}
	for _, n := range []int64{0, 1, 2, 3, 7, 10, 11, 99, 101, 4999} {
		m := niceMax(n)
		if m < n || m < 1 {
			t.Errorf("niceMax(%d) = %d", n, m)
		}
	}
	for top, want := range map[int64]int64{1: 1, 2: 1, 5: 1, 10: 2, 20: 5, 50: 10, 100: 20, 2000: 500} {
		if got := yStep(top); got != want {
			t.Errorf("yStep(%d) = %d, want %d", top, got, want)
		}
	}
	var ys []string
	for _, l := range c.Labels {
		if l.Anchor == "end" && l.X == runsChartLeft-6 {
			ys = append(ys, l.Text)
		}
	}
	if strings.Join(ys, ",") != "0,2,4,6,8,10" {
		t.Errorf("y labels %v, want 0 to 10 by 2", ys)
	}
	if niceMax(11) != 20 || niceMax(101) != 200 || niceMax(4999) != 5000 {
		t.Errorf("niceMax: 11→%d 101→%d 4999→%d", niceMax(11), niceMax(101), niceMax(4999))
	}
}

func TestStepStats(t *testing.T) {
	t.Parallel()
	n := func(typ, wf, step, owner string) workflow.Notification {
		return workflow.Notification{Type: typ, Workflow: wf, Owner: owner, Details: map[string]string{"step": step}}
	}
	ns := []workflow.Notification{
		n("retry_scheduled", "orders", "charge", "alice"),
		n("retry_scheduled", "orders", "charge", "alice"),
		n("step_failed", "orders", "charge", "alice"),
		n("retry_scheduled", "orders", "ship", "bob"),
		n("step_failed", "mail", "send", "alice"),
		n("run_failed", "mail", "send", "alice"), // counted once, as step_failed
		n("run_succeeded", "mail", "", "alice"),
	}
	got := stepStats(ns, nil)
	want := []stepStat{{"orders", "charge", 2, 1}, {"mail", "send", 0, 1}, {"orders", "ship", 1, 0}}
	if len(got) != len(want) {
		t.Fatalf("%+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	alice := stepStats(ns, func(x workflow.Notification) bool { return x.Owner == "alice" })
	if len(alice) != 2 {
		t.Errorf("alice's: %+v", alice)
	}
	c := buildStepsChart(got)
	if len(c.Rows) != 3 || c.Max != 5 || c.Rows[0].Label != "orders · charge" {
		t.Fatalf("chart rows %d, max %d, first %q", len(c.Rows), c.Max, c.Rows[0].Label)
	}
	r := c.Rows[0]
	if len(r.Rects) != 2 || r.Rects[0].Class != "k-retries" || r.Rects[1].X != round2(r.Rects[0].X+r.Rects[0].W) ||
		r.Rects[0].W != 2*r.Rects[1].W {
		t.Errorf("first row %+v: want retries then failures, 2:1", r.Rects)
	}
	if !strings.Contains(c.Summary, "orders charge: 2 retries, 1 failure") {
		t.Errorf("summary %q", c.Summary)
	}
	many := make([]stepStat, 40)
	for i := range many {
		many[i] = stepStat{Workflow: "w", Step: strings.Repeat("s", i+1), Retries: 1}
	}
	if c := buildStepsChart(many); len(c.Rows) != maxStepRows || c.More != 40-maxStepRows {
		t.Errorf("40 steps: %d rows, %d more", len(c.Rows), c.More)
	}
	if c := buildStepsChart(nil); len(c.Rows) != 0 || c.Summary != "No retries and no failures." {
		t.Errorf("none: %+v", c)
	}
}

func TestShortTime(t *testing.T) {
	t.Parallel()
	if got := shortTime(t0.Add(-time.Hour), t0); got != "09:07:30" {
		t.Errorf("same day: %q", got)
	}
	if got := shortTime(t0.Add(-24*time.Hour), t0); got != "Mar 3 10:07" {
		t.Errorf("the day before: %q", got)
	}
	if got := shortTime(time.Time{}, t0); got != "—" {
		t.Errorf("zero: %q", got)
	}
}

func TestHumanDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0:                                 "0s",
		-time.Second:                      "0s",
		850 * time.Millisecond:            "850ms",
		42 * time.Second:                  "42s",
		3*time.Minute + 4*time.Second:     "3m 04s",
		2*time.Hour + 5*time.Minute:       "2h 05m",
		3*24*time.Hour + 4*time.Hour + 59: "3d 04h",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

// ev is a journal entry at t0 plus at.
func ev(at time.Duration, typ, step string, attempt int, details ...string) workflow.Event {
	e := workflow.Event{Type: typ, At: t0.Add(at), Step: step, Attempt: attempt}
	if len(details) > 0 {
		e.Details = map[string]string{}
		for i := 0; i+1 < len(details); i += 2 {
			e.Details[details[i]] = details[i+1]
		}
	}
	return e
}

func TestBuildTimeline(t *testing.T) {
	t.Parallel()
	s := time.Second
	fin := t0.Add(30 * s)
	run := &workflow.Run{ID: "r", CreatedAt: t0, Status: workflow.StatusSucceeded, FinishedAt: &fin}
	evs := []workflow.Event{
		ev(0, workflow.EventRunStarted, "", 0),
		ev(0, workflow.EventRunWaiting, "", 0, "reason", "ordering_key", "position", "2"),
		ev(s, workflow.EventRunAdmitted, "", 0),
		ev(s, workflow.EventAttemptStarted, "fetch", 1),
		ev(2*s, workflow.EventAttemptFailed, "fetch", 1, "class", "transient", "error", "503"),
		ev(2*s, workflow.EventRetryScheduled, "fetch", 2, "delay_ms", "4000"),
		ev(6*s, "attempt_deferred", "fetch", 2, "breaker", "payments"),
		ev(8*s, workflow.EventAttemptStarted, "fetch", 2),
		ev(10*s, workflow.EventAttemptCrashed, "fetch", 2, "crashes", "1"),
		ev(11*s, workflow.EventAttemptStarted, "fetch", 2, "resumed", "1"),
		ev(12*s, workflow.EventAttemptSucceeded, "fetch", 2),
		ev(12*s, "await_started", "approve", 0, "signal", "ok"),
		ev(15*s, "signal_received", "approve", 0, "signal", "ok"),
		ev(15*s, workflow.EventTimerSet, "nap", 0),
		ev(20*s, workflow.EventTimerFired, "nap", 0),
		ev(21*s, workflow.EventRunRecovered, "", 0, "action", "recover", "actor", "root"),
		ev(30*s, workflow.EventRunSucceeded, "", 0),
	}
	tl := buildTimeline(run, evs, t0.Add(time.Hour))
	if !tl.Start.Equal(t0) || !tl.End.Equal(fin) {
		t.Fatalf("timeline %s to %s, want the run's creation to its end", tl.Start, tl.End)
	}
	type seg struct {
		kind       string
		gap        bool
		start, end time.Duration
	}
	want := map[string][]seg{
		runRowName: {{gapOrdering, true, 0, s}},
		"fetch": {
			{segFailed, false, s, 2 * s},
			{gapBackoff, true, 2 * s, 6 * s},
			{gapBreaker, true, 6 * s, 8 * s},
			{segCrashed, false, 8 * s, 10 * s},
			{segSucceeded, false, 11 * s, 12 * s},
		},
		"approve": {{gapSignal, true, 12 * s, 15 * s}},
		"nap":     {{gapTimer, true, 15 * s, 20 * s}},
	}
	if len(tl.Rows) != 4 || tl.Rows[0].Name != runRowName || tl.Rows[1].Name != "fetch" {
		t.Fatalf("rows %+v", tl.Rows)
	}
	for _, r := range tl.Rows {
		w := want[r.Name]
		if len(r.Segments) != len(w) {
			t.Errorf("row %s: %d segments %+v, want %d", r.Name, len(r.Segments), r.Segments, len(w))
			continue
		}
		for i, sg := range r.Segments {
			if sg.Kind != w[i].kind || sg.Gap != w[i].gap || !sg.Start.Equal(t0.Add(w[i].start)) ||
				!sg.End.Equal(t0.Add(w[i].end)) || sg.Open {
				t.Errorf("row %s segment %d: %s gap=%v %s..%s open=%v, want %+v", r.Name, i, sg.Kind, sg.Gap,
					sg.Start.Sub(t0), sg.End.Sub(t0), sg.Open, w[i])
			}
		}
	}
	if f := tl.Rows[1].Segments[0]; f.Detail != "transient: 503" {
		t.Errorf("failed attempt detail %q", f.Detail)
	}
	if len(tl.Marks) != 2 || tl.Marks[0].Kind != markCrash || tl.Marks[1].Kind != markOperator ||
		tl.Marks[1].Label != "recover by root" || !tl.Marks[0].At.Equal(t0.Add(10*s)) {
		t.Errorf("marks %+v, want the crash at 10s and root's recover", tl.Marks)
	}

	v := layoutTimeline(tl)
	plotW := float64(tlW - tlLabelW - 10)
	fetch := v.Rows[1]
	if got, want := fetch.Shapes[0].X, round2(tlLabelW+plotW/30); got != want {
		t.Errorf("attempt 1 at x %.2f, want %.2f (1s of 30s)", got, want)
	}
	if got, want := fetch.Shapes[1].W, round2(plotW*4/30); got != want {
		t.Errorf("backoff width %.2f, want %.2f (4s of 30s)", got, want)
	}
	if !strings.Contains(fetch.Shapes[1].Title, "backoff 4s before attempt 2") {
		t.Errorf("backoff title %q", fetch.Shapes[1].Title)
	}
	if len(v.Items) != 10 || v.Items[0].Kind != gapOrdering || v.Items[len(v.Items)-1].Kind != markOperator {
		t.Errorf("table items %+v", v.Items)
	}
	if len(v.Labels) == 0 || v.Labels[0].Text != "10:07:30" || v.Labels[1].Text != "+5s" {
		t.Errorf("axis labels %+v", v.Labels)
	}
}

// TestTimelineWorkerWaits: the time a due step waited for a worker to take
// its task is drawn, from when it was due (the run's start, the step
// before it, its backoff's end, a timer's firing) to its attempt's start;
// a wait that another gap explains, or one under minWorkerWait, is not.
func TestTimelineWorkerWaits(t *testing.T) {
	t.Parallel()
	s, ms := time.Second, time.Millisecond
	fin := t0.Add(20 * s)
	run := &workflow.Run{ID: "r", CreatedAt: t0, Status: workflow.StatusSucceeded, FinishedAt: &fin}
	evs := []workflow.Event{
		ev(0, workflow.EventRunStarted, "", 0),
		ev(2*s, workflow.EventAttemptStarted, "a", 1), // 2s for a worker
		ev(3*s, workflow.EventAttemptSucceeded, "a", 1),
		ev(3*s+5*ms, workflow.EventAttemptStarted, "b", 1), // 5ms: not drawn
		ev(4*s, workflow.EventAttemptFailed, "b", 1),
		ev(4*s, workflow.EventRetryScheduled, "b", 2, "delay_ms", "1000"),
		ev(7*s, workflow.EventAttemptStarted, "b", 2), // due at 5s: 2s for a worker
		ev(8*s, workflow.EventAttemptSucceeded, "b", 2),
		ev(8*s, workflow.EventTimerSet, "nap", 0),
		ev(12*s, workflow.EventTimerFired, "nap", 0),
		ev(13*s, workflow.EventAttemptStarted, "c", 1), // due at the timer: 1s
		ev(14*s, workflow.EventAttemptSucceeded, "c", 1),
		ev(20*s, workflow.EventRunSucceeded, "", 0),
	}
	tl := buildTimeline(run, evs, t0.Add(time.Hour))
	type seg struct {
		kind       string
		start, end time.Duration
	}
	want := map[string][]seg{
		"a":   {{gapWorker, 0, 2 * s}, {segSucceeded, 2 * s, 3 * s}},
		"b":   {{segFailed, 3*s + 5*ms, 4 * s}, {gapBackoff, 4 * s, 5 * s}, {gapWorker, 5 * s, 7 * s}, {segSucceeded, 7 * s, 8 * s}},
		"nap": {{gapTimer, 8 * s, 12 * s}},
		"c":   {{gapWorker, 12 * s, 13 * s}, {segSucceeded, 13 * s, 14 * s}},
	}
	if len(tl.Rows) != len(want) {
		t.Fatalf("rows %+v", tl.Rows)
	}
	for _, r := range tl.Rows {
		w := want[r.Name]
		if len(r.Segments) != len(w) {
			t.Errorf("row %s: segments %+v, want %+v", r.Name, r.Segments, w)
			continue
		}
		for i, sg := range r.Segments {
			if sg.Kind != w[i].kind || !sg.Start.Equal(t0.Add(w[i].start)) || !sg.End.Equal(t0.Add(w[i].end)) {
				t.Errorf("row %s segment %d: %s %s..%s, want %+v", r.Name, i, sg.Kind, sg.Start.Sub(t0), sg.End.Sub(t0), w[i])
			}
		}
	}
	if l := tl.Rows[0].Segments[0].Label; l != "due, waiting 2s for a worker" {
		t.Errorf("label %q", l)
	}
}

// TestTimelineOpen: a run under way draws its running attempt and its
// pending backoff up to now, open; an attempt too short to see is drawn
// at the minimum width.
func TestTimelineOpen(t *testing.T) {
	t.Parallel()
	run := &workflow.Run{ID: "r", CreatedAt: t0, Status: workflow.StatusRunning}
	evs := []workflow.Event{
		ev(0, workflow.EventAttemptStarted, "a", 1, "worker", "host-1:42:ab"),
		ev(time.Millisecond, workflow.EventAttemptFailed, "a", 1, "error", "x"),
		ev(time.Millisecond, workflow.EventRetryScheduled, "a", 2),
		ev(time.Hour, workflow.EventAttemptStarted, "a", 2),
	}
	now := t0.Add(time.Hour + time.Minute)
	tl := buildTimeline(run, evs, now)
	segs := tl.Rows[0].Segments
	if len(segs) != 3 || !segs[2].Open || segs[2].Kind != segRunning || !segs[2].End.Equal(now) || segs[1].Open {
		t.Fatalf("segments %+v", segs)
	}
	v := layoutTimeline(tl)
	if w := v.Rows[0].Shapes[0].W; w != tlMinBar {
		t.Errorf("a 1ms attempt in an hour is %.2f wide, want the minimum %.1f", w, tlMinBar)
	}
	if !strings.Contains(v.Rows[0].Shapes[2].Class, "open") || !strings.Contains(v.Rows[0].Shapes[2].Title, "(so far)") {
		t.Errorf("running attempt %+v", v.Rows[0].Shapes[2])
	}
	if !strings.Contains(v.Rows[0].Shapes[0].Title, "a attempt 1 on host-1:42:ab") ||
		strings.Contains(v.Rows[0].Shapes[2].Title, " on ") {
		t.Errorf("attempt titles %q, %q: want the first to name its worker, the second none", v.Rows[0].Shapes[0].Title,
			v.Rows[0].Shapes[2].Title)
	}

	// Cancelled while it backed off: the gap ends with the run.
	fin := t0.Add(10 * time.Second)
	cancelled := &workflow.Run{ID: "r", CreatedAt: t0, Status: workflow.StatusCancelled, FinishedAt: &fin}
	tl = buildTimeline(cancelled, append(evs[:3:3], ev(10*time.Second, workflow.EventRunCancelled, "a", 2, "actor", "alice")), now)
	if segs := tl.Rows[0].Segments; len(segs) != 2 || segs[1].Open || !segs[1].End.Equal(fin) {
		t.Errorf("cancelled: %+v", segs)
	}
	if len(tl.Marks) != 1 || tl.Marks[0].Label != "cancelled by alice" {
		t.Errorf("marks %+v", tl.Marks)
	}
}

func TestStepErrorsAreHistoryOnceDone(t *testing.T) {
	t.Parallel()
	evs := []workflow.Event{
		ev(0, workflow.EventAttemptFailed, "a", 1, "class", "transient", "error", "first"),
		ev(time.Second, workflow.EventAttemptFailed, "a", 2, "class", "transient", "error", "second"),
		ev(2*time.Second, workflow.EventAttemptFailed, "b", 1, "error", "b's"),
	}
	errs := stepErrors(evs)
	done := stepView{StepState: workflow.StepState{Name: "a", Status: workflow.StepSucceeded, LastError: "second"}}
	setStepErrors(&done, errs["a"])
	if done.CurrentError || len(done.History) != 2 || done.History[1].Error != "second" {
		t.Errorf("succeeded after errors: current %v, history %+v; want no current error, both in the history",
			done.CurrentError, done.History)
	}
	retrying := stepView{StepState: workflow.StepState{Name: "a", Status: workflow.StepPending, LastError: "second"}}
	setStepErrors(&retrying, errs["a"])
	if !retrying.CurrentError || len(retrying.History) != 1 || retrying.History[0].Error != "first" {
		t.Errorf("retrying: current %v, history %+v; want the last error current, the first in the history",
			retrying.CurrentError, retrying.History)
	}
	trimmed := stepView{StepState: workflow.StepState{Name: "c", Status: workflow.StepSucceeded, LastError: "old", Attempts: 3}}
	setStepErrors(&trimmed, nil)
	if trimmed.CurrentError || len(trimmed.History) != 1 || trimmed.History[0].Error != "old" {
		t.Errorf("journal trimmed: %+v", trimmed.History)
	}
	clean := stepView{StepState: workflow.StepState{Name: "d", Status: workflow.StepSucceeded}}
	setStepErrors(&clean, nil)
	if clean.CurrentError || clean.History != nil {
		t.Errorf("no errors: %+v", clean)
	}
}
