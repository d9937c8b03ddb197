package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/embedded"
	"github.com/cairnhq/cairn/workflow"
)

func ExampleDefinition() {
	def := workflow.Definition{
		Name: "signup",
		// Every step of the workflow: five attempts, backoff from 500ms.
		Policy: workflow.Policy{MaxAttempts: 5, InitialInterval: 500 * time.Millisecond},
		Steps: []workflow.Step{
			{Name: "create_account", Run: func(ctx context.Context, sc *workflow.StepContext) (any, error) {
				// Pass sc.IdempotencyKey to the account service, so that a
				// repeated attempt creates one account.
				return map[string]string{"account_id": "acc_42"}, nil
			}},
			{
				Name: "send_welcome_email",
				Run: func(ctx context.Context, sc *workflow.StepContext) (any, error) {
					var account struct {
						ID string `json:"account_id"`
					}
					if err := sc.DecodeOutput("create_account", &account); err != nil {
						return nil, err
					}
					return nil, nil // send the email to account.ID
				},
				// An operator may skip this step if it keeps failing.
				Optional: true,
				// This step tries harder and fails fast on unknown errors;
				// its other fields come from the workflow's policy.
				Policy: workflow.Policy{MaxAttempts: 10, UnknownErrors: workflow.UnknownPermanent},
			},
		},
	}
	fmt.Println("valid:", def.Validate() == nil)

	b, _ := json.Marshal(def.Steps[1].Policy)
	fmt.Println(string(b))

	def.Steps = append(def.Steps, workflow.Step{Name: "send welcome email"})
	fmt.Println(errors.Is(def.Validate(), workflow.ErrInvalidDefinition))
	// Output:
	// valid: true
	// {"max_attempts":10,"unknown_errors":"permanent"}
	// true
}

func ExamplePolicy_BaseDelay() {
	p := workflow.Policy{InitialInterval: time.Second, BackoffCoefficient: 2, MaxInterval: 10 * time.Second}
	for n := 1; n <= 5; n++ {
		fmt.Printf("after failed attempt %d: %v\n", n, p.BaseDelay(n))
	}
	// Output:
	// after failed attempt 1: 1s
	// after failed attempt 2: 2s
	// after failed attempt 3: 4s
	// after failed attempt 4: 8s
	// after failed attempt 5: 10s
}

func ExamplePermanent() {
	errDeclined := errors.New("card declined")
	err := fmt.Errorf("charge: %w", workflow.Permanent(errDeclined))

	// Marked errors stay what they were; wrapping keeps the mark.
	fmt.Println(err)
	fmt.Println(errors.Is(err, errDeclined))
	fmt.Println(workflow.Classify(err, workflow.UnknownTransient))

	// Timeouts, refused connections and the like are transient without a
	// mark; other errors are classified as the policy's UnknownErrors says.
	timeout := fmt.Errorf("query: %w", context.DeadlineExceeded)
	fmt.Println(workflow.Classify(timeout, workflow.UnknownPermanent))
	fmt.Println(workflow.Classify(errors.New("???"), workflow.UnknownPermanent))
	// Output:
	// charge: card declined
	// true
	// permanent
	// transient
	// permanent
}

func ExampleRetryAfter() {
	// A rate-limited API said "Retry-After: 30".
	err := workflow.RetryAfter(errors.New("429 Too Many Requests"), 30*time.Second)

	delay, ok := workflow.RetryDelayOf(fmt.Errorf("call API: %w", err))
	fmt.Println(delay, ok)
	fmt.Println(workflow.Classify(err, workflow.UnknownPermanent))
	// Output:
	// 30s true
	// transient
}

func ExampleWithCode() {
	err := workflow.Permanent(workflow.WithCode(errors.New("card declined"), "card_declined"))
	fmt.Println(workflow.Code(fmt.Errorf("charge: %w", err)))
	// Output: card_declined
}

func ExampleClient_Start() {
	// The embedded development store stands in for Redis.
	store, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
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
		log.Fatal(err)
	}
	err = w.Register(workflow.Definition{
		Name: "greet",
		Steps: []workflow.Step{
			{Name: "hello", Run: func(ctx context.Context, sc *workflow.StepContext) (any, error) {
				var in struct {
					Name string `json:"name"`
				}
				if err := sc.DecodeInput(&in); err != nil {
					return nil, err
				}
				return "Hello, " + in.Name, nil
			}},
			{Name: "shout", Run: func(ctx context.Context, sc *workflow.StepContext) (any, error) {
				var greeting string
				if err := sc.DecodeOutput("hello", &greeting); err != nil {
					return nil, err
				}
				return strings.ToUpper(greeting) + "!", nil
			}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	// Run publishes the definitions too; publishing first lets a client
	// start the workflow at once.
	if err := w.Engine().Publish(ctx); err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { stop(); <-done }()

	// A client, in any process, starts runs and follows them.
	c := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: quiet})
	run, err := c.Start(ctx, "greet", map[string]string{"name": "Ada"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	run, err = c.Wait(waitCtx, run.ID, 10*time.Millisecond)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(run.Status)
	fmt.Println(string(run.Step("shout").Output))
	// Output:
	// succeeded
	// "HELLO, ADA!"
}

func ExampleClient_Events() {
	store, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
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
		log.Fatal(err)
	}
	err = w.Register(workflow.Definition{
		Name: "flaky",
		Steps: []workflow.Step{{Name: "fetch", Run: func(ctx context.Context, sc *workflow.StepContext) (any, error) {
			if sc.Attempt == 1 {
				// Retry at once rather than after the policy's backoff.
				return nil, workflow.RetryAfter(errors.New("connection reset"), 0)
			}
			return "ok", nil
		}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	if err := w.Engine().Publish(ctx); err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { stop(); <-done }()

	c := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: quiet})
	run, err := c.Start(ctx, "flaky", nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Wait(waitCtx, run.ID, 10*time.Millisecond); err != nil {
		log.Fatal(err)
	}

	// The journal tells what happened, oldest first.
	events, err := c.Events(ctx, run.ID)
	if err != nil {
		log.Fatal(err)
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
	// Output:
	// run_started
	// attempt_started step=fetch attempt=1
	// attempt_failed step=fetch attempt=1 class=transient error="connection reset"
	// retry_scheduled step=fetch attempt=2
	// attempt_started step=fetch attempt=2
	// attempt_succeeded step=fetch attempt=2
	// run_succeeded
}
