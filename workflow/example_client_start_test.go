package workflow_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/embedded"
	"github.com/cairnhq/cairn/workflow"
)

func ExampleClient_Start() {
	if err := greet(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// succeeded
	// "HELLO, ADA!"
}

// greet runs a worker of a two-step workflow and, as a client, starts a run
// of it and waits for its end.
func greet() (err error) {
	// The embedded development store stands in for Redis.
	store, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer store.Close()
	rdb := redis.NewClient(&redis.Options{Addr: store.Addr()})
	defer rdb.Close()
	quiet := slog.New(slog.DiscardHandler)
	const queue = "example_start"

	// A worker runs the workflow's steps.
	w, err := workflow.NewWorker(rdb, workflow.WorkerConfig{
		EngineConfig: workflow.EngineConfig{Queue: queue, Logger: quiet},
	})
	if err != nil {
		return err
	}
	err = w.Register(workflow.Definition{
		Name: "greet",
		Steps: []workflow.Step{
			{Name: "hello", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
				var in struct {
					Name string `json:"name"`
				}
				if err := sc.DecodeInput(&in); err != nil {
					return nil, err
				}
				return "Hello, " + in.Name, nil
			}},
			{Name: "shout", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
				var greeting string
				if err := sc.DecodeOutput("hello", &greeting); err != nil {
					return nil, err
				}
				return strings.ToUpper(greeting) + "!", nil
			}},
		},
	})
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	// Run publishes the definitions too; publishing first lets a client
	// start the workflow at once.
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

	// A client, in any process, starts runs and follows them.
	c := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: quiet})
	run, err := c.Start(ctx, "greet", map[string]string{"name": "Ada"}, nil)
	if err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	run, err = c.Wait(waitCtx, run.ID, 10*time.Millisecond)
	if err != nil {
		return err
	}
	fmt.Println(run.Status)
	fmt.Println(string(run.Step("shout").Output))
	return nil
}
