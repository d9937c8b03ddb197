package workflow_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/embedded"
	"github.com/cairnhq/cairn/workflow"
)

// Cairn added to an asynq service that already has a server, a mux and
// task handlers of its own: AsynqConfig completes the server's options,
// Handle registers Cairn's handler on the mux, Run publishes the
// definitions and runs the reconciler, and AsynqHandler runs one of the
// service's existing handlers as a step.
func ExampleEngine_Handle() {
	if err := inAsynqService(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// email:send "welcome"
	// order succeeded
}

func inAsynqService() error {
	// The embedded development store stands in for Redis.
	store, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer store.Close()
	rdb := redis.NewClient(&redis.Options{Addr: store.Addr()})
	defer rdb.Close()
	quiet := slog.New(slog.DiscardHandler)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	// The service's existing handlers.
	sent := make(chan string, 1)
	sendEmail := func(_ context.Context, t *asynq.Task) error {
		sent <- t.Type() + " " + string(t.Payload())
		return nil
	}
	charge := asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })

	// Cairn's engine, with a workflow whose second step is the service's
	// existing charge handler.
	engine, err := workflow.NewEngine(rdb, workflow.EngineConfig{Queue: "orders", Logger: quiet})
	if err != nil {
		return err
	}
	err = engine.Register(workflow.Definition{Name: "order", Steps: []workflow.Step{
		{Name: "reserve", Run: func(context.Context, *workflow.StepContext) (any, error) { return "reserved", nil }},
		{Name: "charge", Run: workflow.AsynqHandler("billing:charge", charge)},
	}})
	if err != nil {
		return err
	}
	if err := engine.Publish(ctx); err != nil { // Run publishes too; this lets Start run at once
		return err
	}

	// The service's server and mux, with Cairn added.
	srv := asynq.NewServerFromRedisClient(rdb, engine.AsynqConfig(asynq.Config{
		Queues: map[string]int{"mail": 1}, LogLevel: asynq.FatalLevel,
	}))
	mux := asynq.NewServeMux()
	mux.HandleFunc("email:send", sendEmail)
	engine.Handle(mux)
	if err := srv.Start(mux); err != nil {
		return err
	}
	defer srv.Shutdown()
	go func() { _ = engine.Run(ctx, nil) }()

	if _, err := asynq.NewClientFromRedisClient(rdb).Enqueue(asynq.NewTask("email:send", []byte(`"welcome"`)),
		asynq.Queue("mail")); err != nil {
		return err
	}
	fmt.Println(<-sent)
	c := workflow.NewClient(rdb, workflow.ClientConfig{Queue: "orders", Logger: quiet})
	run, err := c.Start(ctx, "order", map[string]int{"cents": 1250}, nil)
	if err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if run, err = c.Wait(waitCtx, run.ID, 10*time.Millisecond); err != nil {
		return err
	}
	fmt.Println(run.Workflow, run.Status)
	return nil
}
