package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// BenchmarkTimerLateness measures how late a retry and a sleep start after
// their due time on an idle worker (default configuration, one run at a
// time): for a step that fails once with workflow.RetryAfter(150ms), from
// the retry's due time (its retry_scheduled entry's due_at) to its second
// attempt's start (attempt_started); for a 150ms sleep step, from the
// timer's due time (timer_fired's until) to the timer's firing (the
// timer_fired entry) and to the next step's start. All times are the
// worker's journal entries, on one clock. It prints p50, p99 and max over
// CAIRN_BENCH_TIMER_RUNS runs each (default 20) and reports
// p99_ms_late_retry, p99_ms_late_sleep_fired and p99_ms_late_sleep (the
// next step's start).
func BenchmarkTimerLateness(b *testing.B) {
	runs := envInt(b, "CAIRN_BENCH_TIMER_RUNS", 20)
	const wait = 150 * time.Millisecond
	srv := redistest.Start(b, nil)
	rdb := srv.Client(b)
	queue := newQueue("timers")
	hook := finishHook{done: make(chan string, 1)}
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	failOnce := func(_ context.Context, sc *workflow.StepContext) (any, error) {
		if sc.Attempt == 1 {
			return nil, workflow.RetryAfter(errors.New("rate limited"), wait)
		}
		return nil, nil
	}
	testkit.StartWorker(b, rdb, workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{
		Queue: queue, Logger: slog.New(slog.DiscardHandler), Observer: hook}},
		workflow.Definition{Name: "retry", Steps: []workflow.Step{{Name: "a", Run: failOnce}}},
		workflow.Definition{Name: "sleep", Steps: []workflow.Step{
			{Name: "nap", Sleep: &workflow.Sleep{For: wait}}, {Name: "b", Run: noop}}})
	ctx := context.Background()
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: slog.New(slog.DiscardHandler)})

	// lateness reads a finished run's journal: how long after the due time
	// the attempt that was waiting for it started and, for a sleep, how
	// long after it the timer fired (its timer_fired entry was written).
	lateness := func(id, name string) (started, fired time.Duration, err error) {
		evs, err := client.Events(ctx, id)
		if err != nil {
			return 0, 0, err
		}
		var due, start, firedAt time.Time
		for _, ev := range evs {
			switch {
			case name == "retry" && ev.Type == workflow.EventRetryScheduled:
				due, err = msTime(ev.Details["due_at"])
			case name == "retry" && ev.Type == workflow.EventAttemptStarted && ev.Attempt == 2:
				start = ev.At
			case name == "sleep" && ev.Type == workflow.EventTimerFired:
				due, err = msTime(ev.Details["until"])
				firedAt = ev.At
			case name == "sleep" && ev.Type == workflow.EventAttemptStarted && ev.Step == "b":
				start = ev.At
			}
			if err != nil {
				return 0, 0, fmt.Errorf("%s entry of run %s: %w", ev.Type, id, err)
			}
		}
		if due.IsZero() || start.IsZero() {
			return 0, 0, fmt.Errorf("run %s: no due time or no start in its journal", id)
		}
		return start.Sub(due), firedAt.Sub(due), nil
	}

	fmt.Printf("\nBenchmarkTimerLateness: start after the due time of a %s retry and a %s sleep, idle worker, %d runs each (load %s)\n",
		wait, wait, runs, loadAverage())
	report := func(label, metric string, late []time.Duration) {
		slices.Sort(late)
		p50, p99 := late[len(late)/2], late[min(len(late)-1, len(late)*99/100)]
		fmt.Printf("  %-12s late p50 %8s  p99 %8s  max %8s  (early: %s)\n", label, p50, p99, late[len(late)-1],
			min(late[0], 0))
		reportTarget(b, float64(p99.Microseconds())/1000, metric)
	}
	for _, name := range []string{"retry", "sleep"} {
		late := make([]time.Duration, 0, runs)
		fired := make([]time.Duration, 0, runs)
		for i := range runs + 2 { // the first 2 warm up
			run, err := client.Start(ctx, name, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			select {
			case <-hook.done:
			case <-time.After(30 * time.Second):
				b.Fatalf("%s: a run did not finish in 30s", name)
			}
			d, f, err := lateness(run.ID, name)
			if err != nil {
				b.Fatal(err)
			}
			if i >= 2 {
				late = append(late, d)
				fired = append(fired, f)
			}
		}
		if name == "sleep" {
			// The timer itself; then the next step, whose task waits for an
			// idle worker's next fetch as any step's successor does.
			report("sleep fired", "p99_ms_late_sleep_fired", fired)
			report("sleep, next", "p99_ms_late_sleep", late)
			continue
		}
		report(name, "p99_ms_late_"+name, late)
	}
	b.ReportMetric(0, "ns/op")
}

// msTime reads a time of a journal entry's details: RFC 3339, as
// Client.Events gives it, or Unix milliseconds, as the journal stores it.
func msTime(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	return time.Parse(time.RFC3339Nano, s)
}
