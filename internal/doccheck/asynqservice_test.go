package doccheck

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// asynqService is docs/go.md's "In an existing asynq service": it returns
// when the asynq server's Run has returned, on SIGTERM or SIGINT.
func asynqService(ctx context.Context, rdb redis.UniversalClient, orderWorkflow workflow.Definition,
	sendEmail func(context.Context, *asynq.Task) error,
) error {
	// snippet: go-asynq-service
	engine, _ := workflow.NewEngine(rdb, workflow.EngineConfig{Queue: "orders"})
	_ = engine.Register(orderWorkflow)
	if err := engine.Publish(ctx); err != nil { // before the service starts runs; Run publishes again
		return err
	}
	srv := asynq.NewServerFromRedisClient(rdb, engine.AsynqConfig(asynq.Config{
		Queues: map[string]int{"mail": 2}, // the service's own settings
	}))
	mux := asynq.NewServeMux()
	mux.HandleFunc("email:send", sendEmail) // the service's own tasks
	engine.Handle(mux)                      // Cairn's step attempts
	go engine.Run(ctx, nil)                 // publishes the definitions, runs the reconciler
	_ = srv.Run(mux)
	// end snippet
	return nil
}

// TestAsynqService runs docs/go.md's asynq service: the service's own task
// and a Cairn run both succeed on its server; then a SIGTERM to the test's
// own process (which listens for SIGTERM itself, so that the signal never
// kills it) ends the server's Run, and the snippet returns. (asynq never
// stops listening: from then on a SIGTERM to the test binary is caught
// and ignored.) It must not run in parallel with other tests: it waits
// for the goroutines the snippet started, by difference.
func TestAsynqService(t *testing.T) {
	srv := redistest.Start(t, nil)
	rdb := srv.Client(t)
	quietDefaultLogger(t)
	before := goleak.IgnoreCurrent()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	defer signal.Stop(sigs)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	emails := make(chan string, 1)
	sendEmail := func(_ context.Context, task *asynq.Task) error {
		if !json.Valid(task.Payload()) {
			return fmt.Errorf("%s: payload %q is not JSON: %w", task.Type(), task.Payload(), asynq.SkipRetry)
		}
		emails <- string(task.Payload())
		return nil
	}
	orderWorkflow := workflow.Definition{Name: "order", Steps: []workflow.Step{
		{Name: "charge", Run: func(context.Context, *workflow.StepContext) (any, error) { return "charged", nil }},
	}}
	done := make(chan error, 1)
	go func() { done <- asynqService(ctx, rdb, orderWorkflow, sendEmail) }()

	// The client knows the definition: its Start does not wait for the
	// snippet's Publish.
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: "orders", Logger: testkit.Logger(t),
		Definitions: []workflow.Definition{orderWorkflow}})
	run, err := client.Start(ctx, "order", map[string]int{"cents": 1250}, nil)
	if err != nil {
		t.Fatal(err)
	}
	aq := asynq.NewClientFromRedisClient(rdb)
	if _, err := aq.Enqueue(asynq.NewTask("email:send", []byte(`"welcome"`)), asynq.Queue("mail")); err != nil {
		t.Fatal(err)
	}
	if run = testkit.WaitRun(t, client, run.ID, deadline); run.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s: %s (%s), want succeeded", run.ID, run.Status, run.FailureReason)
	}
	select {
	case got := <-emails:
		if got != `"welcome"` {
			t.Errorf("email:send got %s", got)
		}
	case <-time.After(deadline):
		t.Fatal("the service's own task did not run")
	}

	// The server listens for SIGTERM from when its Run has started it,
	// which a succeeded run shows, up to a moment after: send SIGTERM
	// until the snippet returns.
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	again := time.NewTicker(100 * time.Millisecond)
	defer again.Stop()
	timeout := time.After(deadline)
	for sent := false; !sent; {
		if err := self.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the snippet returned %v", err)
			}
			sent = true
		case <-again.C:
		case <-timeout:
			t.Fatal("the asynq server's Run did not return on SIGTERM")
		}
	}
	select {
	case <-sigs: // the test's own listener got it too
	default:
		t.Error("SIGTERM sent, but the test's listener did not get it")
	}

	// The engine's Run ends with ctx.
	cancel()
	waitGoroutines(t, before)
}
