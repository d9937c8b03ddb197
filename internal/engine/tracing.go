package engine

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// OpenTelemetry tracing.
//
// A run's trace context is taken from Start's context and stored with the
// run (the run hash's "trace" field: the W3C traceparent, then a newline and
// the tracestate when there is one), so that every attempt, on any worker,
// after retries, crashes and recovery, joins the caller's trace:
//
//   - Start records a span "cairn.start <workflow>" (kind producer), a child
//     of the caller's span, and stores its context (with no TracerProvider,
//     Start stores the caller's span context itself, when there is one);
//   - each delivery of a step attempt that runs is a span "cairn.attempt
//     <workflow>.<step>" (kind consumer), a child of the stored context, in
//     whose context the step body runs (so the body's own spans nest under
//     it), ended with the attempt's outcome; a retry scheduled and a
//     resumption after a crash are events on it;
//   - the worker that ends a run in an attempt records a span "cairn.run
//     <workflow>" from the run's creation (the time in its ID) to its end,
//     also a child of the stored context, with the run's status.
//
// A process with no TracerProvider records nothing and the step path does
// no tracing work.

// tracerName is the instrumentation scope of Cairn's spans.
const tracerName = "github.com/cairnhq/cairn/workflow"

// Span attributes.
const (
	attrWorkflow   = attribute.Key("cairn.workflow")
	attrRunID      = attribute.Key("cairn.run_id")
	attrStep       = attribute.Key("cairn.step")
	attrStepIndex  = attribute.Key("cairn.step_index")
	attrAttempt    = attribute.Key("cairn.attempt")
	attrTaskID     = attribute.Key("cairn.task_id")
	attrOutcome    = attribute.Key("cairn.outcome")
	attrErrorClass = attribute.Key("cairn.error_class")
	attrStatus     = attribute.Key("cairn.status")
	attrFailure    = attribute.Key("cairn.failure_code")
)

// tracer is a process's tracing; nil when it has no TracerProvider. Every
// method is safe on nil and then does nothing.
type tracer struct {
	t trace.Tracer
}

func newTracer(tp trace.TracerProvider) *tracer {
	if tp == nil {
		return nil
	}
	return &tracer{t: tp.Tracer(tracerName)}
}

// traceCarrier encodes and decodes stored trace contexts.
var traceCarrier = propagation.TraceContext{}

// encodeTrace returns the stored form of ctx's span context, "" when it
// has none.
func encodeTrace(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	traceCarrier.Inject(ctx, c)
	s := c.Get("traceparent")
	if st := c.Get("tracestate"); st != "" {
		s += "\n" + st
	}
	return s
}

// decodeTrace returns ctx with the stored span context s as its remote
// parent (ctx unchanged when s holds none).
func decodeTrace(ctx context.Context, s string) context.Context {
	if s == "" {
		return ctx
	}
	tp, ts, _ := strings.Cut(s, "\n")
	return traceCarrier.Extract(ctx, propagation.MapCarrier{"traceparent": tp, "tracestate": ts})
}

// startRun records Start's span and returns the trace context to store
// with the run: the span's, or with no tracer the caller's (or "").
func (t *tracer) startRun(ctx context.Context, workflow, runID string) string {
	if t == nil {
		return encodeTrace(ctx)
	}
	ctx, span := t.t.Start(ctx, "cairn.start "+workflow, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attrWorkflow.String(workflow), attrRunID.String(runID)))
	defer span.End()
	return encodeTrace(ctx)
}

// startAttempt starts the span of a delivery of attempt p whose run stored
// the trace context stored, and returns ctx with it: the span, as the
// parent of the step body's spans, and the attempt's trace, for
// tracingObserver. The span ends with the attempt's outcome, in
// tracingObserver.StepAttempt.
func (t *tracer) startAttempt(ctx context.Context, stored string, p tasks.Step) context.Context {
	ctx, _ = t.startDelivery(ctx, stored, "cairn.attempt ", p, attrAttempt.Int(p.Attempt))
	return ctx
}

// startWait starts the span of a delivery of a step with no body, an await
// or a sleep (kind), that starts its wait or wakes it up (wake), and
// returns ctx with it as startAttempt does; the caller ends it.
func (t *tracer) startWait(ctx context.Context, stored string, p tasks.Step, kind retrystate.StepKind, wake bool) (context.Context, trace.Span) {
	what := "cairn.wait "
	if wake {
		what = "cairn.wake "
	}
	return t.startDelivery(ctx, stored, what, p, attribute.String("cairn.step_kind", string(kind)))
}

// startDelivery starts the span what<workflow>.<step> of the delivery of
// p's task, a child of the trace context its run stored, with the
// delivery's attributes and extra, and returns ctx with it (and the stored
// context, for the run's span: attemptOf) and the span.
func (t *tracer) startDelivery(ctx context.Context, stored, what string, p tasks.Step, extra attribute.KeyValue) (context.Context, trace.Span) {
	ctx, span := t.t.Start(decodeTrace(ctx, stored), what+p.Workflow+"."+p.Name, //nolint:spancheck // the caller's to end
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attrWorkflow.String(p.Workflow), attrRunID.String(p.RunID), attrStep.String(p.Name),
			attrStepIndex.Int(p.Index), attrTaskID.String(p.ID()), extra))
	return context.WithValue(ctx, attemptKey{}, &attemptTrace{span: span, stored: stored}), span //nolint:spancheck // as above
}

// waitEvent records on span what a wait's delivery did: "timer_started"
// or "signal_awaited" (with the wake-up's time) when the wait started,
// "timer_fired" or "signal_timed_out" when its wake-up ended it.
func waitEvent(span trace.Span, kind retrystate.StepKind, wake bool, res retrystate.WaitResult) {
	switch {
	case !wake && res.Outcome == retrystate.OutcomeWaiting:
		name := "timer_started"
		if kind == retrystate.KindAwait {
			name = "signal_awaited"
		}
		span.AddEvent(name, trace.WithAttributes(attribute.String("cairn.wake_at", res.Dispatch.DueAt.UTC().Format(time.RFC3339Nano))))
	case wake && (res.Outcome == retrystate.OutcomeNext || res.Outcome == retrystate.OutcomeRunSucceeded ||
		res.Outcome == retrystate.OutcomeRunFailed):
		name := "timer_fired"
		if kind == retrystate.KindAwait {
			name = "signal_timed_out"
		}
		span.AddEvent(name)
	}
	if res.Outcome == retrystate.OutcomeRunFailed {
		span.SetStatus(codes.Error, res.Code)
	}
}

// attemptKey is the context key of an attempt's attemptTrace.
type attemptKey struct{}

// attemptTrace is what tracingObserver needs of an attempt: its span, and
// the trace context its run stored (the parent of the run's span).
type attemptTrace struct {
	span   trace.Span
	stored string
}

func attemptOf(ctx context.Context) *attemptTrace {
	a, _ := ctx.Value(attemptKey{}).(*attemptTrace)
	return a
}

// errorClass is the class of the error an attempt that ended with outcome
// failed with ("" when it did not fail).
func errorClass(outcome core.AttemptOutcome) string {
	if outcome == core.OutcomeFailedTransient || outcome == core.OutcomeExhausted {
		return core.ClassTransient
	}
	if outcome == core.OutcomeFailedPermanent {
		return core.ClassPermanent
	}
	return ""
}

// tracingObserver is the engine's Observer when it traces: it records on
// the attempt's span (from the call's context) what the observer is told,
// ends that span with the attempt's outcome, and records the run's span
// when the run ends, then tells the observer it wraps.
type tracingObserver struct {
	core.Observer
	t     *tracer
	clock core.Clock
}

// StepAttempt ends the attempt's span with its outcome; a resumed attempt
// (OutcomeCrashed, told when it begins) is an event on it.
func (o tracingObserver) StepAttempt(ctx context.Context, runID, workflow, step string, outcome core.AttemptOutcome, d time.Duration) {
	if a := attemptOf(ctx); a != nil {
		if outcome == core.OutcomeCrashed {
			a.span.AddEvent("resumed_after_crash")
		} else {
			a.span.SetAttributes(attrOutcome.String(string(outcome)))
			if class := errorClass(outcome); class != "" {
				a.span.SetAttributes(attrErrorClass.String(class))
				a.span.SetStatus(codes.Error, string(outcome))
			}
			a.span.End()
		}
	}
	o.Observer.StepAttempt(ctx, runID, workflow, step, outcome, d)
}

// RetryScheduled is an event on the failed attempt's span.
func (o tracingObserver) RetryScheduled(ctx context.Context, runID, workflow, step string, delay time.Duration) {
	if a := attemptOf(ctx); a != nil {
		a.span.AddEvent("retry_scheduled", trace.WithAttributes(attribute.String("cairn.delay", delay.String())))
	}
	o.Observer.RetryScheduled(ctx, runID, workflow, step, delay)
}

// RunFinished records the run's span, in the trace its attempts joined.
func (o tracingObserver) RunFinished(ctx context.Context, runID, workflow string, status core.RunStatus, code string) {
	stored := ""
	if a := attemptOf(ctx); a != nil {
		stored = a.stored
	}
	o.t.runFinished(ctx, stored, workflow, runID, status, code, o.clock.Now())
	o.Observer.RunFinished(ctx, runID, workflow, status, code)
}

// runFinished records the span of a run that ended now with status (and
// failure code), from its creation, the time in its ID.
func (t *tracer) runFinished(ctx context.Context, stored, workflow, runID string, status core.RunStatus, code string, now time.Time) {
	if t == nil || stored == "" {
		return // no trace to join
	}
	start := now
	if created, ok := core.RunIDTime(runID); ok && created.Before(now) {
		start = created
	}
	_, span := t.t.Start(decodeTrace(context.WithoutCancel(ctx), stored), "cairn.run "+workflow,
		trace.WithTimestamp(start),
		trace.WithAttributes(attrWorkflow.String(workflow), attrRunID.String(runID), attrStatus.String(string(status))))
	if code != "" {
		span.SetAttributes(attrFailure.String(code))
	}
	if status == core.StatusFailed {
		span.SetStatus(codes.Error, code)
	}
	span.End(trace.WithTimestamp(now))
}

// signalReceived records the span of a signal the client sent to a run:
// "cairn.signal <workflow>.<signal>", in the run's trace (a child of its
// stored context; linked to the sender's span, if any), with a
// "signal_received" event saying what it did. A run with no stored trace
// gets none. Reading the run's trace is one more round trip, only for a
// client that traces.
func (t *tracer) signalReceived(ctx context.Context, rd func(context.Context) (string, string, error), runID, name string,
	res *core.SignalResult, sendErr error) {
	if t == nil {
		return
	}
	wf, stored, err := rd(ctx)
	if err != nil || stored == "" {
		return
	}
	var opts []trace.SpanStartOption
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	opts = append(opts, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrWorkflow.String(wf),
		attrRunID.String(runID), attribute.String("cairn.signal", name)))
	_, span := t.t.Start(decodeTrace(context.WithoutCancel(ctx), stored), "cairn.signal "+wf+"."+name, opts...)
	defer span.End()
	if sendErr != nil && res == nil {
		span.SetStatus(codes.Error, sendErr.Error())
		return
	}
	attrs := []attribute.KeyValue{attribute.String("cairn.signal_outcome", string(res.Outcome))}
	if res.Step != "" {
		attrs = append(attrs, attrStep.String(res.Step))
	}
	span.AddEvent("signal_received", trace.WithAttributes(attrs...))
}
