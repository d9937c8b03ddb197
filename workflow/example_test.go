package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

func ExampleDefinition() {
	def := workflow.Definition{
		Name: "signup",
		// Every step of the workflow: five attempts, backoff from 500ms.
		Policy: workflow.Policy{MaxAttempts: 5, InitialInterval: 500 * time.Millisecond},
		Steps: []workflow.Step{
			{Name: "create_account", Run: func(context.Context, *workflow.StepContext) (any, error) {
				// Pass the StepContext's IdempotencyKey to the account
				// service, so that a repeated attempt creates one account.
				return map[string]string{"account_id": "acc_42"}, nil
			}},
			{
				Name: "send_welcome_email",
				Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
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

	b, err := json.Marshal(def.Steps[1].Policy)
	if err != nil {
		fmt.Println(err)
		return
	}
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
