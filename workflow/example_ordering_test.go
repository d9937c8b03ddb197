package workflow_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/embedded"
	"github.com/cairnhq/cairn/workflow"
)

// Runs that share an ordering key start one after another, in start order.
// No worker runs here, so the first run stays where it is until it is
// cancelled, which lets the second one start.
func ExampleStartOptions_orderingKey() {
	if err := ordered(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// first: waiting for <nil>
	// second: waiting for ordering key "acct-42", position 1
	// after the first is cancelled, second: waiting for <nil>
}

func ordered() error {
	store, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer store.Close()
	rdb := redis.NewClient(&redis.Options{Addr: store.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	const queue = "example_ordering"

	eng, err := workflow.NewEngine(rdb, workflow.EngineConfig{Queue: queue, Logger: quiet})
	if err != nil {
		return err
	}
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	if err := eng.Register(workflow.Definition{
		Name:     "sync-account",
		Ordering: &workflow.Ordering{Concurrency: 1, OnFailure: workflow.OnFailureBlock},
		Steps:    []workflow.Step{{Name: "sync", Run: noop}},
	}); err != nil {
		return err
	}
	if err := eng.Publish(ctx); err != nil {
		return err
	}

	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: quiet})
	opts := &workflow.StartOptions{OrderingKey: "acct-42"}
	first, err := client.Start(ctx, "sync-account", nil, opts)
	if err != nil {
		return err
	}
	second, err := client.Start(ctx, "sync-account", nil, opts)
	if err != nil {
		return err
	}
	show := func(label string, w *workflow.WaitingFor) {
		if w == nil {
			fmt.Printf("%s: waiting for <nil>\n", label)
			return
		}
		fmt.Printf("%s: waiting for ordering key %q, position %d\n", label, w.OrderingKey, w.Position)
	}
	show("first", first.WaitingFor)
	show("second", second.WaitingFor)

	if _, err := client.Cancel(ctx, first.ID, nil); err != nil {
		return err
	}
	second, err = client.Get(ctx, second.ID)
	if err != nil {
		return err
	}
	show("after the first is cancelled, second", second.WaitingFor)
	return nil
}
