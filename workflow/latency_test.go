package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// deliverTask delivers the task id as a processor would: its payload and
// its headers, read from asynq's record.
func (r *rig) deliverTask(id string) error {
	r.t.Helper()
	info, err := r.ins.GetTaskInfo(r.queue, id)
	if err != nil {
		r.t.Fatalf("task %s: %v", id, err)
	}
	return r.eng.ProcessTask(ctxb, asynq.NewTaskWithHeaders(tasks.TypeStep, info.Payload, info.Headers))
}

// TestLatencyRecorded: step run times and waits for a worker, measured on
// the engine's clock, are counted by the engine, written to Redis by a
// flush (and not before), and read back as percentiles per workflow and
// step; the waits start at the due time the tasks carry (the run's start,
// the checkpoint of the step before, a retry's backoff's end).
func TestLatencyRecorded(t *testing.T) {
	t.Parallel()
	var r *rig
	type in struct {
		MS   int  `json:"ms"`
		Fail bool `json:"fail"`
	}
	failed := false
	def := workflow.Definition{Name: "lat", Policy: fastPolicy(), Steps: []workflow.Step{
		{Name: "a", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
			var x in
			if err := json.Unmarshal(sc.Input, &x); err != nil {
				return nil, workflow.Permanent(err)
			}
			r.clock.Advance(time.Duration(x.MS) * time.Millisecond)
			return nil, nil
		}},
		{Name: "b", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
			r.clock.Advance(20 * time.Millisecond)
			var x in
			_ = json.Unmarshal(sc.Input, &x)
			if x.Fail && !failed {
				failed = true
				return nil, errors.New("once")
			}
			return nil, nil
		}},
	}}
	r = newRig(t, def)
	const runs = 10
	for i := range runs {
		x := in{MS: 100}
		if i == runs-1 {
			x.MS = 5000
		}
		x.Fail = i == 0
		run, err := r.client.Start(ctxb, "lat", x, nil)
		if err != nil {
			t.Fatal(err)
		}
		first := tasks.ID(run.ID, 0, 1, 0)
		if info, err := r.ins.GetTaskInfo(r.queue, first); err != nil ||
			info.Headers[tasks.HeaderDue] != strconv.FormatInt(r.clock.Now().UnixMilli(), 10) {
			t.Fatalf("first task's headers %v (%v), want %s: the run's start", info.Headers, err, tasks.HeaderDue)
		}
		r.clock.Advance(1500 * time.Millisecond) // waiting for a worker
		if err := r.deliverTask(first); err != nil {
			t.Fatal(err)
		}
		r.clock.Advance(40 * time.Millisecond)
		if err := r.deliverTask(tasks.ID(run.ID, 1, 1, 0)); err != nil && !x.Fail {
			t.Fatal(err)
		}
		if x.Fail {
			// The retry is due after its backoff (200ms); it waits 30ms more.
			r.clock.Advance(230 * time.Millisecond)
			if err := r.deliverTask(tasks.ID(run.ID, 1, 2, 0)); err != nil {
				t.Fatal(err)
			}
		}
		if got := r.get(run.ID); got.Status != workflow.StatusSucceeded {
			t.Fatalf("run %d: %s", i, got.Status)
		}
	}

	rep, err := r.client.Latency(ctxb, time.Hour, "")
	if err != nil || len(rep.Series) != 0 {
		t.Fatalf("before a flush: %+v %v, want nothing", rep, err)
	}
	if err := r.eng.FlushLatencies(ctxb); err != nil {
		t.Fatal(err)
	}
	rep, err = r.client.Latency(ctxb, time.Hour, "lat")
	if err != nil {
		t.Fatal(err)
	}
	high := func(d time.Duration) time.Duration { return retrystate.LatencyBucketHigh(retrystate.LatencyBucket(d)) }
	stats := func(n int64, p50, p90, p99 time.Duration) workflow.LatencyStats {
		return workflow.LatencyStats{Count: n, P50: high(p50), P90: high(p90), P99: high(p99)}
	}
	want := []workflow.LatencySeries{
		{Workflow: "lat", Step: "a",
			Duration: stats(runs, 100*time.Millisecond, 100*time.Millisecond, 5*time.Second),
			Wait:     stats(runs, 1500*time.Millisecond, 1500*time.Millisecond, 1500*time.Millisecond)},
		{Workflow: "lat", Step: "b",
			Duration: stats(runs+1, 20*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond),
			// 10 waits of 40ms after a's checkpoint, the retry's 30ms.
			Wait: stats(runs+1, 40*time.Millisecond, 40*time.Millisecond, 40*time.Millisecond)},
	}
	if len(rep.Series) != len(want) {
		t.Fatalf("series %+v, want %+v", rep.Series, want)
	}
	for i := range want {
		if rep.Series[i] != want[i] {
			t.Errorf("series %d: %+v, want %+v", i, rep.Series[i], want[i])
		}
	}
	// The retry's wait is its own bucket: 30ms, not 40.
	if high(30*time.Millisecond) == high(40*time.Millisecond) {
		t.Fatal("30ms and 40ms share a bucket: the test cannot tell the retry's wait")
	}
	// A second flush with nothing new adds nothing.
	if err := r.eng.FlushLatencies(ctxb); err != nil {
		t.Fatal(err)
	}
	if again, err := r.client.Latency(ctxb, time.Hour, "lat"); err != nil || again.Series[0] != want[0] {
		t.Errorf("after an empty flush: %+v %v", again, err)
	}
}

// TestLatencyWindows: a window reads the hours that overlap it, the
// current one included; the report says from when; invalid windows and
// workflow names are refused.
func TestLatencyWindows(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	now := r.clock.Now()
	h := retrystate.LatencyHour(now)
	add := func(hoursAgo int64, step string) {
		err := r.store.LatencyAdd(ctxb, []retrystate.LatencyCount{{Hour: h - hoursAgo, Kind: retrystate.LatencyDuration,
			Workflow: "w", Step: step, Bucket: 20, Count: 1}})
		if err != nil {
			t.Fatal(err)
		}
	}
	add(0, "now")
	add(1, "hour_ago")
	add(3, "hours_ago")
	add(30, "day_ago")
	add(24*7+2, "week_ago")
	for _, c := range []struct {
		window time.Duration
		name   string
		steps  string
	}{
		{time.Hour, "1h", "hour_ago now"},
		{90 * time.Minute, "1h30m0s", "hour_ago now"},
		{24 * time.Hour, "24h", "hour_ago hours_ago now"},
		{7 * 24 * time.Hour, "7d", "day_ago hour_ago hours_ago now"},
	} {
		rep, err := r.client.Latency(ctxb, c.window, "w")
		if err != nil {
			t.Fatal(err)
		}
		var steps []string
		for _, s := range rep.Series {
			steps = append(steps, s.Step)
		}
		from := time.Unix(retrystate.LatencyHour(now.Add(-c.window))*3600, 0)
		if got := strconv.Quote(strings.Join(steps, " ")); got != strconv.Quote(c.steps) || !rep.From.Equal(from) ||
			!rep.To.Equal(now) || rep.WindowName != c.name {
			t.Errorf("window %s (%q): steps %s from %s to %s, want %q (%q) from %s to %s", c.window, rep.WindowName, got,
				rep.From, rep.To, c.name, c.steps, from, now)
		}
	}
	for _, c := range []struct {
		window time.Duration
		wf     string
	}{{0, ""}, {-time.Hour, ""}, {8 * 24 * time.Hour, ""}, {time.Hour, "<script>"}, {time.Hour, "a|b"}} {
		if _, err := r.client.Latency(ctxb, c.window, c.wf); !errors.Is(err, workflow.ErrInvalidInput) {
			t.Errorf("window %s workflow %q: %v, want ErrInvalidInput", c.window, c.wf, err)
		}
	}
}

// TestWorkerFlushesLatenciesOnStop: a worker that stops writes what it
// counted since its last flush (here its only one: the interval is an
// hour), after its last step.
func TestWorkerFlushesLatenciesOnStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w, err := workflow.NewWorker(e.rdb, workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{Queue: e.queue,
		Logger: e.log, LatencyFlushInterval: time.Hour}, ShutdownTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Register(workflow.Definition{Name: "lat", Steps: []workflow.Step{{Name: "a", Run: noop}, {Name: "b", Run: noop}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxb)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(cancel)
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("worker stopped: %v", err)
	}
	run, err := e.client.Start(ctxb, "lat", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.wait(run.ID, 30*time.Second); got.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s", got.Status)
	}
	if rep, err := e.client.Latency(ctxb, time.Hour, "lat"); err != nil || len(rep.Series) != 0 {
		t.Fatalf("before the worker stopped: %+v %v, want nothing flushed", rep, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rep, err := e.client.Latency(ctxb, time.Hour, "lat")
	if err != nil || len(rep.Series) != 2 {
		t.Fatalf("after the worker stopped: %+v %v, want a and b", rep, err)
	}
	for _, s := range rep.Series {
		if s.Duration.Count != 1 || s.Wait.Count != 1 {
			t.Errorf("%s: %+v, want one run time and one wait", s.Step, s)
		}
	}
}
