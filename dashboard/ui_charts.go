package dashboard

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// The charts of the web UI are SVG drawn on the server: the computations
// here (buckets, scales, geometry) are pure functions of their data and a
// time given by the caller (the server's clock), and the templates only
// write out the shapes.

// chartWindow is a time window a chart covers, cut into buckets of Step.
type chartWindow struct {
	Name      string // the query value: "1h", "24h"
	Label     string // "last hour"
	Span      time.Duration
	Step      time.Duration
	TickEvery int // a time label every TickEvery buckets
}

// chartWindows are the windows the activity page offers; the first is the
// default.
var chartWindows = []chartWindow{
	{Name: "1h", Label: "last hour", Span: time.Hour, Step: 2 * time.Minute, TickEvery: 5},
	{Name: "24h", Label: "last day", Span: 24 * time.Hour, Step: 30 * time.Minute, TickEvery: 8},
}

// windowNamed returns the window of a query value; "" is the default.
func windowNamed(name string) (chartWindow, bool) {
	if name == "" {
		return chartWindows[0], true
	}
	for _, w := range chartWindows {
		if w.Name == name {
			return w, true
		}
	}
	return chartWindow{}, false
}

// bucketEdges returns the edges of w's buckets that end with the bucket
// holding now: Span/Step buckets, aligned to whole multiples of Step (in
// Unix time), so that a chart drawn a moment later has the same buckets.
func bucketEdges(w chartWindow, now time.Time) []time.Time {
	n := int(w.Span / w.Step)
	end := now.UTC().Truncate(w.Step).Add(w.Step)
	edges := make([]time.Time, n+1)
	for i := range edges {
		edges[i] = end.Add(-time.Duration(n-i) * w.Step)
	}
	return edges
}

// bucketOf returns the index of the bucket of t among edges (-1 outside).
func bucketOf(edges []time.Time, t time.Time) int {
	if len(edges) < 2 || t.Before(edges[0]) || !t.Before(edges[len(edges)-1]) {
		return -1
	}
	step := edges[1].Sub(edges[0])
	i := int(t.Sub(edges[0]) / step)
	return min(i, len(edges)-2)
}

// bucketStamps counts the runs of stamps in each bucket of edges, by
// status, keeping those keep accepts (nil: every run).
func bucketStamps(edges []time.Time, stamps []workflow.RunStamp, keep func(workflow.RunStamp) bool) map[workflow.RunStatus][]int64 {
	out := make(map[workflow.RunStatus][]int64, len(workflow.RunStatuses))
	for _, st := range workflow.RunStatuses {
		out[st] = make([]int64, len(edges)-1)
	}
	for _, s := range stamps {
		if keep != nil && !keep(s) {
			continue
		}
		i := bucketOf(edges, s.CreatedAt)
		if i < 0 {
			continue
		}
		if _, ok := out[s.Status]; !ok {
			out[s.Status] = make([]int64, len(edges)-1)
		}
		out[s.Status][i]++
	}
	return out
}

// chartStatuses is the order in which a bar stacks its statuses, bottom
// first: outcomes, then the runs still under way.
var chartStatuses = []workflow.RunStatus{workflow.StatusSucceeded, workflow.StatusFailed, workflow.StatusCompensated,
	workflow.StatusCancelled, workflow.StatusCompensating, workflow.StatusRunning, workflow.StatusPending}

// Geometry of the runs chart, in SVG user units (the viewBox; the SVG
// scales to its box).
const (
	runsChartW     = 1000
	runsChartH     = 240
	runsChartLeft  = 44 // room for the y labels
	runsChartRight = 24
	runsChartTop   = 10
	runsChartBot   = 24 // room for the x labels
)

// svgRect is a rectangle of a chart, with its class (the colour, from the
// stylesheet) and the text of its <title>.
type svgRect struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

// svgText is a label of a chart.
type svgText struct {
	X, Y   float64
	Text   string
	Anchor string // start, middle, end
	Class  string
}

// svgLine is a line of a chart (grid lines, axes, marks).
type svgLine struct {
	X1, Y1, X2, Y2 float64
	Class          string
}

// runsBucket is one bar of the runs chart: its time, its counts by status
// (in chartStatuses order) and its shapes.
type runsBucket struct {
	From, To time.Time
	Counts   []int64
	Total    int64
	Title    string
	Rects    []svgRect
}

// runsChart is the runs-over-time chart: a stacked bar per bucket.
type runsChart struct {
	W, H     int
	Window   chartWindow
	Statuses []workflow.RunStatus
	Buckets  []runsBucket
	Max      int64 // the y axis' top
	Total    int64
	// Totals by status, in Statuses order.
	Totals []int64
	Grid   []svgLine
	Labels []svgText
	// Summary is the chart's text alternative, for its <desc>.
	Summary string
}

// niceMax rounds n up to 1, 2 or 5 times a power of ten (at least 1): the
// top of a y axis.
func niceMax(n int64) int64 {
	if n <= 1 {
		return 1
	}
	p := int64(1)
	for p*10 < n {
		p *= 10
	}
	for _, m := range []int64{1, 2, 5, 10} {
		if m*p >= n {
			return m * p
		}
	}
	return 10 * p
}

// buildRunsChart lays out the counts (by status, one per bucket of edges)
// as a stacked bar chart.
func buildRunsChart(w chartWindow, edges []time.Time, counts map[workflow.RunStatus][]int64) runsChart {
	c := runsChart{W: runsChartW, H: runsChartH, Window: w, Statuses: chartStatuses,
		Totals: make([]int64, len(chartStatuses))}
	n := len(edges) - 1
	for i := range n {
		b := runsBucket{From: edges[i], To: edges[i+1], Counts: make([]int64, len(chartStatuses))}
		for j, st := range chartStatuses {
			if cs := counts[st]; i < len(cs) {
				b.Counts[j] = cs[i]
				b.Total += cs[i]
				c.Totals[j] += cs[i]
			}
		}
		c.Total += b.Total
		c.Max = max(c.Max, b.Total)
		c.Buckets = append(c.Buckets, b)
	}
	c.Max = niceMax(c.Max)
	plotW := float64(runsChartW - runsChartLeft - runsChartRight)
	plotH := float64(runsChartH - runsChartTop - runsChartBot)
	bw := plotW / float64(max(n, 1))
	y0 := float64(runsChartTop) + plotH
	for i := range c.Buckets {
		b := &c.Buckets[i]
		x := float64(runsChartLeft) + float64(i)*bw
		y := y0
		var parts []string
		for j, st := range chartStatuses {
			k := b.Counts[j]
			if k == 0 {
				continue
			}
			h := plotH * float64(k) / float64(c.Max)
			y -= h
			b.Rects = append(b.Rects, svgRect{X: round2(x + 0.5), Y: round2(y), W: round2(math.Max(bw-1, 0.5)), H: round2(h),
				Class: "s-" + string(st), Title: fmt.Sprintf("%d %s", k, st)})
			parts = append(parts, fmt.Sprintf("%d %s", k, st))
		}
		span := b.From.Format("15:04") + "–" + b.To.Format("15:04") + " UTC"
		if len(parts) == 0 {
			b.Title = span + ": no runs"
		} else {
			b.Title = span + ": " + strings.Join(parts, ", ")
		}
	}
	// Grid lines at a round step with their counts, and a time label
	// every TickEvery buckets.
	step := yStep(c.Max)
	for v := int64(0); v <= c.Max; v += step {
		y := round2(y0 - plotH*float64(v)/float64(c.Max))
		c.Grid = append(c.Grid, svgLine{X1: runsChartLeft, Y1: y, X2: runsChartW - runsChartRight, Y2: y, Class: "grid"})
		c.Labels = append(c.Labels, svgText{X: runsChartLeft - 6, Y: y + 4, Text: strconv.FormatInt(v, 10), Anchor: "end",
			Class: "axis"})
	}
	every := max(w.TickEvery, 1)
	for i := 0; i <= n; i += every {
		x := round2(float64(runsChartLeft) + float64(i)*bw)
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case n:
			anchor = "end"
		}
		c.Labels = append(c.Labels, svgText{X: x, Y: runsChartH - 6, Text: edges[i].Format("15:04"), Anchor: anchor, Class: "axis"})
		c.Grid = append(c.Grid, svgLine{X1: x, Y1: y0, X2: x, Y2: y0 + 4, Class: "tick"})
	}
	var parts []string
	for j, st := range chartStatuses {
		if c.Totals[j] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.Totals[j], st))
		}
	}
	c.Summary = fmt.Sprintf("%d runs created in the %s", c.Total, w.Label)
	if len(parts) > 0 {
		c.Summary += ": " + strings.Join(parts, ", ")
	}
	c.Summary += "."
	return c
}

// yStep is the step of the grid lines of an axis from 0 to top (a
// niceMax): the smallest of 1, 2, 5, 10, 20, ... that makes at most five
// steps.
func yStep(top int64) int64 {
	for s := int64(1); ; s *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if top/(m*s) <= 5 {
				return m * s
			}
		}
	}
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

// stepStat is the retries and failures of one step of one workflow in a
// window.
type stepStat struct {
	Workflow, Step string
	Retries        int64 // retries scheduled (retry_scheduled)
	Failures       int64 // runs the step failed (step_failed)
}

// maxStepRows bounds the steps the retries chart shows (the most retried
// and failed first).
const maxStepRows = 15

// stepStats counts the retries and failures of each workflow's steps in
// notifications, keeping those keep accepts (nil: all), most first.
func stepStats(ns []workflow.Notification, keep func(workflow.Notification) bool) []stepStat {
	type key struct{ wf, step string }
	m := map[key]*stepStat{}
	for _, n := range ns {
		if n.Type != "retry_scheduled" && n.Type != "step_failed" {
			continue
		}
		if keep != nil && !keep(n) {
			continue
		}
		k := key{n.Workflow, n.Details["step"]}
		s := m[k]
		if s == nil {
			s = &stepStat{Workflow: k.wf, Step: k.step}
			m[k] = s
		}
		if n.Type == "retry_scheduled" {
			s.Retries++
		} else {
			s.Failures++
		}
	}
	out := make([]stepStat, 0, len(m))
	for _, s := range m {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b stepStat) int {
		if c := cmp.Compare(b.Retries+b.Failures, a.Retries+a.Failures); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Failures, a.Failures); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(a.Workflow, b.Workflow), strings.Compare(a.Step, b.Step))
	})
	return out
}

// Geometry of the steps chart.
const (
	stepsChartW     = 1000
	stepsChartLabel = 260 // room for "workflow · step"
	stepsChartRow   = 22
	stepsChartTop   = 6
)

// stepsRow is one row of the steps chart.
type stepsRow struct {
	stepStat
	Label string // "workflow · step", cut to fit
	Y     float64
	Rects []svgRect
	Value svgText
}

// stepsChart is the chart of retries and failures per workflow and step:
// a horizontal bar per step, retries then failures.
type stepsChart struct {
	W, H int
	// LabelX is where the rows' labels end.
	LabelX float64
	Rows   []stepsRow
	More   int // steps left out (fewer retries and failures)
	Max    int64
	Grid   []svgLine
	Labels []svgText
	// Summary is the chart's text alternative, for its <desc>.
	Summary string
}

// cut shortens s to n runes, with an ellipsis.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// buildStepsChart lays out stats (sorted, most first) as horizontal bars.
func buildStepsChart(stats []stepStat) stepsChart {
	c := stepsChart{W: stepsChartW, LabelX: stepsChartLabel - 8}
	if len(stats) > maxStepRows {
		c.More = len(stats) - maxStepRows
		stats = stats[:maxStepRows]
	}
	for _, s := range stats {
		c.Max = max(c.Max, s.Retries+s.Failures)
	}
	c.Max = niceMax(c.Max)
	c.H = stepsChartTop*2 + stepsChartRow*len(stats) + 18
	plotW := float64(stepsChartW - stepsChartLabel - 40)
	scale := plotW / float64(c.Max)
	var parts []string
	for i, s := range stats {
		y := float64(stepsChartTop + i*stepsChartRow)
		row := stepsRow{stepStat: s, Label: cut(s.Workflow+" · "+s.Step, 34), Y: y}
		x := float64(stepsChartLabel)
		if s.Retries > 0 {
			w := float64(s.Retries) * scale
			row.Rects = append(row.Rects, svgRect{X: round2(x), Y: y + 4, W: round2(w), H: stepsChartRow - 8, Class: "k-retries",
				Title: fmt.Sprintf("%s · %s: %d %s", s.Workflow, s.Step, s.Retries, plural(s.Retries, "retry", "retries"))})
			x += w
		}
		if s.Failures > 0 {
			w := float64(s.Failures) * scale
			row.Rects = append(row.Rects, svgRect{X: round2(x), Y: y + 4, W: round2(w), H: stepsChartRow - 8, Class: "k-failures",
				Title: fmt.Sprintf("%s · %s: %d %s", s.Workflow, s.Step, s.Failures, plural(s.Failures, "failed run", "failed runs"))})
			x += w
		}
		row.Value = svgText{X: round2(x + 5), Y: y + stepsChartRow/2 + 4, Text: fmt.Sprintf("%d / %d", s.Retries, s.Failures),
			Anchor: "start", Class: "value"}
		c.Rows = append(c.Rows, row)
		parts = append(parts, fmt.Sprintf("%s %s: %d %s, %d %s", s.Workflow, s.Step, s.Retries,
			plural(s.Retries, "retry", "retries"), s.Failures, plural(s.Failures, "failure", "failures")))
	}
	bottom := float64(stepsChartTop + len(stats)*stepsChartRow)
	step := yStep(c.Max)
	for v := int64(0); v <= c.Max; v += step {
		x := round2(stepsChartLabel + float64(v)*scale)
		c.Grid = append(c.Grid, svgLine{X1: x, Y1: stepsChartTop, X2: x, Y2: bottom, Class: "grid"})
		c.Labels = append(c.Labels, svgText{X: x, Y: bottom + 14, Text: strconv.FormatInt(v, 10), Anchor: "middle", Class: "axis"})
	}
	if len(parts) == 0 {
		c.Summary = "No retries and no failures."
	} else {
		c.Summary = strings.Join(parts, "; ") + "."
	}
	return c
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// humanDuration writes d briefly, to two units: "850ms", "42s", "3m 04s",
// "2h 05m", "3d 04h" ("0s" for none or less).
func humanDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int64(d/time.Minute), int64(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %02dm", int64(d/time.Hour), int64(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd %02dh", int64(d/(24*time.Hour)), int64(d%(24*time.Hour)/time.Hour))
}
