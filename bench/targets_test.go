package bench

import (
	"fmt"
	"io"
	"sync"
	"testing"
)

// The targets of the lean step path (issue 26, docs/performance.md): each
// benchmark that measures one of them reports it through reportTarget, and
// TestMain prints them all in one table when the run ends, each figure next
// to its target, so that `make bench` answers "where does each stand" on
// one screen. The metric names stay the benchmarks' own.

// target is one figure and its goal.
type target struct {
	metric string  // the benchmark's metric name
	goal   float64 // the target
	// atMost: the figure must not exceed goal; else it must reach it.
	atMost bool
	// bench is the benchmark whose figure counts, when others report the
	// same metric for other workloads ("": any).
	bench string
	value float64
	have  bool
}

var (
	targetsMu sync.Mutex
	targets   = []*target{
		{metric: "instr/strict-step", goal: 350_000, atMost: true},
		{metric: "instr/inline-step", goal: 175_000, atMost: true},
		{metric: "instr/create", goal: 120_000, atMost: true},
		{metric: "ratio_strict", goal: 0.7, bench: "BenchmarkStepThroughput"},
		{metric: "ratio_inline", goal: 1.5, bench: "BenchmarkStepThroughput"},
		{metric: "bytes/run_strict", goal: 1000, atMost: true, bench: "BenchmarkStepThroughput"},
		{metric: "p50_µs_strict", goal: 5000, atMost: true},
		{metric: "p99_µs_strict", goal: 20_000, atMost: true},
		{metric: "p50_µs_inline", goal: 3000, atMost: true},
		{metric: "p99_µs_inline", goal: 10_000, atMost: true},
		{metric: "p99_ms_late_retry", goal: 25, atMost: true},
		{metric: "p99_ms_late_sleep_fired", goal: 25, atMost: true},
		{metric: "p99_ms_late_sleep", goal: 25, atMost: true},
		{metric: "ms_kill_to_resume", goal: 5000, atMost: true}, // p50 (BenchmarkKillResume)
	}
)

// reportTarget reports value as metric, as b.ReportMetric does, and keeps
// it for the table of targets when metric has one.
func reportTarget(b *testing.B, value float64, metric string) {
	b.ReportMetric(value, metric)
	targetsMu.Lock()
	defer targetsMu.Unlock()
	for _, t := range targets {
		if t.metric == metric && (t.bench == "" || t.bench == b.Name()) {
			t.value, t.have = value, true
		}
	}
}

// goalOf returns the target of metric, and whether it has one.
func goalOf(metric string) (float64, bool) {
	for _, t := range targets {
		if t.metric == metric {
			return t.goal, true
		}
	}
	return 0, false
}

// printTargets writes the table of the targets measured in this run (none:
// nothing).
func printTargets(w io.Writer) {
	targetsMu.Lock()
	defer targetsMu.Unlock()
	header := false
	for _, t := range targets {
		if !t.have {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\nTargets of the lean step path (docs/performance.md), this run (load %s):\n", loadAverage())
			header = true
		}
		cmp, met := "≥", t.value >= t.goal
		if t.atMost {
			cmp, met = "≤", t.value <= t.goal
		}
		verdict := "met"
		if !met {
			verdict = "NOT MET"
		}
		fmt.Fprintf(w, "  %-26s %14.3f   target %s %-10g %s\n", t.metric, t.value, cmp, t.goal, verdict)
	}
}
