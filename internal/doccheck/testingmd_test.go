package doccheck

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflowtest"
)

// Order is the input of docs/testing.md's order workflow.
type Order struct {
	ID int `json:"id"`
}

// ChargeResult is the output of its charge step.
type ChargeResult struct {
	OrderID int    `json:"order_id"`
	Status  string `json:"status"`
}

// orderWorkflow is the workflow docs/testing.md tests: one step that
// charges the order.
func orderWorkflow() workflow.Definition {
	return workflow.Definition{Name: "order", Steps: []workflow.Step{
		{Name: "charge", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
			var o Order
			if err := sc.DecodeInput(&o); err != nil {
				return nil, workflow.Permanent(err)
			}
			return ChargeResult{OrderID: o.ID, Status: "captured"}, nil
		}},
	}}
}

// TestChargeRetried is docs/testing.md's example, a test of this package
// as written.
// snippet: testing-charge-retried
func TestChargeRetried(t *testing.T) {
	env := workflowtest.New(t, orderWorkflow()) // closed when the test ends
	env.FailStep("charge", 1, workflow.Transient(errors.New("gateway timeout")))

	run, err := env.Start("order", Order{ID: 42}, nil) // runs until nothing is due
	if err != nil {
		t.Fatal(err)
	}
	// Attempt 1 failed; attempt 2 is due after the backoff, on the fake clock.
	if err := env.Advance(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
	var charge ChargeResult
	env.RequireOutput(t, run.ID, "charge", &charge)
}

// end snippet

// TestChargeRetriedChecks checks what TestChargeRetried's snippet leaves
// unchecked: the first attempt failed, the second charged the order.
func TestChargeRetriedChecks(t *testing.T) {
	t.Parallel()
	env := workflowtest.New(t, orderWorkflow())
	env.FailStep("charge", 1, workflow.Transient(errors.New("gateway timeout")))
	run, err := env.Start("order", Order{ID: 42}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := env.Get(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st := r.Step("charge"); st.Attempts != 1 || st.Status == workflow.StepSucceeded {
		t.Fatalf("before the backoff: charge %s after %d attempts, want not succeeded after 1", st.Status, st.Attempts)
	}
	if err := env.Advance(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	r = env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
	var charge ChargeResult
	env.RequireOutput(t, run.ID, "charge", &charge)
	if charge != (ChargeResult{OrderID: 42, Status: "captured"}) || r.Step("charge").Attempts != 2 {
		t.Errorf("charge: %+v after %d attempts, want order 42 captured after 2", charge, r.Step("charge").Attempts)
	}
}
