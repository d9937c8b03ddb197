package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflowtest"
)

func ExampleClient_Events() {
	if err := printJournal(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// run_started
	// attempt_started step=fetch attempt=1
	// attempt_failed step=fetch attempt=1 class=transient error="connection reset"
	// retry_scheduled step=fetch attempt=2
	// attempt_started step=fetch attempt=2
	// attempt_succeeded step=fetch attempt=2
	// run_succeeded
}

// printJournal runs a workflow whose step fails once, then prints the run's
// journal.
func printJournal() error {
	// A workflowtest.Env stands in for Redis and a worker (see package
	// workflowtest); its clock is fake, so the retry's backoff takes no
	// time.
	env, err := workflowtest.Open(workflowtest.Options{}, workflow.Definition{
		Name: "flaky",
		Steps: []workflow.Step{{Name: "fetch", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
			if sc.Attempt == 1 {
				return nil, errors.New("connection reset")
			}
			return "ok", nil
		}}},
	})
	if err != nil {
		return err
	}
	defer env.Close()

	ctx := context.Background()
	c := env.Client()
	run, err := c.Start(ctx, "flaky", nil, nil)
	if err != nil {
		return err
	}
	if _, err := env.RunUntilDone(run.ID); err != nil {
		return err
	}

	// The journal tells what happened, oldest first.
	events, err := c.Events(ctx, run.ID)
	if err != nil {
		return err
	}
	for _, ev := range events {
		fmt.Print(ev.Type)
		if ev.Step != "" {
			fmt.Printf(" step=%s attempt=%d", ev.Step, ev.Attempt)
		}
		if ev.Type == workflow.EventAttemptFailed {
			fmt.Printf(" class=%s error=%q", ev.Details["class"], ev.Details["error"])
		}
		fmt.Println()
	}
	return nil
}
