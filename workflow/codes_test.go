package workflow_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// codedStep fails with an error carrying code on each of its first fails
// calls, then succeeds; it counts its calls.
func codedStep(code string, fails int64, calls *atomic.Int64) workflow.StepFunc {
	return func(context.Context, *workflow.StepContext) (any, error) {
		if calls.Add(1) <= fails {
			return nil, workflow.WithCode(errors.New("declined by the bank"), code)
		}
		return "ok", nil
	}
}

// TestNonRetryableCodeFailsFast: a step whose error carries a code listed in
// the workflow's NonRetryableCodes fails on its first attempt, with
// permanent_error, and the journal and the run say the code was not
// retryable; the code is recorded with the attempt.
func TestNonRetryableCodeFailsFast(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var calls atomic.Int64
	pol := fastPolicy()
	pol.NonRetryableCodes = []string{"http_409", "card_declined"}
	e.startWorker(workflow.WorkerConfig{}, workflow.Definition{Name: "charge-card", Policy: pol,
		Steps: []workflow.Step{{Name: "charge", Run: codedStep("card_declined", 100, &calls)}}})

	run := e.wait(mustStart(t, e.client, "charge-card", nil).ID, 20*time.Second)
	if run.Status != workflow.StatusFailed || run.FailureCode != workflow.CodePermanentError || !run.NeedsAttention {
		t.Fatalf("run ended %s code %q attention %v; want failed, permanent_error, needing attention",
			run.Status, run.FailureCode, run.NeedsAttention)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("step ran %d times, want 1", n)
	}
	st := run.Step("charge")
	if st.Attempts != 1 || st.LastErrorClass != workflow.ClassPermanent || st.LastErrorCode != "card_declined" {
		t.Errorf("step: attempts %d class %q code %q; want 1, permanent, card_declined",
			st.Attempts, st.LastErrorClass, st.LastErrorCode)
	}
	const why = `error code "card_declined" is non-retryable`
	if !strings.Contains(st.LastError, why) || !strings.Contains(run.FailureReason, why) {
		t.Errorf("last error %q / failure reason %q do not say %q", st.LastError, run.FailureReason, why)
	}
	evs := e.events(run.ID)
	if n := countEvents(evs, workflow.EventRetryScheduled, ""); n != 0 {
		t.Errorf("%d retries scheduled, want none", n)
	}
	found := false
	for _, ev := range evs {
		if ev.Type == workflow.EventAttemptFailed && ev.Details["code"] == "card_declined" &&
			ev.Details["class"] == workflow.ClassPermanent && strings.Contains(ev.Details["error"], why) {
			found = true
		}
	}
	if !found {
		t.Errorf("no attempt_failed event with code card_declined, class permanent and %q: %+v", why, evs)
	}
}

// TestUnlistedCodeRetries: a code not in the list is an ordinary transient
// error; and a step's empty list turns off the workflow's list for that
// step, so even a listed code retries there.
func TestUnlistedCodeRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var unlisted, optedOut atomic.Int64
	pol := fastPolicy()
	pol.NonRetryableCodes = []string{"card_declined"}
	e.startWorker(workflow.WorkerConfig{}, workflow.Definition{Name: "charge_twice", Policy: pol,
		Steps: []workflow.Step{
			{Name: "unlisted", Run: codedStep("bank_busy", 2, &unlisted)},
			{Name: "opted_out", Run: codedStep("card_declined", 1, &optedOut),
				Policy: workflow.Policy{NonRetryableCodes: []string{}}},
		}})

	run := e.wait(mustStart(t, e.client, "charge_twice", nil).ID, 20*time.Second)
	if run.Status != workflow.StatusSucceeded {
		t.Fatalf("run ended %s (%s: %s), want succeeded", run.Status, run.FailureCode, run.FailureReason)
	}
	if s := run.Step("unlisted"); s.Attempts != 3 || s.RetryAttempts != 2 || unlisted.Load() != 3 {
		t.Errorf("unlisted: attempts %d retries %d calls %d; want 3, 2, 3", s.Attempts, s.RetryAttempts, unlisted.Load())
	}
	if s := run.Step("opted_out"); s.Attempts != 2 || optedOut.Load() != 2 {
		t.Errorf("opted_out: attempts %d calls %d; want 2, 2", s.Attempts, optedOut.Load())
	}
	if s := run.Step("opted_out"); s.EffectivePolicy == nil || s.EffectivePolicy.NonRetryableCodes == nil ||
		len(s.EffectivePolicy.NonRetryableCodes) != 0 {
		t.Errorf("opted_out effective policy %+v, want an explicit empty code list", s.EffectivePolicy)
	}
	if n := countEvents(e.events(run.ID), workflow.EventRetryScheduled, ""); n != 3 {
		t.Errorf("%d retries scheduled, want 3", n)
	}
}

// TestTransientBeatsUnknownPermanent: an error marked Transient is retried
// even when the policy treats unknown errors as permanent; a listed code
// still wins over Transient.
func TestTransientBeatsUnknownPermanent(t *testing.T) {
	t.Parallel()
	base := errors.New("503 Service Unavailable")
	if got := workflow.Classify(workflow.Transient(base), workflow.UnknownPermanent); got != workflow.ClassTransient {
		t.Errorf("Classify(Transient(err), permanent) = %s, want transient", got)
	}
	if got := workflow.Classify(base, workflow.UnknownPermanent); got != workflow.ClassPermanent {
		t.Errorf("Classify(err, permanent) = %s, want permanent", got)
	}
	if got := workflow.Classify(workflow.Permanent(workflow.Transient(base)), workflow.UnknownTransient); got != workflow.ClassPermanent {
		t.Errorf("Permanent(Transient(err)) classified %s, want permanent", got)
	}
	if workflow.Transient(nil) != nil {
		t.Error("Transient(nil) != nil")
	}
	if err := workflow.Transient(base); !errors.Is(err, base) || err.Error() != base.Error() {
		t.Errorf("Transient hides its error: %v", err)
	}
}
