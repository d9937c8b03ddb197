package workflow_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairnhq/cairn/workflow"
)

// recorder is a TracerProvider that keeps the spans it ends.
type recorder struct {
	rec *tracetest.SpanRecorder
	tp  *sdktrace.TracerProvider
}

func newRecorder(t *testing.T) *recorder {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &recorder{rec: rec, tp: tp}
}

// named returns the ended spans called name.
func (r *recorder) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, k string) attribute.Value {
	for _, a := range s.Attributes() {
		if string(a.Key) == k {
			return a.Value
		}
	}
	return attribute.Value{}
}

// TestTracing: a run started in a caller's trace, whose step fails on one
// worker and is retried on another, is one trace: Start's span a child of
// the caller's, every attempt's span (on either worker) a child of Start's,
// each ended with its outcome (the failure an error with a retry_scheduled
// event), the step body running in its attempt's span, and the run's span
// recorded by the worker that ended it, from the run's creation.
func TestTracing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	caller, workerA, workerB := newRecorder(t), newRecorder(t), newRecorder(t)
	client := workflow.NewClient(e.rdb, workflow.ClientConfig{Queue: e.queue, Logger: e.log, TracerProvider: caller.tp})

	var mu sync.Mutex
	var bodySpans []trace.SpanContext // the span in the step body's context, per attempt of c
	def := func(failB bool) workflow.Definition {
		return workflow.Definition{Name: "traced",
			Policy: workflow.Policy{MaxAttempts: 5, InitialInterval: time.Second, BackoffCoefficient: 1, Jitter: workflow.JitterNone},
			Steps: []workflow.Step{
				{Name: "a", Run: func(context.Context, *workflow.StepContext) (any, error) { return 1, nil }},
				{Name: "b", Run: func(context.Context, *workflow.StepContext) (any, error) {
					if failB {
						return nil, workflow.Transient(errors.New("upstream 503"))
					}
					return 2, nil
				}},
				{Name: "c", Run: func(ctx context.Context, _ *workflow.StepContext) (any, error) {
					mu.Lock()
					bodySpans = append(bodySpans, trace.SpanContextFromContext(ctx))
					mu.Unlock()
					return 3, nil
				}},
			}}
	}
	stopA := e.startStoppableWorker(workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{TracerProvider: workerA.tp}}, def(true))

	ctx, parent := caller.tp.Tracer("test").Start(context.Background(), "caller")
	run, err := client.Start(ctx, "traced", map[string]int{"n": 1}, nil)
	parent.End()
	if err != nil {
		t.Fatal(err)
	}
	// Worker A fails b's first attempt; worker B runs the retry.
	e.eventually(15*time.Second, "b's first attempt to fail on worker A", func() bool {
		r := e.get(run.ID)
		return r.Step("b") != nil && r.Step("b").RetryState == workflow.RetryScheduled
	})
	stopA()
	e.startWorker(workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{TracerProvider: workerB.tp}}, def(false))
	if r := e.wait(run.ID, 20*time.Second); r.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s", r.Status)
	}
	e.eventually(10*time.Second, "the run's span", func() bool { return len(workerB.named("cairn.run traced")) == 1 })

	tid := parent.SpanContext().TraceID()
	starts := caller.named("cairn.start traced")
	if len(starts) != 1 {
		t.Fatalf("%d start spans, want 1", len(starts))
	}
	start := starts[0]
	if start.Parent().SpanID() != parent.SpanContext().SpanID() || start.SpanContext().TraceID() != tid ||
		start.SpanKind() != trace.SpanKindProducer || attr(start, "cairn.run_id").AsString() != run.ID {
		t.Errorf("start span: parent %v kind %v attrs %v", start.Parent(), start.SpanKind(), start.Attributes())
	}

	// Every attempt, on either worker, is a child of Start's span.
	attempts := map[string][]sdktrace.ReadOnlySpan{} // by worker and step
	for w, rec := range map[string]*recorder{"A": workerA, "B": workerB} {
		for _, step := range []string{"a", "b", "c"} {
			for _, s := range rec.named("cairn.attempt traced." + step) {
				attempts[w+step] = append(attempts[w+step], s)
				if s.SpanContext().TraceID() != tid || s.Parent().SpanID() != start.SpanContext().SpanID() ||
					!s.Parent().IsRemote() || s.SpanKind() != trace.SpanKindConsumer {
					t.Errorf("worker %s, attempt of %s: trace %v parent %v kind %v, want trace %v parent %v (remote)",
						w, step, s.SpanContext().TraceID(), s.Parent(), s.SpanKind(), tid, start.SpanContext().SpanID())
				}
				if attr(s, "cairn.run_id").AsString() != run.ID || attr(s, "cairn.step").AsString() != step {
					t.Errorf("worker %s, attempt of %s: attributes %v", w, step, s.Attributes())
				}
			}
		}
	}
	if len(attempts["Aa"]) != 1 || len(attempts["Ab"]) == 0 || len(attempts["Bb"]) != 1 || len(attempts["Bc"]) != 1 ||
		len(attempts["Ba"]) != 0 || len(attempts["Ac"]) != 0 {
		t.Fatalf("attempt spans per worker and step: A a %d b %d c %d, B a %d b %d c %d", len(attempts["Aa"]),
			len(attempts["Ab"]), len(attempts["Ac"]), len(attempts["Ba"]), len(attempts["Bb"]), len(attempts["Bc"]))
	}
	failed := attempts["Ab"][0]
	if failed.Status().Code != codes.Error || attr(failed, "cairn.outcome").AsString() != string(workflow.OutcomeFailedTransient) ||
		attr(failed, "cairn.error_class").AsString() != workflow.ClassTransient || attr(failed, "cairn.attempt").AsInt64() != 1 ||
		!slices.ContainsFunc(failed.Events(), func(ev sdktrace.Event) bool { return ev.Name == "retry_scheduled" }) {
		t.Errorf("b's failed attempt: status %v attributes %v events %v", failed.Status(), failed.Attributes(), failed.Events())
	}
	retried := attempts["Bb"][0]
	if retried.Status().Code == codes.Error || attr(retried, "cairn.outcome").AsString() != string(workflow.OutcomeSucceeded) ||
		attr(retried, "cairn.attempt").AsInt64() < 2 {
		t.Errorf("b's retry on worker B: status %v attributes %v", retried.Status(), retried.Attributes())
	}
	// c's body ran in its attempt's span.
	mu.Lock()
	body := slices.Clone(bodySpans)
	mu.Unlock()
	if len(body) != 1 || body[0].SpanID() != attempts["Bc"][0].SpanContext().SpanID() {
		t.Errorf("the step body's span %v, want its attempt's %v", body, attempts["Bc"][0].SpanContext())
	}

	// The run's span: from the run's creation to its end, in the same trace.
	rs := workerB.named("cairn.run traced")[0]
	if rs.SpanContext().TraceID() != tid || rs.Parent().SpanID() != start.SpanContext().SpanID() ||
		attr(rs, "cairn.status").AsString() != string(workflow.StatusSucceeded) ||
		rs.StartTime().After(start.EndTime()) || rs.EndTime().Before(retried.EndTime()) {
		t.Errorf("run span: parent %v attrs %v from %v to %v (start span ended %v, last b attempt ended %v)",
			rs.Parent(), rs.Attributes(), rs.StartTime(), rs.EndTime(), start.EndTime(), retried.EndTime())
	}
	if n := len(workerA.named("cairn.run traced")); n != 0 {
		t.Errorf("worker A, which did not end the run, recorded %d run spans", n)
	}
}

// TestTracingWithoutClientTracer: a client with no TracerProvider stores
// the span context of Start's ctx as it is, so the attempts join the
// caller's span directly; a run started with no span in its context has no
// trace, and a worker that traces records its attempts as roots.
func TestTracingWithoutClientTracer(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // e.client has no TracerProvider
	caller, worker := newRecorder(t), newRecorder(t)
	e.startWorker(workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{TracerProvider: worker.tp}},
		workflow.Definition{Name: "plain", Steps: []workflow.Step{
			{Name: "only", Run: func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }}}})

	ctx, parent := caller.tp.Tracer("test").Start(context.Background(), "caller")
	joined, err := e.client.Start(ctx, "plain", nil, nil)
	parent.End()
	if err != nil {
		t.Fatal(err)
	}
	alone, err := e.client.Start(context.Background(), "plain", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{joined.ID, alone.ID} {
		if r := e.wait(id, 20*time.Second); r.Status != workflow.StatusSucceeded {
			t.Fatalf("run %s: %s", id, r.Status)
		}
	}
	e.eventually(10*time.Second, "both attempts' spans", func() bool { return len(worker.named("cairn.attempt plain.only")) == 2 })
	if n := len(caller.named("cairn.start plain")); n != 0 {
		t.Errorf("a client without a TracerProvider recorded %d start spans", n)
	}
	for _, s := range worker.named("cairn.attempt plain.only") {
		switch attr(s, "cairn.run_id").AsString() {
		case joined.ID:
			if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
				t.Errorf("attempt of the run started in a span: parent %v, want the caller's %v", s.Parent(), parent.SpanContext())
			}
		case alone.ID:
			if s.Parent().IsValid() {
				t.Errorf("attempt of the run started with no span: parent %v, want none", s.Parent())
			}
		}
	}
	// A run with no trace records no run span (there is no trace to join).
	e.eventually(10*time.Second, "the joined run's span", func() bool { return len(worker.named("cairn.run plain")) == 1 })
	if rs := worker.named("cairn.run plain"); attr(rs[0], "cairn.run_id").AsString() != joined.ID {
		t.Errorf("run span of %s, want %s's", attr(rs[0], "cairn.run_id").AsString(), joined.ID)
	}
}

// TestTracingInline: the steps an inline workflow runs in one delivery
// (Definition.Inline) each have their attempt span in the run's trace,
// though only the delivery's begin read the trace.
func TestTracingInline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	caller, worker := newRecorder(t), newRecorder(t)
	client := workflow.NewClient(e.rdb, workflow.ClientConfig{Queue: e.queue, Logger: e.log, TracerProvider: caller.tp})
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	e.startWorker(workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{TracerProvider: worker.tp}},
		workflow.Definition{Name: "fast", Inline: true, Steps: []workflow.Step{{Name: "a", Run: noop}, {Name: "b", Run: noop},
			{Name: "c", Run: noop}}})
	run, err := client.Start(context.Background(), "fast", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.wait(run.ID, 20*time.Second); r.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s", r.Status)
	}
	start := caller.named("cairn.start fast")
	if len(start) != 1 || start[0].Parent().IsValid() {
		t.Fatalf("start spans %v, want one root", start)
	}
	e.eventually(10*time.Second, "the run's span", func() bool { return len(worker.named("cairn.run fast")) == 1 })
	for _, step := range []string{"a", "b", "c"} {
		s := worker.named("cairn.attempt fast." + step)
		if len(s) != 1 || s[0].Parent().SpanID() != start[0].SpanContext().SpanID() {
			t.Errorf("step %s: %d attempt spans, want 1, a child of Start's", step, len(s))
		}
	}
	// asynq counts the task after the handler returns, which is after
	// the run's span ended.
	e.eventually(10*time.Second, "asynq to count the processed task", func() bool { return e.processedTasks() >= 1 })
	if n := e.processedTasks(); n != 1 {
		t.Errorf("%d asynq tasks processed, want 1 (the steps ran inline)", n)
	}
}

// TestTracingWaits: a sleep's and an await's deliveries are spans of the
// run's trace, with events when the wait starts (timer_started,
// signal_awaited) and when the timer fires; a signal a traced client sends
// is a span of the run's trace too, linked to the sender's span, with a
// signal_received event.
func TestTracingWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	caller, worker := newRecorder(t), newRecorder(t)
	client := workflow.NewClient(e.rdb, workflow.ClientConfig{Queue: e.queue, Logger: e.log, TracerProvider: caller.tp})
	e.startWorker(workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{TracerProvider: worker.tp}},
		workflow.Definition{Name: "waity", Steps: []workflow.Step{
			{Name: "nap", Sleep: &workflow.Sleep{For: 500 * time.Millisecond}},
			{Name: "approve", Await: &workflow.Await{Signal: "ok", Timeout: time.Hour}},
			{Name: "done", Run: func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }}}})
	run, err := client.Start(context.Background(), "waity", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.eventually(15*time.Second, "the await to wait", func() bool {
		s := e.get(run.ID).Step("approve")
		return s != nil && s.Status == workflow.StepWaiting
	})
	sctx, sender := caller.tp.Tracer("test").Start(context.Background(), "sender")
	res, err := client.Signal(sctx, run.ID, "ok", map[string]bool{"approved": true}, nil)
	sender.End()
	if err != nil || res.Outcome != workflow.SignalDelivered {
		t.Fatalf("signal: %+v %v", res, err)
	}
	if r := e.wait(run.ID, 20*time.Second); r.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s", r.Status)
	}
	e.eventually(10*time.Second, "the run's span", func() bool { return len(worker.named("cairn.run waity")) == 1 })
	start := caller.named("cairn.start waity")[0].SpanContext()
	hasEvent := func(s sdktrace.ReadOnlySpan, name string) bool {
		return slices.ContainsFunc(s.Events(), func(ev sdktrace.Event) bool { return ev.Name == name })
	}
	for _, c := range []struct {
		rec        *recorder
		span, want string
	}{
		{worker, "cairn.wait waity.nap", "timer_started"},
		{worker, "cairn.wake waity.nap", "timer_fired"},
		{worker, "cairn.wait waity.approve", "signal_awaited"},
		{caller, "cairn.signal waity.ok", "signal_received"},
	} {
		ss := c.rec.named(c.span)
		if len(ss) != 1 {
			t.Errorf("%d spans %s, want 1", len(ss), c.span)
			continue
		}
		s := ss[0]
		if s.SpanContext().TraceID() != start.TraceID() || s.Parent().SpanID() != start.SpanID() || !hasEvent(s, c.want) {
			t.Errorf("%s: trace %v parent %v events %v, want a child of the start span %v with event %s", c.span,
				s.SpanContext().TraceID(), s.Parent(), s.Events(), start, c.want)
		}
	}
	if sig := caller.named("cairn.signal waity.ok"); len(sig) == 1 &&
		(len(sig[0].Links()) != 1 || sig[0].Links()[0].SpanContext.SpanID() != sender.SpanContext().SpanID()) {
		t.Errorf("the signal's span links %v, want the sender's span %v", sig[0].Links(), sender.SpanContext())
	}
}
