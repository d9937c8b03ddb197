package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/workflow"
)

// SagaName is the name of the chaos suite's saga workflow.
const SagaName = "chaos-saga"

// The saga workflow's steps, in order. Reserve and charge have
// compensations (release and refund); quote and ship have none. Charge, and
// so its compensation, is behind the circuit breaker SagaBreaker.
const (
	SagaReserve = "reserve"
	SagaQuote   = "quote"
	SagaCharge  = "charge"
	SagaShip    = "ship"
)

// SagaSteps are the saga workflow's steps, in order.
var SagaSteps = []string{SagaReserve, SagaQuote, SagaCharge, SagaShip}

// SagaCompensated reports whether the saga workflow's step has a compensation.
func SagaCompensated(step string) bool { return step == SagaReserve || step == SagaCharge }

// SagaBreaker is the circuit breaker of the saga's charge step (and of its
// compensation, which inherits the step's policy): it opens after
// SagaBreakerThreshold consecutive transient failures, for
// SagaBreakerCooldown, doubling on a failed probe up to
// SagaBreakerMaxCooldown.
const (
	SagaBreaker            = "chaos-payments"
	SagaBreakerThreshold   = 3
	SagaBreakerCooldown    = 100 * time.Millisecond
	SagaBreakerMaxCooldown = 500 * time.Millisecond
)

// SagaChargeTimeout is the charge step's timeout (and its compensation's).
// It bounds the lease of the breaker's probe: a half-open breaker whose
// probe's worker died lets another attempt probe after this plus a minute.
const SagaChargeTimeout = 10 * time.Second

// SagaCompAttempts is the max attempts of the saga's compensations (their
// own policy; the steps have the worker's). Their retries come quickly
// (SagaCompRetryInterval apart at most), so that a compensation of charge
// made to fail on every attempt (SagaInput.CompExhaustStep) fails
// SagaBreakerThreshold times in a row before another run's charge can
// succeed in between and reset the count: it opens the breaker.
const (
	SagaCompAttempts      = 3
	SagaCompRetryInterval = 20 * time.Millisecond
)

// SagaInput is the saga workflow's input. Every failure it injects depends
// only on the run, the step and the attempt, so it is the same on every
// worker and after restarts, and a checker can tell from the input how the
// run must end.
type SagaInput struct {
	// FailRate is the share of the steps' attempts that fail transiently
	// (Injected), but charge's, whose share is ChargeFailRate (higher, so
	// that the breaker opens now and then).
	FailRate       float64 `json:"fail_rate"`
	ChargeFailRate float64 `json:"charge_fail_rate"`
	// CompFailRate is the share of the compensations' attempts that fail
	// transiently (Injected, with the compensation's step name
	// "compensate:<step>").
	CompFailRate float64 `json:"comp_fail_rate"`
	// PermanentStep fails permanently on its first attempt; ExhaustStep
	// fails transiently on every attempt, so it exhausts its retries.
	// Either fails the run for good, which runs the compensations.
	PermanentStep string `json:"permanent_step,omitempty"`
	ExhaustStep   string `json:"exhaust_step,omitempty"`
	// CompExhaustStep names a step whose compensation fails transiently on
	// every attempt: the run ends failed, compensation_failed.
	CompExhaustStep string `json:"comp_exhaust_step,omitempty"`
	// BlockComp names a step whose compensation, once it has recorded its
	// start, waits until the run's ReleaseKey exists (for a test that
	// kills the worker running it).
	BlockComp string `json:"block_comp,omitempty"`
	// SleepMS is how long each body (steps and compensations) runs, but
	// charge's and its compensation's, which run ChargeSleepMS.
	SleepMS       int `json:"sleep_ms"`
	ChargeSleepMS int `json:"charge_sleep_ms,omitempty"`
}

// SagaStepFails reports whether attempt of a saga step fails, and whether
// permanently, as in says.
func SagaStepFails(runID, step string, attempt int, in SagaInput) (fails, permanent bool) {
	switch {
	case step == in.PermanentStep && attempt == 1:
		return true, true
	case step == in.ExhaustStep:
		return true, false
	}
	rate := in.FailRate
	if step == SagaCharge {
		rate = in.ChargeFailRate
	}
	return Injected(runID, step, attempt, rate), false
}

// SagaCompFails reports whether attempt of the compensation of a saga step
// fails (transiently), as in says.
func SagaCompFails(runID, step string, attempt int, in SagaInput) bool {
	return step == in.CompExhaustStep || Injected(runID, workflow.CompensationPrefix+step, attempt, in.CompFailRate)
}

// SagaOutput is the output of a saga step, which its compensation checks.
type SagaOutput struct {
	Step    string `json:"step"`
	Attempt int    `json:"attempt"`
}

// CodeBadCompensation is the error code of a saga compensation that was not
// given what it undoes (StepContext.Compensation): a permanent failure, so
// the run ends compensation_failed, which the chaos suite reports.
const CodeBadCompensation = "bad_compensation_context"

// Saga returns the chaos suite's saga workflow (on_failure compensate):
// four steps whose bodies, and the compensations of the first and the
// third, sleep, fail as SagaInput says, and record in the audit list of
// queue (AuditKey) each phase of each execution: "start", then "ok" when the
// body returns success or "fail" when it returns an error, then "end". So a
// checker can tell from outside the engine which executions ran, which
// succeeded, and when. Charge and its compensation are behind the circuit
// breaker SagaBreaker, and charge has a short timeout (SagaChargeTimeout).
func Saga(rdb redis.UniversalClient, queue string, policy workflow.Policy) workflow.Definition {
	audit := auditor(rdb, queue)
	body := func(ctx context.Context, sc *workflow.StepContext) (out any, err error) {
		var in SagaInput
		if err := sc.DecodeInput(&in); err != nil {
			return nil, err
		}
		audit(ctx, "start", sc)
		defer func() {
			if err != nil {
				audit(ctx, "fail", sc)
			} else {
				audit(ctx, "ok", sc)
			}
			audit(ctx, "end", sc)
		}()
		sleep := in.SleepMS
		if sc.Step == SagaCharge || sc.Step == workflow.CompensationPrefix+SagaCharge {
			sleep = in.ChargeSleepMS
		}
		if err := pause(ctx, sleep); err != nil {
			return nil, err
		}
		if c := sc.Compensation; c != nil {
			return compensate(ctx, rdb, queue, sc, c, in)
		}
		if fails, permanent := SagaStepFails(sc.RunID, sc.Step, sc.Attempt, in); fails {
			err := fmt.Errorf("%s: injected failure on attempt %d", sc.Step, sc.Attempt)
			if permanent {
				return nil, workflow.Permanent(err)
			}
			return nil, err
		}
		return SagaOutput{Step: sc.Step, Attempt: sc.Attempt}, nil
	}
	compPolicy := workflow.Policy{MaxAttempts: SagaCompAttempts, InitialInterval: SagaCompRetryInterval / 2,
		MaxInterval: SagaCompRetryInterval}
	return workflow.Definition{
		Name: SagaName, Policy: policy, OnFailure: workflow.FailureCompensate,
		Steps: []workflow.Step{
			{Name: SagaReserve, Run: body, Compensate: body, CompensatePolicy: compPolicy},
			{Name: SagaQuote, Run: body},
			{Name: SagaCharge, Run: body, Compensate: body, CompensatePolicy: compPolicy,
				Policy: workflow.Policy{StepTimeout: SagaChargeTimeout, CircuitBreaker: &workflow.CircuitBreaker{
					Name: SagaBreaker, FailureThreshold: SagaBreakerThreshold, Window: 10 * time.Second,
					Cooldown: SagaBreakerCooldown, MaxCooldown: SagaBreakerMaxCooldown,
				}}},
			{Name: SagaShip, Run: body},
		},
	}
}

// compensate is the body of a saga compensation, after its audit start and
// pause: it checks it was given the step it undoes, waits for its release
// when the input says so, and fails as the input says.
func compensate(ctx context.Context, rdb redis.UniversalClient, queue string, sc *workflow.StepContext,
	c *workflow.Compensation, in SagaInput) (any, error) {
	var out SagaOutput
	if sc.Step != workflow.CompensationPrefix+c.Step || json.Unmarshal(c.Output, &out) != nil || out.Step != c.Step ||
		c.FailureCode == "" {
		return nil, workflow.WithCode(workflow.Permanent(fmt.Errorf("compensation %s was given %+v", sc.Step, c)),
			CodeBadCompensation)
	}
	if in.BlockComp == c.Step {
		if err := waitKey(ctx, rdb, ReleaseKey(queue, sc.RunID)); err != nil {
			return nil, err
		}
	}
	if SagaCompFails(sc.RunID, c.Step, sc.Attempt, in) {
		return nil, fmt.Errorf("%s: injected failure on attempt %d", sc.Step, sc.Attempt)
	}
	return map[string]any{"undone": c.Step, "attempt": sc.Attempt}, nil
}

// waitKey returns once key exists in Redis, or when ctx ends.
func waitKey(ctx context.Context, rdb redis.UniversalClient, key string) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		// An error (Redis away) is waited out, as the audit does.
		if n, err := rdb.Exists(ctx, key).Result(); err == nil && n == 1 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
