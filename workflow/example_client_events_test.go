package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/embedded"
	"github.com/cairnhq/cairn/workflow"
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
func printJournal() (err error) {
	store, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer store.Close()
	rdb := redis.NewClient(&redis.Options{Addr: store.Addr()})
	defer rdb.Close()
	quiet := slog.New(slog.DiscardHandler)
	const queue = "example_events"

	w, err := workflow.NewWorker(rdb, workflow.WorkerConfig{
		EngineConfig: workflow.EngineConfig{Queue: queue, Logger: quiet},
	})
	if err != nil {
		return err
	}
	err = w.Register(workflow.Definition{
		Name: "flaky",
		Steps: []workflow.Step{{Name: "fetch", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
			if sc.Attempt == 1 {
				// Retry at once rather than after the policy's backoff.
				return nil, workflow.RetryAfter(errors.New("connection reset"), 0)
			}
			return "ok", nil
		}}},
	})
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	if err := w.Engine().Publish(ctx); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		stop()
		if werr := <-done; err == nil {
			err = werr
		}
	}()

	c := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: quiet})
	run, err := c.Start(ctx, "flaky", nil, nil)
	if err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Wait(waitCtx, run.ID, 10*time.Millisecond); err != nil {
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
