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

// A saga: when a step fails for good, the compensations of the steps that
// succeeded run, last first, and the run ends compensated, keeping its
// failure. Each compensation gets the output of the step it undoes.
func ExampleStep_compensate() {
	if err := saga(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// refund ch_1 (run failed: permanent_error)
	// release room 7
	// compensated permanent_error
	// book_room: compensated, charge_card: compensated, send_voucher: failed
}

func saga() (err error) {
	store, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer store.Close()
	rdb := redis.NewClient(&redis.Options{Addr: store.Addr()})
	defer rdb.Close()
	quiet := slog.New(slog.DiscardHandler)
	const queue = "example_saga"

	w, err := workflow.NewWorker(rdb, workflow.WorkerConfig{
		EngineConfig: workflow.EngineConfig{Queue: queue, Logger: quiet},
	})
	if err != nil {
		return err
	}
	err = w.Register(workflow.Definition{
		Name:      "trip",
		OnFailure: workflow.FailureCompensate,
		Steps: []workflow.Step{
			{
				Name: "book_room",
				Run: func(context.Context, *workflow.StepContext) (any, error) {
					return map[string]int{"room": 7}, nil
				},
				Compensate: func(_ context.Context, sc *workflow.StepContext) (any, error) {
					var booked struct{ Room int }
					if err := sc.DecodeOutput("book_room", &booked); err != nil {
						return nil, err
					}
					fmt.Println("release room", booked.Room)
					return nil, nil
				},
			},
			{
				Name: "charge_card",
				Run: func(context.Context, *workflow.StepContext) (any, error) {
					return "ch_1", nil
				},
				Compensate: func(_ context.Context, sc *workflow.StepContext) (any, error) {
					// sc.Compensation says what is undone, and why.
					var charge string
					if err := sc.DecodeOutput("charge_card", &charge); err != nil {
						return nil, err
					}
					fmt.Printf("refund %s (run failed: %s)\n", charge, sc.Compensation.FailureCode)
					return nil, nil
				},
			},
			{
				Name: "send_voucher",
				Run: func(context.Context, *workflow.StepContext) (any, error) {
					return nil, workflow.Permanent(errors.New("voucher service rejected the trip"))
				},
			},
		},
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
	run, err := c.Start(ctx, "trip", nil, nil)
	if err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if run, err = c.Wait(waitCtx, run.ID, 10*time.Millisecond); err != nil {
		return err
	}
	fmt.Println(run.Status, run.FailureCode)
	for i, s := range run.Steps {
		if i > 0 {
			fmt.Print(", ")
		}
		fmt.Printf("%s: %s", s.Name, s.Status)
	}
	fmt.Println()
	return nil
}
