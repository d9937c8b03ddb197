package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflowtest"
)

func ExampleClient_Start() {
	if err := greet(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// succeeded
	// "HELLO, ADA!"
}

// greet starts a run of a two-step workflow as a client and reads its
// result once the steps have run.
func greet() error {
	// A workflowtest.Env stands in for Redis and a worker here: it runs
	// the steps of the runs its client starts (see package workflowtest).
	env, err := workflowtest.Open(workflowtest.Options{}, workflow.Definition{
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
	defer env.Close()

	// A client, in any process, starts runs and follows them: in
	// production, workflow.NewClient(rdb, ...) on the workers' Redis and
	// queue.
	ctx := context.Background()
	c := env.Client()
	run, err := c.Start(ctx, "greet", map[string]string{"name": "Ada"}, nil)
	if err != nil {
		return err
	}
	// The worker runs the steps (c.Wait follows a run until it ends); here
	// the Env runs them, until nothing is left to do.
	if err := env.RunUntilIdle(); err != nil {
		return err
	}
	run, err = c.Get(ctx, run.ID)
	if err != nil {
		return err
	}
	fmt.Println(run.Status)
	fmt.Println(string(run.Step("shout").Output))
	return nil
}

func ExampleClient_StartMany() {
	if err := startMany(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 0 pending send {"to":"ada"}
	// 1 pending send {"to":"alan"}
	// 2 true
}

// startMany starts three runs of a one-step workflow in one round trip,
// one of them with input that is not JSON.
func startMany() error {
	// A workflowtest.Env stands in for Redis and a worker (see greet).
	env, err := workflowtest.Open(workflowtest.Options{}, workflow.Definition{Name: "notify", Steps: []workflow.Step{
		{Name: "send", Run: func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }},
	}})
	if err != nil {
		return err
	}
	defer env.Close()

	// One round trip starts the batch; each request has its own result.
	results := env.Client().StartMany(context.Background(), []workflow.StartRequest{
		{Workflow: "notify", Input: map[string]string{"to": "ada"}},
		{Workflow: "notify", Input: map[string]string{"to": "alan"}, Options: &workflow.StartOptions{IdempotencyKey: "alan"}},
		{Workflow: "notify", Input: json.RawMessage(`{"to":`)},
	})
	for i, r := range results {
		if r.Err != nil {
			fmt.Println(i, errors.Is(r.Err, workflow.ErrInvalidInput))
			continue
		}
		fmt.Println(i, r.Run.Status, r.Run.CurrentStep, string(r.Run.Input))
	}
	return nil
}
