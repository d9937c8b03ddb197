package workflowtest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflowtest"
)

// A transient failure injected on the first attempt of a step: the retry
// waits for its backoff on the fake clock, and runs when Advance gets there.
// In a test, workflowtest.New(t, defs...) builds the Env and closes it when
// the test ends.
func Example() {
	order := workflow.Definition{
		Name:   "order",
		Policy: workflow.Policy{InitialInterval: 2 * time.Second, Jitter: workflow.JitterNone},
		Steps: []workflow.Step{
			{Name: "reserve", Run: func(context.Context, *workflow.StepContext) (any, error) {
				return map[string]string{"reservation": "r-1"}, nil
			}},
			{Name: "charge", Run: func(context.Context, *workflow.StepContext) (any, error) {
				return "ch_1", nil
			}},
		},
	}
	env, err := workflowtest.Open(workflowtest.Options{}, order)
	if err != nil {
		panic(err)
	}
	defer env.Close()
	env.FailStep("charge", 1, workflow.Transient(errors.New("gateway timeout")))

	run, err := env.Start("order", map[string]int{"order": 42}, nil)
	if err != nil {
		panic(err)
	}
	charge := run.Step("charge")
	fmt.Println(run.Status, charge.RetryState, "retry in", charge.NextAttemptAt.Sub(env.Now()))

	if err := env.Advance(2 * time.Second); err != nil {
		panic(err)
	}
	var id string
	if err := env.Output(run.ID, "charge", &id); err != nil {
		panic(err)
	}
	run, err = env.Get(run.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Status, id)
	events, err := env.Events(run.ID)
	if err != nil {
		panic(err)
	}
	fmt.Print(workflowtest.FormatEvents(events))
	// Output:
	// running scheduled retry in 2s
	// succeeded ch_1
	// run_started
	// attempt_started reserve#1
	// attempt_succeeded reserve#1
	// attempt_started charge#1
	// attempt_failed charge#1
	// retry_scheduled charge#2
	// attempt_started charge#2
	// attempt_succeeded charge#2
	// run_succeeded
}

// An await completed by a signal, and one that times out when the clock
// passes its timeout.
func ExampleEnv_Signal() {
	approval := workflow.Definition{
		Name: "publish",
		Steps: []workflow.Step{
			{Name: "review", Await: &workflow.Await{Signal: "approved", Timeout: 48 * time.Hour}},
			{Name: "publish", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
				var review struct{ By string }
				if err := sc.DecodeOutput("review", &review); err != nil {
					return nil, err
				}
				return "published, approved by " + review.By, nil
			}},
		},
	}
	env, err := workflowtest.Open(workflowtest.Options{}, approval)
	if err != nil {
		panic(err)
	}
	defer env.Close()

	approved, err := env.Start("publish", nil, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(approved.Status, approved.Step("review").Status)
	if _, err := env.Signal(approved.ID, "approved", map[string]string{"by": "ada"}); err != nil {
		panic(err)
	}
	var out string
	if err := env.Output(approved.ID, "publish", &out); err != nil {
		panic(err)
	}
	fmt.Println(out)

	forgotten, err := env.Start("publish", nil, nil)
	if err != nil {
		panic(err)
	}
	if err := env.Advance(48 * time.Hour); err != nil {
		panic(err)
	}
	forgotten, err = env.Get(forgotten.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(forgotten.Status, forgotten.FailureCode)
	// Output:
	// running waiting
	// published, approved by ada
	// failed signal_timeout
}

// RunUntilDone skips the fake clock ahead from one due moment to the next
// (here a day's sleep, then a backoff) until the run ends.
func ExampleEnv_RunUntilDone() {
	reminder := workflow.Definition{
		Name:   "reminder",
		Policy: workflow.Policy{InitialInterval: 10 * time.Minute, MaxInterval: time.Hour, Jitter: workflow.JitterNone},
		Steps: []workflow.Step{
			{Name: "wait", Sleep: &workflow.Sleep{For: 24 * time.Hour}},
			{Name: "send", Run: func(context.Context, *workflow.StepContext) (any, error) {
				return "sent", nil
			}},
		},
	}
	env, err := workflowtest.Open(workflowtest.Options{}, reminder)
	if err != nil {
		panic(err)
	}
	defer env.Close()
	env.FailStep("send", 1, errors.New("smtp: 421 try again later"))

	run, err := env.Start("reminder", nil, nil)
	if err != nil {
		panic(err)
	}
	run, err = env.RunUntilDone(run.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Status, "after", run.FinishedAt.Sub(run.CreatedAt))
	// Output:
	// succeeded after 24h10m0s
}

// A saga under test: the last step fails for good, and the compensations of
// the steps before it run, last first. A compensation is named
// "compensate:<step>" to inject failures into it.
func ExampleEnv_FailStep() {
	undo := func(what string) workflow.StepFunc {
		return func(_ context.Context, sc *workflow.StepContext) (any, error) {
			fmt.Printf("undo %s (attempt %d, run %s)\n", what, sc.Attempt, sc.Compensation.FailureCode)
			return nil, nil
		}
	}
	trip := workflow.Definition{
		Name:      "trip",
		OnFailure: workflow.FailureCompensate,
		Policy:    workflow.Policy{InitialInterval: time.Second, Jitter: workflow.JitterNone},
		Steps: []workflow.Step{
			{Name: "book_room", Run: func(context.Context, *workflow.StepContext) (any, error) { return 7, nil },
				Compensate: undo("room")},
			{Name: "charge_card", Run: func(context.Context, *workflow.StepContext) (any, error) { return "ch_1", nil },
				Compensate: undo("charge")},
			{Name: "send_voucher", Run: func(context.Context, *workflow.StepContext) (any, error) { return "v-1", nil }},
		},
	}
	env, err := workflowtest.Open(workflowtest.Options{}, trip)
	if err != nil {
		panic(err)
	}
	defer env.Close()
	env.FailStep("send_voucher", 1, workflow.Permanent(errors.New("voucher service rejected the trip")))
	env.FailStep("compensate:charge_card", 1, workflow.Transient(errors.New("refund timed out")))

	run, err := env.Start("trip", nil, nil)
	if err != nil {
		panic(err)
	}
	if run, err = env.RunUntilDone(run.ID); err != nil {
		panic(err)
	}
	fmt.Println(run.Status, run.FailureCode)
	// Output:
	// undo charge (attempt 2, run permanent_error)
	// undo room (attempt 1, run permanent_error)
	// compensated permanent_error
}
