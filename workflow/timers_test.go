package workflow_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// TestTimersWithoutAsynqForwarder: a retry, a snooze, a sleep and a
// circuit breaker's cooldown are moved to the queue by the worker's
// promoter, at their millisecond, with asynq's own forwarder (whole seconds)
// kept out of the way, and none of them starts before its due time. (The
// breaker's deferred attempt is enqueued through asynq's client, not a
// script: tasks.AddTimer indexes it.)
func TestTimersWithoutAsynqForwarder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var failed, snoozed atomic.Bool
	def := workflow.Definition{Name: "timers", Steps: []workflow.Step{
		{Name: "flaky", Run: func(context.Context, *workflow.StepContext) (any, error) {
			if !failed.Swap(true) {
				return nil, workflow.RetryAfter(errors.New("429"), 150*time.Millisecond)
			}
			return nil, nil
		}},
		{Name: "nap", Sleep: &workflow.Sleep{For: 120 * time.Millisecond}},
		{Name: "poll", Run: func(context.Context, *workflow.StepContext) (any, error) {
			if !snoozed.Swap(true) {
				return nil, workflow.Snooze(130 * time.Millisecond)
			}
			return nil, nil
		}},
	}}
	var tripped atomic.Bool
	breaker := workflow.Definition{Name: "tripped", Policy: workflow.Policy{MaxAttempts: 3,
		InitialInterval: 10 * time.Millisecond, MaxInterval: 10 * time.Millisecond, Jitter: workflow.JitterNone,
		CircuitBreaker: &workflow.CircuitBreaker{Name: "timers-dep", FailureThreshold: 1, Window: time.Minute,
			Cooldown: 200 * time.Millisecond}},
		Steps: []workflow.Step{{Name: "call", Run: func(context.Context, *workflow.StepContext) (any, error) {
			if !tripped.Swap(true) {
				return nil, errors.New("503") // opens the breaker
			}
			return nil, nil
		}}}}
	// asynq's forwarder would first look an hour from now.
	e.startWorker(workflow.WorkerConfig{DelayedTaskCheckInterval: time.Hour}, def, breaker)
	// The breaker: its first failure opens it; the retry, due 10ms later,
	// is deferred until the cooldown ends, then probes and succeeds.
	b := e.wait(mustStart(t, e.client, "tripped", nil).ID, time.Minute)
	if b.Status != workflow.StatusSucceeded {
		t.Fatalf("the breaker's run ended %s: %s", b.Status, b.FailureReason)
	}
	// untilOf reads an entry's until, which Client.Events gives in RFC 3339
	// (core.EventFromEntry), as it gives due_at (Event.DueAt).
	untilOf := func(ev workflow.Event) time.Time {
		t.Helper()
		ts, err := time.Parse(time.RFC3339Nano, ev.Details["until"])
		if err != nil {
			t.Fatalf("%s entry: until = %q", ev.Type, ev.Details["until"])
		}
		return ts
	}
	var until time.Time
	probed := false
	for _, ev := range e.events(b.ID) {
		switch {
		case ev.Type == "attempt_deferred":
			until = untilOf(ev)
		case ev.Type == workflow.EventAttemptStarted && ev.Attempt == 2:
			probed = true
			if until.IsZero() || ev.At.Before(until) {
				t.Errorf("the probe started at %s; the breaker deferred it until %s", ev.At, until)
			}
		}
	}
	if !probed {
		t.Errorf("no second attempt in the journal: %+v", e.events(b.ID))
	}

	run := e.wait(mustStart(t, e.client, "timers", nil).ID, time.Minute)
	if run.Status != workflow.StatusSucceeded {
		t.Fatalf("run ended %s: %s", run.Status, run.FailureReason)
	}
	var retryDue, napUntil, snoozeDue time.Time
	checked := 0
	for _, ev := range e.events(run.ID) {
		switch {
		case ev.Type == workflow.EventRetryScheduled:
			var ok bool
			if retryDue, ok = ev.DueAt(); !ok {
				t.Fatalf("retry_scheduled entry without due_at: %+v", ev)
			}
		case ev.Type == workflow.EventTimerFired:
			napUntil = untilOf(ev)
			if ev.At.Before(napUntil) {
				t.Errorf("the sleep's timer fired at %s, before %s", ev.At, napUntil)
			}
			checked++
		case ev.Type == workflow.EventStepSnoozed:
			snoozeDue = ev.At.Add(delayOf(t, ev))
		case ev.Type == workflow.EventAttemptStarted && ev.Step == "flaky" && ev.Attempt == 2:
			if retryDue.IsZero() || ev.At.Before(retryDue) {
				t.Errorf("the retry started at %s; due at %s", ev.At, retryDue)
			}
			checked++
		case ev.Type == workflow.EventAttemptStarted && ev.Step == "poll" && !snoozeDue.IsZero():
			if ev.At.Before(snoozeDue) {
				t.Errorf("the snoozed step started at %s; due at %s", ev.At, snoozeDue)
			}
			checked++
		}
	}
	if checked != 3 {
		t.Errorf("checked %d of the 3 timers in the journal: %+v", checked, e.events(run.ID))
	}
}
