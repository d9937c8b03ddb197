package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// TestAsynqServiceInterop runs Cairn on an asynq server that also serves
// the service's own tasks, from its own queue, on its own mux: the
// service's task is handled, a run whose second step is an existing asynq
// handler (AsynqHandler) succeeds with that handler given the run's input,
// and a step returning asynq.SkipRetry fails its run at once, without the
// retries its policy allows.
func TestAsynqServiceInterop(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	eng, err := workflow.NewEngine(e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	legacy := make(chan string, 1)
	charge := asynq.HandlerFunc(func(_ context.Context, task *asynq.Task) error {
		legacy <- task.Type() + " " + string(task.Payload())
		return nil
	})
	refuse := asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		return fmt.Errorf("card declined: %w", asynq.SkipRetry)
	})
	noop := func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }
	err = eng.Register(
		workflow.Definition{Name: "order", Policy: fastPolicy(), Steps: []workflow.Step{
			{Name: "reserve", Run: noop},
			{Name: "charge", Run: workflow.AsynqHandler("billing:charge", charge)},
		}},
		workflow.Definition{Name: "declined", Policy: fastPolicy(), Steps: []workflow.Step{
			{Name: "charge", Run: workflow.AsynqHandler("billing:charge", refuse)},
		}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Publish(ctx); err != nil {
		t.Fatal(err)
	}

	// The service's own server: its queue, its mux, its task.
	own := testkit.Queue(t, "own")
	srv := asynq.NewServerFromRedisClient(e.rdb, eng.AsynqConfig(asynq.Config{
		Concurrency: 4, Queues: map[string]int{own: 2}, LogLevel: asynq.FatalLevel,
	}))
	mux := asynq.NewServeMux()
	mailed := make(chan string, 1)
	mux.HandleFunc("email:send", func(_ context.Context, task *asynq.Task) error {
		mailed <- string(task.Payload())
		return nil
	})
	eng.Handle(mux)
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		_ = eng.Run(ctx, nil)
	}()
	t.Cleanup(func() { cancel(); <-runDone })

	ac := asynq.NewClientFromRedisClient(e.rdb)
	if _, err := ac.Enqueue(asynq.NewTask("email:send", []byte(`"welcome"`)), asynq.Queue(own)); err != nil {
		t.Fatal(err)
	}
	run, err := e.client.Start(ctx, "order", map[string]int{"cents": 1250}, nil)
	if err != nil {
		t.Fatal(err)
	}
	declined, err := e.client.Start(ctx, "declined", nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	select {
	case got := <-mailed:
		if got != `"welcome"` {
			t.Errorf("the service's task got payload %s", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the service's own task was not handled")
	}
	if r := e.wait(run.ID, 30*time.Second); r.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s: %s (%s)", run.ID, r.Status, r.FailureReason)
	}
	if got, want := <-legacy, `billing:charge {"cents":1250}`; got != want {
		t.Errorf("the asynq handler got %q, want %q", got, want)
	}
	r := e.wait(declined.ID, 30*time.Second)
	if r.Status != workflow.StatusFailed {
		t.Fatalf("run %s: %s, want failed", declined.ID, r.Status)
	}
	if s := r.Steps[0]; s.Attempts != 1 || s.LastErrorClass != workflow.ClassPermanent {
		t.Errorf("SkipRetry step: %d attempt(s), class %q; want 1 attempt, permanent (policy allows %d)",
			s.Attempts, s.LastErrorClass, fastPolicy().MaxAttempts)
	}
}

// TestAsynqConfig: AsynqConfig adds the engine's queue, keeps the service's
// retry delay and failure predicate for its own tasks while Cairn's tasks
// take Cairn's, and lowers asynq's polling intervals.
func TestAsynqConfig(t *testing.T) {
	eng, err := workflow.NewEngine(newEnv(t).rdb, workflow.EngineConfig{Queue: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	theirs := errors.New("their task failed")
	cfg := eng.AsynqConfig(asynq.Config{
		Queues:            map[string]int{"mail": 3},
		RetryDelayFunc:    func(int, error, *asynq.Task) time.Duration { return 42 * time.Second },
		IsFailure:         func(err error) bool { return !errors.Is(err, theirs) },
		TaskCheckInterval: 10 * time.Millisecond,
	})
	if want := map[string]int{"mail": 3, "orders": 1}; fmt.Sprint(cfg.Queues) != fmt.Sprint(want) {
		t.Errorf("queues %v, want %v", cfg.Queues, want)
	}
	if d := cfg.RetryDelayFunc(1, theirs, asynq.NewTask("email:send", nil)); d != 42*time.Second {
		t.Errorf("their task's retry delay %v, want theirs (42s)", d)
	}
	step := tasks.Step{RunID: "x", Workflow: "order", Name: "charge", Attempt: 1}.Encode()
	if d := cfg.RetryDelayFunc(1, theirs, asynq.NewTask(tasks.TypeStep, step)); d == 42*time.Second {
		t.Error("a step task took the service's retry delay")
	}
	if cfg.IsFailure(theirs) || !cfg.IsFailure(errors.New("other")) {
		t.Error("the service's failure predicate is not the one deciding for its errors")
	}
	if cfg.TaskCheckInterval != 10*time.Millisecond || cfg.DelayedTaskCheckInterval != 200*time.Millisecond {
		t.Errorf("intervals %v and %v, want 10ms (theirs, shorter) and 200ms", cfg.TaskCheckInterval, cfg.DelayedTaskCheckInterval)
	}
	if got := eng.AsynqConfig(asynq.Config{}).Queues; fmt.Sprint(got) != fmt.Sprint(map[string]int{"default": 1, "orders": 1}) {
		t.Errorf("queues from asynq's default: %v", got)
	}
}
