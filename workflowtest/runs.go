package workflowtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/cairnhq/cairn/workflow"
)

// Start starts a run of the named workflow with input (see
// workflow.Client.Start), runs until nothing is due (RunUntilIdle), and
// returns the run as it is then.
func (e *Env) Start(name string, input any, opts *workflow.StartOptions) (*workflow.Run, error) {
	run, err := e.cli.Start(e.ctx, name, input, opts)
	if err != nil {
		return nil, err
	}
	if err := e.RunUntilIdle(); err != nil {
		return nil, err
	}
	return e.Get(run.ID)
}

// Signal sends the signal name with payload to a run (see
// workflow.Client.Signal) and runs until nothing is due (RunUntilIdle): an
// await the signal completes lets the run go on.
func (e *Env) Signal(id, name string, payload any) (*workflow.SignalResult, error) {
	res, err := e.cli.Signal(e.ctx, id, name, payload, nil)
	if err != nil {
		return nil, err
	}
	return res, e.RunUntilIdle()
}

// Cancel cancels a run (see workflow.Client.Cancel), runs until nothing is
// due (with opts.Compensate, its compensations run), and returns the run as
// it is then.
func (e *Env) Cancel(id string, opts *workflow.ActionOptions) (*workflow.Run, error) {
	if _, err := e.cli.Cancel(e.ctx, id, opts); err != nil {
		return nil, err
	}
	if err := e.RunUntilIdle(); err != nil {
		return nil, err
	}
	return e.Get(id)
}

// Get returns a run with the state of each step (workflow.Client.Get).
func (e *Env) Get(id string) (*workflow.Run, error) { return e.cli.Get(e.ctx, id) }

// Events returns a run's journal, oldest first (workflow.Client.Events).
func (e *Env) Events(id string) ([]workflow.Event, error) { return e.cli.Events(e.ctx, id) }

// Output unmarshals the checkpointed output of a run's step into v. It
// returns an error when the step has no output (it has not succeeded, or
// the run has no such step).
func (e *Env) Output(id, step string, v any) error {
	run, err := e.Get(id)
	if err != nil {
		return err
	}
	s := run.Step(step)
	if s == nil {
		return fmt.Errorf("workflowtest: run %s has no step %q", id, step)
	}
	if len(s.Output) == 0 {
		return fmt.Errorf("workflowtest: step %q of run %s has no output (it is %s)", step, id, s.Status)
	}
	return json.Unmarshal(s.Output, v)
}

// RequireStatus fails the test unless the run's status is want, and
// returns the run. Its failure message tells the run's current step and
// failure, if any.
func (e *Env) RequireStatus(t testing.TB, id string, want workflow.RunStatus) *workflow.Run {
	t.Helper()
	run, err := e.Get(id)
	if err != nil {
		t.Fatalf("workflowtest: run %s: %v", id, err)
	}
	if run.Status != want {
		t.Fatalf("workflowtest: run %s is %s, want %s (current step %q, failure %q: %s)", id, run.Status, want,
			run.CurrentStep, run.FailureCode, run.FailureReason)
	}
	return run
}

// RequireOutput fails the test unless the run's step has an output, and
// unmarshals it into v.
func (e *Env) RequireOutput(t testing.TB, id, step string, v any) {
	t.Helper()
	if err := e.Output(id, step, v); err != nil {
		t.Fatal(err)
	}
}

// RequireEvent fails the test unless the run's journal has an event of type
// typ (for step, unless step is ""), and returns the last such event.
func (e *Env) RequireEvent(t testing.TB, id, typ, step string) workflow.Event {
	t.Helper()
	evs, err := e.Events(id)
	if err != nil {
		t.Fatalf("workflowtest: journal of run %s: %v", id, err)
	}
	if ev, ok := LastEvent(evs, typ, step); ok {
		return ev
	}
	t.Fatalf("workflowtest: run %s has no %s event for step %q; its journal:\n%s", id, typ, step, FormatEvents(evs))
	return workflow.Event{}
}

// LastEvent returns the last event of evs of type typ (for step, unless
// step is "").
func LastEvent(evs []workflow.Event, typ, step string) (workflow.Event, bool) {
	for _, ev := range slices.Backward(evs) {
		if ev.Type == typ && (step == "" || ev.Step == step) {
			return ev, true
		}
	}
	return workflow.Event{}, false
}

// FormatEvents formats a journal one event a line, "<type> <step>#<attempt>",
// for failure messages and Example outputs.
func FormatEvents(evs []workflow.Event) string {
	var b []byte
	for _, ev := range evs {
		b = append(b, ev.Type...)
		if ev.Step != "" {
			b = fmt.Appendf(b, " %s#%d", ev.Step, ev.Attempt)
		}
		b = append(b, '\n')
	}
	return string(b)
}
