package dashboard

import (
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// TestTimelinePaused: a pause is a gap of its own kind on the run's row,
// from the pause to the resume, labelled with who did each; the step that
// came due while paused waits for a worker from the resume on; a pause
// still in force runs, open, to now.
func TestTimelinePaused(t *testing.T) {
	t.Parallel()
	s := time.Second
	fin := t0.Add(20 * s)
	run := &workflow.Run{ID: "r", CreatedAt: t0, Status: workflow.StatusSucceeded, FinishedAt: &fin}
	evs := []workflow.Event{
		ev(0, workflow.EventRunStarted, "", 0),
		ev(0, workflow.EventAttemptStarted, "a", 1),
		ev(1*s, workflow.EventPaused, "", 0, "actor", "<b>ops</b>"),
		ev(1*s, workflow.EventPaused, "", 0, "actor", "again"), // the second pause changes nothing
		ev(2*s, workflow.EventAttemptSucceeded, "a", 1),
		ev(3*s, workflow.EventDispatchParked, "b", 1),
		ev(9*s, workflow.EventResumed, "", 0, "actor", "root", "step", "b"),
		ev(11*s, workflow.EventAttemptStarted, "b", 1), // 2s for a worker after the resume
		ev(12*s, workflow.EventAttemptSucceeded, "b", 1),
		ev(20*s, workflow.EventRunSucceeded, "", 0),
	}
	tl := buildTimeline(run, evs, t0.Add(time.Hour))
	rows := map[string][]tlSegment{}
	for _, r := range tl.Rows {
		rows[r.Name] = r.Segments
	}
	p := rows[runRowName]
	if len(p) != 1 || p[0].Kind != gapPaused || !p[0].Gap || !p[0].Start.Equal(t0.Add(s)) || !p[0].End.Equal(t0.Add(9*s)) || p[0].Open {
		t.Fatalf("the run's row: %+v; want one paused gap from 1s to 9s", p)
	}
	if p[0].Label != "paused by <b>ops</b>, resumed by root" {
		t.Errorf("label %q", p[0].Label)
	}
	b := rows["b"]
	if len(b) != 2 || b[0].Kind != gapWorker || !b[0].Start.Equal(t0.Add(9*s)) || !b[0].End.Equal(t0.Add(11*s)) {
		t.Errorf("row b: %+v; want a worker's wait from the resume (9s) to 11s", b)
	}

	// Still paused: the gap runs, open, to now.
	open := &workflow.Run{ID: "r", CreatedAt: t0, Status: workflow.StatusRunning}
	tl = buildTimeline(open, evs[:6], t0.Add(30*s))
	for _, r := range tl.Rows {
		if r.Name == runRowName {
			if g := r.Segments[0]; g.Kind != gapPaused || !g.Open || !g.End.Equal(t0.Add(30*s)) {
				t.Errorf("an open pause: %+v", g)
			}
			return
		}
	}
	t.Error("no row of the run's own waits while paused")
}
