package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/cairnhq/cairn/retrystate"
)

// StepFunc is the body of a step. It returns the step's output, which is
// checkpointed as JSON (so it must marshal with encoding/json) and passed to
// later steps; or an error, which is classified (see Classify) to decide
// whether the step is retried.
//
// A step runs at least once per attempt and may run again after a worker
// crash, so its effects should be idempotent: pass StepContext.IdempotencyKey
// to the services it calls. Its ctx ends at the step timeout, the run's
// deadline, or when the run is cancelled.
type StepFunc func(ctx context.Context, sc *StepContext) (any, error)

// Step is one named step of a workflow.
type Step struct {
	// Name is unique within the workflow: letters, digits, '.', '_' (at
	// most 64).
	Name string
	// Run is the step body. A step has exactly one of Run, Await and
	// Sleep.
	Run StepFunc
	// Await makes the step wait for a named signal (Client.Signal) without
	// holding a worker slot; its output is the signal's payload.
	Await *Await
	// Sleep makes the step wait for a time without holding a worker slot
	// (a durable timer); its output is null.
	Sleep *Sleep
	// Optional marks a step an operator may skip once it has failed.
	Optional bool
	// Policy overrides the workflow's policy for this step; unset fields
	// inherit.
	Policy Policy
	// Compensate, when set, undoes the step's effect: it runs (as its own
	// attempts, with its own retries) when the step succeeded and the run
	// then fails for good under OnFailure FailureCompensate, or a later
	// step of the step's group fails (Group). Its StepContext carries the
	// step's output and the run's failure (StepContext.Compensation); what
	// it returns is checkpointed as the compensation's output. Like a
	// step, it may run more than once: make it idempotent.
	Compensate StepFunc
	// CompensatePolicy overrides, for the compensation's attempts, the
	// step's effective policy; unset fields inherit it.
	CompensatePolicy Policy
	// Group names the step group the step belongs to: a group's steps
	// follow one another. A step of a group that fails for good rolls back
	// the group (see Group and Definition.Groups).
	Group string
}

// Definition is a workflow: a name, its ordered steps and its policy.
//
// A run keeps the step list and the effective policies it started with, even
// when the workers are redeployed with a changed definition.
type Definition struct {
	// Name identifies the workflow: letters, digits, '.', '_', '-' (at most
	// 64), starting with a letter or digit. Task IDs never contain it, so a
	// '-' does not reach asynqmon's task IDs.
	Name string
	// Steps run in order; each starts when the one before succeeds.
	Steps []Step
	// Policy applies to every step unless the step overrides it; unset
	// fields inherit the worker's defaults.
	Policy Policy
	// Ordering configures the runs started with an ordering key
	// (StartOptions.OrderingKey); nil: concurrency 1, on_failure block.
	Ordering *Ordering
	// MaxRunning, when positive, is how many runs of the workflow may be
	// active at once across all workers; the others wait, pending, in
	// start order. 0: no limit.
	MaxRunning int
	// OnFailure is what a run that fails for good does: FailureStop (""
	// too, the default) or FailureCompensate (a saga).
	OnFailure FailureAction
	// Inline, when set, lets a worker run a step's next step in the same
	// asynq task when the step succeeds and the next one is due at once and
	// registered on the worker (inline continuation): one script completes
	// the step and begins the next, with every guarantee of a step (fence,
	// heartbeat, journal, limits, crash recovery), and no task is enqueued
	// and dequeued between them. A delivery yields back to the queue after
	// MaxInlineSteps steps or MaxInlineTime. The default, one asynq task
	// per step attempt, spreads a run's steps over workers; inline runs
	// each step where the previous one ran. It is the worker's registered
	// definition that decides, whichever definition a run started with.
	Inline bool
	// Groups configures step groups by name (Step.Group); a group not
	// listed is required.
	Groups map[string]Group
}

// nameRE matches workflow names; stepNameRE step names, which have no '-'
// (a template reads a step's output as .steps.<name>).
var (
	NameRE     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	StepNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._]{0,63}$`)
)

// MaxSteps bounds the steps of a workflow. A run is one Redis hash holding
// every step's record, and an attempt reads the checkpoints of all earlier
// steps in one command.
const MaxSteps = 1000

// Validate checks the definition: a valid name, 1 to MaxSteps steps, unique
// valid step names, a body for each step, valid policies.
func (d *Definition) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w %q: "+format, append([]any{ErrInvalidDefinition, d.Name}, args...)...))
	}
	if !NameRE.MatchString(d.Name) {
		bad("name must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	if len(d.Steps) == 0 {
		bad("no steps")
	}
	if len(d.Steps) > MaxSteps {
		bad("%d steps; at most %d", len(d.Steps), MaxSteps)
	}
	if err := d.Policy.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w %q: %w", ErrInvalidDefinition, d.Name, err))
	}
	if err := d.validateGates(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, d.validateSagas()...)
	seen := make(map[string]bool, len(d.Steps))
	for i, s := range d.Steps {
		switch {
		case !StepNameRE.MatchString(s.Name):
			bad("step %d: name %q must be 1-64 letters, digits, '.' or '_'", i, s.Name)
		case seen[s.Name]:
			bad("step %d: duplicate step name %q", i, s.Name)
		}
		seen[s.Name] = true
		switch n := btoi(s.Run != nil) + btoi(s.Await != nil) + btoi(s.Sleep != nil); {
		case n == 0:
			bad("step %q has no Run function (nor Await or Sleep)", s.Name)
		case n > 1:
			bad("step %q has more than one of Run, Await and Sleep", s.Name)
		case s.Await != nil:
			if err := s.Await.validate(); err != nil {
				bad("step %q: %v", s.Name, err)
			}
		case s.Sleep != nil:
			if err := s.Sleep.validate(); err != nil {
				bad("step %q: %v", s.Name, err)
			}
		}
		if err := s.Policy.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w %q: step %q: %w", ErrInvalidDefinition, d.Name, s.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Snapshot is what a run keeps of its definition: the step list with each
// step's effective policy, resolved when a worker registered the
// definition. It is the JSON registered in Redis and copied into each run.
type Snapshot struct {
	Name   string         `json:"name"`
	Policy Policy         `json:"policy"` // workflow-level effective policy
	Steps  []SnapshotStep `json:"steps"`
	// Ordering is the effective ordering (concurrency and on_failure) of
	// runs started with an ordering key; MaxRunning the workflow's limit.
	Ordering   *Ordering `json:"ordering,omitempty"`
	MaxRunning int       `json:"max_running,omitempty"`
	// OnFailure is "compensate" for a saga ("" otherwise); Groups the
	// optional groups' settings.
	OnFailure FailureAction    `json:"on_failure,omitempty"`
	Groups    map[string]Group `json:"groups,omitempty"`
}

// SnapshotStep is a step of a Snapshot.
type SnapshotStep struct {
	Name     string `json:"name"`
	Optional bool   `json:"optional,omitempty"`
	Policy   Policy `json:"policy"` // effective
	// Kind, Signal and Wait describe an await or a sleep (see
	// retrystate.NewStep); empty for a step with a body.
	Kind   retrystate.StepKind `json:"kind,omitempty"`
	Signal string              `json:"signal,omitempty"`
	Wait   time.Duration       `json:"wait,omitempty"`
	// Compensate is the effective policy of the step's compensation; nil:
	// the step has none. Group is the step's group ("" for none).
	Compensate *Policy `json:"compensate,omitempty"`
	Group      string  `json:"group,omitempty"`
}

// ValidateEffective checks the policies in force after precedence: each
// level may be valid alone and invalid together (an initial interval from
// the workflow above a max interval from the defaults).
func (s Snapshot) ValidateEffective() error {
	var errs []error
	if err := s.Policy.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w %q: effective policy: %w", ErrInvalidDefinition, s.Name, err))
	}
	for _, st := range s.Steps {
		if err := st.Policy.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w %q: step %q: effective policy: %w", ErrInvalidDefinition, s.Name, st.Name, err))
		}
		if st.Compensate != nil {
			if err := st.Compensate.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("%w %q: step %q: compensation's effective policy: %w", ErrInvalidDefinition, s.Name, st.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Published is what Publish writes of the snapshot s: its JSON and the
// template of its runs.
func (s Snapshot) Published() (retrystate.PublishedDefinition, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return retrystate.PublishedDefinition{}, err
	}
	run, err := s.RunTemplate()
	if err != nil {
		return retrystate.PublishedDefinition{}, err
	}
	return retrystate.PublishedDefinition{Name: s.Name, JSON: string(b), Run: run}, nil
}

// Resolve validates d and returns its snapshot under the global defaults,
// as Register keeps it.
func Resolve(d *Definition, global Policy) (Snapshot, error) {
	if err := d.Validate(); err != nil {
		return Snapshot{}, err
	}
	s := d.resolve(global)
	if err := s.ValidateEffective(); err != nil {
		return Snapshot{}, err
	}
	return s, nil
}

// resolve computes the snapshot of d under the global defaults.
func (d *Definition) resolve(global Policy) Snapshot {
	wf := d.Policy.Or(global).Or(DefaultPolicy())
	ord := EffectiveOrdering(d.Ordering)
	s := Snapshot{Name: d.Name, Policy: wf, Steps: make([]SnapshotStep, len(d.Steps)), Ordering: &ord,
		MaxRunning: d.MaxRunning, Groups: d.Groups}
	if d.OnFailure == FailureCompensate {
		s.OnFailure = FailureCompensate
	}
	for i, st := range d.Steps {
		s.Steps[i] = SnapshotStep{Name: st.Name, Optional: st.Optional, Policy: st.Policy.Or(wf), Group: st.Group}
		s.Steps[i].Kind, s.Steps[i].Signal, s.Steps[i].Wait = st.waits()
		if st.Compensate != nil {
			cp := st.CompensatePolicy.Or(s.Steps[i].Policy)
			s.Steps[i].Compensate = &cp
		}
	}
	return s
}

// RunTemplate returns the fixed part of a run of the snapshot: its limits,
// steps (with their compensations and groups) and on_failure, from which
// the run's fixed fields are made (by retrystate).
func (s Snapshot) RunTemplate() (retrystate.NewRun, error) {
	nr := retrystate.NewRun{Workflow: s.Name, RunTimeout: s.Policy.RunTimeout, MaxIterations: s.Policy.MaxIterations,
		MaxRunning: s.MaxRunning, Compensate: s.OnFailure == FailureCompensate}
	for _, st := range s.Steps {
		pol, err := json.Marshal(st.Policy)
		if err != nil {
			return retrystate.NewRun{}, err
		}
		ns := retrystate.NewStep{Name: st.Name, Optional: st.Optional,
			MaxAttempts: st.Policy.MaxAttempts, MaxCrashes: st.Policy.MaxCrashes, Timeout: st.Policy.StepTimeout,
			Policy: string(pol), RunTimeout: st.Policy.RunTimeout, MaxIterations: st.Policy.MaxIterations,
			Kind: st.Kind, Signal: st.Signal, Wait: st.Wait, Breaker: BreakerSpec(st.Policy),
			Group: st.Group, GroupOptional: st.Group != "" && s.Groups[st.Group].Optional}
		if c := st.Compensate; c != nil {
			cpol, err := json.Marshal(c)
			if err != nil {
				return retrystate.NewRun{}, err
			}
			ns.Compensation = &retrystate.NewCompensation{MaxAttempts: c.MaxAttempts, MaxCrashes: c.MaxCrashes,
				Timeout: c.StepTimeout, Policy: string(cpol), Breaker: BreakerSpec(*c)}
		}
		nr.Steps = append(nr.Steps, ns)
	}
	return nr, nil
}

// ParseSnapshot reads a published definition's snapshot.
func ParseSnapshot(b string) (Snapshot, error) {
	var s Snapshot
	if err := json.Unmarshal([]byte(b), &s); err != nil {
		return Snapshot{}, fmt.Errorf("%w: stored definition: %v", ErrInvalidDefinition, err) //nolint:errorlint // the sentinel is the error's identity; the cause is only its text, not part of what callers match
	}
	if len(s.Steps) == 0 {
		return Snapshot{}, fmt.Errorf("%w: stored definition %q has no steps", ErrInvalidDefinition, s.Name)
	}
	return s, nil
}

// StepContext is what a step body knows about its run and attempt.
type StepContext struct {
	// RunID, Workflow, Step and Index identify the step.
	RunID    string
	Workflow string
	Step     string
	Index    int
	// Attempt is the attempt number of the step (1 for the first). Numbers
	// are never reused within a run, so an operator's retry continues from
	// the last one.
	Attempt int
	// IdempotencyKey is "<run>:<step>:<attempt>": the same for every
	// execution of this attempt (a resume after a crash included), different
	// for each attempt. Pass it to downstream services.
	IdempotencyKey string
	// Input is the run's input JSON.
	Input json.RawMessage
	// Compensation is set when this is a compensation (Step.Compensate):
	// the step it undoes, that step's output, and the run's failure. Step
	// and Index are then the compensation's ("compensate:<step>").
	Compensation *Compensation

	log     LineLogger
	logOnce sync.Once
	logger  *slog.Logger
	outputs map[string]json.RawMessage
}

// SetStepRuntime gives sc what the engine provides a step body beyond its
// fields: the logger of its lines (with the run, step and attempt) and
// the checkpointed outputs of the earlier steps, by step name.
func SetStepRuntime(sc *StepContext, log LineLogger, outputs map[string]json.RawMessage) {
	sc.log, sc.outputs = log, outputs
}

// Logger returns a logger whose lines carry the run ID, workflow, step and
// attempt.
func (sc *StepContext) Logger() *slog.Logger {
	sc.logOnce.Do(func() {
		if sc.log.L == nil {
			sc.logger = slog.Default()
			return
		}
		sc.logger = sc.log.Logger()
	})
	return sc.logger
}

// DecodeInput unmarshals the run input into v.
func (sc *StepContext) DecodeInput(v any) error {
	if err := json.Unmarshal(sc.Input, v); err != nil {
		return Permanent(fmt.Errorf("decode run input: %w", err))
	}
	return nil
}

// Output returns the checkpointed output of an earlier step, and whether
// that step produced one.
func (sc *StepContext) Output(step string) (json.RawMessage, bool) {
	o, ok := sc.outputs[step]
	return o, ok
}

// DecodeOutput unmarshals an earlier step's output into v.
func (sc *StepContext) DecodeOutput(step string, v any) error {
	o, ok := sc.outputs[step]
	if !ok {
		return Permanent(fmt.Errorf("step %q has no output", step))
	}
	if err := json.Unmarshal(o, v); err != nil {
		return Permanent(fmt.Errorf("decode output of step %q: %w", step, err))
	}
	return nil
}

// IdempotencyKey returns the idempotency key of an attempt.
func IdempotencyKey(runID, step string, attempt int) string {
	return fmt.Sprintf("%s:%s:%d", runID, step, attempt)
}
