package workflow_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/embedded"
	"github.com/cairnhq/cairn/workflow"
)

// A client with an outbox queues a Start while Redis is unreachable and
// returns at once the run it will be. The outbox file keeps it across a
// restart of the application; the flusher starts the run when Redis
// answers.
func ExampleClientConfig_outbox() {
	if err := offline(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// queued: true
	// flushed: 1
	// succeeded
}

func offline() (err error) {
	// The embedded development store stands in for Redis; it is stopped
	// for a while (and keeps nothing).
	store, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := store.Addr()
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialerRetries: 1})
	defer rdb.Close()
	quiet := slog.New(slog.DiscardHandler)
	const queue = "example_outbox"
	w, err := workflow.NewWorker(rdb, workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{Queue: queue, Logger: quiet}})
	if err != nil {
		return err
	}
	err = w.Register(workflow.Definition{Name: "greet", Steps: []workflow.Step{
		{Name: "hello", Run: func(context.Context, *workflow.StepContext) (any, error) { return "hello", nil }},
	}})
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	store.Close() // Redis is down

	dir, err := os.MkdirTemp("", "outbox-example-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := workflow.ClientConfig{Queue: queue, Logger: quiet, Outbox: filepath.Join(dir, "outbox.db")}
	c, err := workflow.OpenClient(rdb, cfg)
	if err != nil {
		return err
	}
	run, err := c.Start(ctx, "greet", nil, &workflow.StartOptions{IdempotencyKey: "greet-1"})
	if err != nil {
		return err
	}
	fmt.Println("queued:", run.Queued) // run.ID is the ID the run will have
	// The application stops: Close stops the flusher and closes the file,
	// which keeps the queued start.
	if err := c.Close(); err != nil {
		return err
	}

	// Redis is back, and a worker with it (it publishes the workflow: a
	// start of a workflow no worker has published would be refused).
	if store, err = embedded.Start(addr); err != nil {
		return err
	}
	defer store.Close()
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
	// The application starts again: its flusher sends the queue at once;
	// FlushOutbox waits for that (or does it).
	if c, err = workflow.OpenClient(rdb, cfg); err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.FlushOutbox(ctx); err != nil {
		return err
	}
	st, err := c.OutboxStats()
	if err != nil {
		return err
	}
	fmt.Println("flushed:", st.Flushed)
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if run, err = c.Wait(waitCtx, run.ID, 10*time.Millisecond); err != nil {
		return err
	}
	fmt.Println(run.Status)
	return nil
}
