package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/workflow"
)

// synthLine is a line of runs for checkOrdering's own test; each run is
// {created, first attempt, end} in milliseconds from t0: its first step
// begins at its first attempt, every step succeeds at its end, and the
// audit shows one body from its first attempt + 1ms to its end - 1ms.
func synthLine(t0 time.Time, name string, conc int, runs [][3]int) (*ordLine, []demo.AuditEntry) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	l := &ordLine{name: name, variant: name, conc: conc}
	var audit []demo.AuditEntry
	for i, r := range runs {
		id := fmt.Sprintf("%s-run%02d", name, i)
		created, first, end := at(r[0]), at(r[1]), at(r[2])
		evs := []workflow.Event{{Type: workflow.EventRunStarted, At: created}}
		if i >= conc {
			evs = append(evs, workflow.Event{Type: "run_waiting", At: created},
				workflow.Event{Type: "run_admitted", At: first})
		}
		evs = append(evs, workflow.Event{Type: workflow.EventAttemptStarted, At: first, Step: "s1", Attempt: 1})
		for _, step := range demo.OrderedSteps { // as if each step took no time after the first began
			evs = append(evs, workflow.Event{Type: workflow.EventAttemptSucceeded, At: end, Step: step, Attempt: 1})
		}
		evs = append(evs, workflow.Event{Type: workflow.EventRunSucceeded, At: end})
		l.runs = append(l.runs, &ordRun{variant: name, line: name, seq: i, id: id, wantStatus: workflow.StatusSucceeded,
			run: &workflow.Run{ID: id, Status: workflow.StatusSucceeded, CreatedAt: created}, evs: evs})
		audit = append(audit,
			demo.AuditEntry{Phase: "start", RunID: id, Step: "s1", Attempt: 1, At: first.Add(time.Millisecond), PID: 1},
			demo.AuditEntry{Phase: "end", RunID: id, Step: "s1", Attempt: 1, At: end.Add(-time.Millisecond), PID: 1})
	}
	return l, audit
}

// TestCheckOrderingCatches: the ordering suite's checker passes a correct
// line and reports each kind of violation it exists for.
func TestCheckOrderingCatches(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	quiet := int(ordQuietBound / time.Millisecond)
	for _, tc := range []struct {
		name string
		conc int
		runs [][3]int
		want string // "" for no violation
	}{
		{"good-c1", 1, [][3]int{{0, 1, 10}, {0, 10, 20}, {0, 21, 30}}, ""},
		{"good-c3", 3, [][3]int{{0, 1, 50}, {0, 2, 10}, {0, 3, 40}, {0, 12, 30}, {0, 31, 60}}, ""},
		{"overlap-c1", 1, [][3]int{{0, 1, 10}, {0, 9, 20}}, "before run #0"},
		{"overlap-c3", 3, [][3]int{{0, 1, 50}, {0, 2, 50}, {0, 3, 50}, {0, 40, 60}}, "4 runs active at once"},
		{"order-c1", 1, [][3]int{{0, 1, 10}, {0, 20, 30}, {0, 11, 19}}, "before run #1"},
		{"wait", 1, [][3]int{{0, 1, 10}, {0, 10 + quiet + 1, quiet + 20}}, "after a slot was free"},
		{"gap", 1, [][3]int{{0, 1, 10}, {0, 10, quiet + 20}}, "no journal event"},
	} {
		l, audit := synthLine(t0, tc.name, tc.conc, tc.runs)
		c := checkOrdering([]*ordLine{l}, audit, nil)
		got := strings.Join(c.violations, "\n")
		switch {
		case tc.want == "" && got != "":
			t.Errorf("%s: violations for a correct line:\n%s", tc.name, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("%s: violations %q; want one saying %q", tc.name, got, tc.want)
		}
	}
}
