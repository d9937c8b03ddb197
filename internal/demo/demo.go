// Package demo holds the demo workflow the worker registers: three steps,
// fetch, transform and deliver, whose failures are driven by the run input,
// for trying Cairn out and for its tests.
//
// Input fields:
//
//	fail_step      name of the step that fails ("fetch", "transform" or "deliver")
//	fail_times     that step fails transiently on its first N attempts
//	permanent      that step fails permanently instead
//	step_sleep_ms  every step sleeps this long first, honouring its context
//
// Failures depend only on the attempt number, so they repeat the same way
// across worker restarts.
package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// Name is the demo workflow's name.
const Name = "demo"

// Input is the demo workflow's input.
type Input struct {
	FailStep    string `json:"fail_step,omitempty"`
	FailTimes   int    `json:"fail_times,omitempty"`
	Permanent   bool   `json:"permanent,omitempty"`
	StepSleepMS int    `json:"step_sleep_ms,omitempty"`
}

// ErrInjected is the error of an injected failure.
var ErrInjected = errors.New("injected failure")

// Definition returns the demo workflow with the given policy.
func Definition(policy workflow.Policy) workflow.Definition {
	return workflow.Definition{
		Name:   Name,
		Policy: policy,
		Steps: []workflow.Step{
			{Name: "fetch", Run: fetch},
			{Name: "transform", Run: transform},
			{Name: "deliver", Run: deliver},
		},
	}
}

// prelude sleeps and injects the failure the input asks for.
func prelude(ctx context.Context, sc *workflow.StepContext) error {
	var in Input
	if err := sc.DecodeInput(&in); err != nil {
		return err
	}
	if in.StepSleepMS > 0 {
		t := time.NewTimer(time.Duration(in.StepSleepMS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	if in.FailStep == sc.Step {
		if in.Permanent {
			return workflow.Permanent(fmt.Errorf("%s: %w (permanent)", sc.Step, ErrInjected))
		}
		if sc.Attempt <= in.FailTimes {
			return fmt.Errorf("%s: %w on attempt %d of %d", sc.Step, ErrInjected, sc.Attempt, in.FailTimes)
		}
	}
	return nil
}

// FetchOutput is the output of the fetch step.
type FetchOutput struct {
	Items []int `json:"items"`
}

// TransformOutput is the output of the transform step.
type TransformOutput struct {
	Doubled []int `json:"doubled"`
	Sum     int   `json:"sum"`
}

// DeliverOutput is the output of the deliver step.
type DeliverOutput struct {
	Delivered      int    `json:"delivered"`
	IdempotencyKey string `json:"idempotency_key"`
}

func fetch(ctx context.Context, sc *workflow.StepContext) (any, error) {
	if err := prelude(ctx, sc); err != nil {
		return nil, err
	}
	return FetchOutput{Items: []int{1, 2, 3}}, nil
}

func transform(ctx context.Context, sc *workflow.StepContext) (any, error) {
	if err := prelude(ctx, sc); err != nil {
		return nil, err
	}
	var f FetchOutput
	if err := sc.DecodeOutput("fetch", &f); err != nil {
		return nil, err
	}
	out := TransformOutput{Doubled: make([]int, len(f.Items))}
	for i, x := range f.Items {
		out.Doubled[i] = 2 * x
		out.Sum += 2 * x
	}
	return out, nil
}

func deliver(ctx context.Context, sc *workflow.StepContext) (any, error) {
	if err := prelude(ctx, sc); err != nil {
		return nil, err
	}
	var t TransformOutput
	if err := sc.DecodeOutput("transform", &t); err != nil {
		return nil, err
	}
	return DeliverOutput{Delivered: len(t.Doubled), IdempotencyKey: sc.IdempotencyKey}, nil
}
