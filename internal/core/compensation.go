package core

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/cairnhq/cairn/retrystate"
)

// FailureAction is what a run does when it fails for good (Definition.OnFailure).
type FailureAction string

// Failure actions.
const (
	// FailureStop (the default): the run fails and waits for an operator.
	FailureStop FailureAction = "stop"
	// FailureCompensate: the compensations of the run's succeeded steps
	// run, last step first (a saga); the run is StatusCompensating, then
	// StatusCompensated, keeping its failure code and reason. A
	// compensation that fails for good leaves the run failed, needing
	// attention, with code CodeCompensationFailed; an operator's recover
	// or retry runs that compensation again.
	FailureCompensate FailureAction = "compensate"
)

// Group configures a step group (Step.Group, Definition.Groups).
type Group struct {
	// Optional: when a step of the group fails for good, the group's
	// succeeded steps are compensated, last first, and the run continues
	// after the group (journaled group_rolled_back). A required group
	// (the default) compensates its succeeded steps the same way and then
	// the failure goes on to the workflow's OnFailure.
	Optional bool `json:"optional,omitempty"`
}

// Compensation is what a compensation knows of the step it undoes and of the
// failure that made it run (StepContext.Compensation).
type Compensation struct {
	// Step is the name of the step being compensated; its checkpointed
	// output is Output (and StepContext.Output(Step)).
	Step   string
	Output json.RawMessage
	// FailureCode and FailureReason are the run's failure: the code and
	// reason the run fails (or failed) with ("cancelled" for a cancel with
	// compensation).
	FailureCode   string
	FailureReason string
}

// CompensationPrefix prefixes the task name of a compensation: the
// compensation of step "charge" runs as tasks of step "compensate:charge"
// (a name no step can have, as step names hold no ':').
const CompensationPrefix = retrystate.CompensationPrefix

var groupNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// validateSagas checks on_failure, the step groups and the compensations.
func (d *Definition) validateSagas() []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w %q: "+format, append([]any{ErrInvalidDefinition, d.Name}, args...)...))
	}
	switch d.OnFailure {
	case "", FailureStop, FailureCompensate:
	default:
		bad("on_failure %q: must be %q or %q", d.OnFailure, FailureStop, FailureCompensate)
	}
	last := map[string]int{} // group -> index of its last step so far
	for i, s := range d.Steps {
		if s.Compensate != nil && s.Run == nil {
			bad("step %q: only a step with a Run function can have a compensation (an await or a sleep has nothing to undo)", s.Name)
		}
		if s.Compensate == nil && !s.CompensatePolicy.isZero() {
			bad("step %q: CompensatePolicy without Compensate", s.Name)
		}
		if err := s.CompensatePolicy.Validate(); err != nil {
			bad("step %q: compensation policy: %v", s.Name, err)
		}
		if s.Group == "" {
			continue
		}
		if !groupNameRE.MatchString(s.Group) {
			bad("step %q: group name %q must be 1-64 letters, digits, '.', '_' or '-'", s.Name, s.Group)
			continue
		}
		if j, seen := last[s.Group]; seen && j != i-1 {
			bad("step %q: group %q is not contiguous (its steps must follow one another)", s.Name, s.Group)
		}
		last[s.Group] = i
	}
	for _, g := range slices.Sorted(maps.Keys(d.Groups)) {
		if _, used := last[g]; !used {
			bad("groups: %q is configured but no step is in it", g)
		}
	}
	return errs
}

// isZero reports whether p sets nothing.
func (p Policy) isZero() bool {
	b, err := json.Marshal(p)
	return err == nil && string(b) == "{}"
}
