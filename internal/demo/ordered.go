package demo

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/workflow"
)

// The ordered workflows of the ordering suite (cmd/internal/e2e's
// TestOrdering): the same three steps under different admission settings.
const (
	// OrderedName runs the runs of an ordering key one at a time; a run
	// that fails for good blocks its key (the defaults: concurrency 1,
	// on_failure block).
	OrderedName = "ordered"
	// Ordered3Name runs up to OrderedConcurrency runs of a key at once; a
	// failed run blocks its key.
	Ordered3Name = "ordered-c3"
	// OrderedReleaseName runs the runs of a key one at a time; a run that
	// fails for good releases its key.
	OrderedReleaseName = "ordered-release"
	// LimitedName has no ordering but at most LimitedMaxRunning runs
	// active at once (max_running).
	LimitedName = "limited"
)

// OrderedConcurrency is Ordered3Name's ordering concurrency.
const OrderedConcurrency = 3

// LimitedMaxRunning is LimitedName's max_running.
const LimitedMaxRunning = 4

// OrderedSteps are the ordered workflows' steps, in order.
var OrderedSteps = []string{"s1", "s2", "s3"}

// OrderedInput is the ordered workflows' input.
type OrderedInput struct {
	// FailRate is the share of attempts that fail transiently, decided by
	// Injected, so the same attempt fails the same way on every worker.
	FailRate float64 `json:"fail_rate"`
	// SleepMS is how long each step body runs.
	SleepMS int `json:"sleep_ms,omitempty"`
	// FailStep names a step that fails permanently on its first attempt,
	// so the run fails for good; a recover starts a new attempt (attempt
	// numbers are never reused), which does not fail this way.
	FailStep string `json:"fail_step,omitempty"`
}

// Ordered returns the ordered workflows used by the ordering suite: three
// steps that sleep, fail transiently as Injected says (and permanently as
// FailStep says), and record every execution of their body in the audit
// list of queue (AuditKey), like the chaos workflow's, so a test can check
// from outside the engine which runs' bodies ran when.
func Ordered(rdb redis.UniversalClient, queue string, policy workflow.Policy) []workflow.Definition {
	audit := auditor(rdb, queue)
	run := func(ctx context.Context, sc *workflow.StepContext) (any, error) {
		var in OrderedInput
		if err := sc.DecodeInput(&in); err != nil {
			return nil, err
		}
		audit(ctx, "start", sc)
		defer audit(ctx, "end", sc)
		if err := pause(ctx, in.SleepMS); err != nil {
			return nil, err
		}
		if in.FailStep == sc.Step && sc.Attempt == 1 {
			return nil, workflow.Permanent(fmt.Errorf("%s: injected permanent failure on attempt 1", sc.Step))
		}
		if Injected(sc.RunID, sc.Step, sc.Attempt, in.FailRate) {
			return nil, fmt.Errorf("%s: injected transient failure on attempt %d", sc.Step, sc.Attempt)
		}
		return map[string]any{"step": sc.Step, "attempt": sc.Attempt}, nil
	}
	def := func(name string, ord *workflow.Ordering, maxRunning int) workflow.Definition {
		d := workflow.Definition{Name: name, Policy: policy, Ordering: ord, MaxRunning: maxRunning}
		for _, s := range OrderedSteps {
			d.Steps = append(d.Steps, workflow.Step{Name: s, Run: run})
		}
		return d
	}
	return []workflow.Definition{
		def(OrderedName, &workflow.Ordering{Concurrency: 1, OnFailure: workflow.OnFailureBlock}, 0),
		def(Ordered3Name, &workflow.Ordering{Concurrency: OrderedConcurrency, OnFailure: workflow.OnFailureBlock}, 0),
		def(OrderedReleaseName, &workflow.Ordering{Concurrency: 1, OnFailure: workflow.OnFailureRelease}, 0),
		def(LimitedName, nil, LimitedMaxRunning),
	}
}
