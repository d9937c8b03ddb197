package retrystate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The operations on a whole run: CreateRun (and CreateRuns), Cancel, the
// operator's actions (Operate, Restore), and ExpireDeadline, which the
// reconciler calls for a run past its deadline.

// NewRun describes a run to create: the params of CreateRun and CreateRuns.
type NewRun struct {
	ID             string
	Workflow       string
	Owner          string
	IdempotencyKey string // "" for none
	Input          string // JSON
	// Def is the version of the workflow's definition the run refers to
	// (DefinitionVersion.SHA, which names its template; "" for none). With
	// Def, the create is refused (OutcomeStale) when another version is
	// published.
	Def string
	// Template, when set (with Def), is the template Def names
	// (PublishedDefinition): the script copies the run's fixed fields from
	// the one in Redis instead of taking them from RunTimeout,
	// MaxIterations, Steps and Compensate, which then only describe the
	// first step (its name and timeout) and the Record of the new run.
	Template      map[string]string
	RunTimeout    time.Duration
	MaxIterations int
	Steps         []NewStep
	Now           time.Time
	// FirstTask, when set, is the asynq message (tasks.AsynqMessage) of
	// step 0's first task, <run>_s0_a1: the script writes that task with
	// the run (CreateResult.Enqueued), unless the run waits at a gate.
	FirstTask []byte
	// Gates: the ordering key ("" for none), in Owner's line unless
	// OrderingShared (StoredOrderingKey), with its concurrency (at least
	// 1) and whether a failed run blocks the key (on_failure: block), and
	// the workflow's max_running (0: none). See gates.go.
	OrderingKey    string
	OrderingShared bool
	OrderingLimit  int
	OrderingBlock  bool
	MaxRunning     int
	// Compensate: a run that fails for good runs the compensations of its
	// succeeded steps (on_failure: compensate). See sagas in
	// lua/lib/fail_run.lua.
	Compensate bool
	// Trace is the trace context to store with the run (the W3C
	// traceparent, then a newline and the tracestate, if any; "" for
	// none): every attempt's begin can read it (BeginParams.Trace).
	Trace string
}

// NewStep is the fixed part of a step record: what the run keeps of the
// step's definition.
type NewStep struct {
	Name        string
	Optional    bool
	MaxAttempts int
	MaxCrashes  int
	Timeout     time.Duration
	Policy      string // JSON of the effective policy
	// RunTimeout and MaxIterations are the run's limits while this step is
	// current (the step's effective policy: the most specific level wins);
	// zero for none. The run's deadline is its creation (or a recovery
	// past its deadline) plus RunTimeout.
	RunTimeout    time.Duration
	MaxIterations int
	// Kind is what the step does (KindBody: run its body); Signal the
	// signal an await waits for; Wait an await's timeout or a sleep's
	// duration.
	Kind   StepKind
	Signal string
	Wait   time.Duration
	// Breaker is the step's circuit breaker (nil: none).
	Breaker *BreakerSpec
	// Compensation is the step's compensation (nil: none): a step record
	// of its own, index CompBase + the step's (sagas in lua/lib/fail_run.lua).
	Compensation *NewCompensation
	// Group is the step's group ("" for none); GroupOptional: that group
	// is optional.
	Group         string
	GroupOptional bool
}

// NewCompensation is what a run keeps of a step's compensation: its name is
// CompensationPrefix + the step's.
type NewCompensation struct {
	MaxAttempts int
	MaxCrashes  int
	Timeout     time.Duration
	Policy      string // JSON of the effective policy
	Breaker     *BreakerSpec
}

// CompBase is the index of the step record of step 0's compensation: the
// compensation of step i is record CompBase+i (see sagas in
// lua/lib/fail_run.lua). It is part of the stored format; a workflow has fewer
// steps.
const CompBase = 1000

// CompensationPrefix prefixes the name of a compensation's step record and
// tasks: "compensate:<step>".
const CompensationPrefix = "compensate:"

// IsCompensation reports whether step index idx is a compensation's.
func IsCompensation(idx int) bool { return idx >= CompBase }

// CreateRun creates a run and makes its first step due (OutcomeCreated,
// with the first step's Dispatch; Enqueued when the script wrote its task,
// NewRun.FirstTask). With an idempotency key that already started a run, it
// writes nothing and returns that run's ID (OutcomeExists). With a
// definition version that is not the published one, it writes nothing
// (OutcomeStale, with the published version as Reason).
func (s *Store) CreateRun(ctx context.Context, r NewRun) (CreateResult, error) {
	res, errs := s.CreateRuns(ctx, []NewRun{r})
	return res[0], errs[0]
}

// CreateRuns creates runs as CreateRun does, in one pipelined round trip
// (three when Redis must load the script first). Each run has its own
// result or error. The store's first call also adds the queue to asynq's
// set of queues (in the same round trip), as asynq's enqueue would: the
// script writes the first tasks itself.
func (s *Store) CreateRuns(ctx context.Context, rs []NewRun) ([]CreateResult, []error) {
	out, errs := make([]CreateResult, len(rs)), make([]error, len(rs))
	type call struct {
		i       int
		keys    []string
		argv    []any
		evalsha *redis.Cmd
	}
	calls := make([]*call, 0, len(rs))
	for i, r := range rs {
		a, err := s.createArgs(r)
		if err != nil {
			errs[i] = err
			continue
		}
		keys, argv := a.args()
		calls = append(calls, &call{i: i, keys: keys, argv: argv})
	}
	for attempt := 0; len(calls) > 0 && attempt < 2; attempt++ {
		pipe := s.rdb.Pipeline()
		var queue *redis.IntCmd
		if !s.queueAdded.Load() {
			queue = pipe.SAdd(ctx, s.keys.asynqQueues(), s.keys.queue)
		}
		for _, c := range calls {
			c.evalsha = s.scripts.create.EvalSha(ctx, pipe, c.keys, c.argv...)
		}
		_, _ = pipe.Exec(ctx) // each command's error is its own
		if queue != nil && queue.Err() == nil {
			s.queueAdded.Store(true)
		}
		var again []*call
		for _, c := range calls {
			err := c.evalsha.Err()
			if err != nil && attempt == 0 && redisNoScript(err) {
				again = append(again, c)
				continue
			}
			var res []string
			if err == nil {
				res, err = toStrings(c.evalsha.Val())
			}
			out[c.i], errs[c.i] = createResult(s.created(rs[c.i], res, err))
		}
		if len(again) > 0 {
			if err := s.scripts.create.Load(ctx, s.rdb).Err(); err != nil {
				for _, c := range again {
					errs[c.i] = fmt.Errorf("create run: %w", err)
				}
				break
			}
		}
		calls = again
	}
	return out, errs
}

// redisNoScript tells whether err is Redis's NOSCRIPT: the script is not
// loaded (a restarted or failed-over server).
func redisNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// createArgs returns create.lua's KEYS and ARGV for r.
func (s *Store) createArgs(r NewRun) (createLua, error) {
	if len(r.Steps) == 0 {
		return createLua{}, errors.New("retrystate: a run needs at least one step")
	}
	if r.Template != nil && r.Def == "" {
		return createLua{}, errors.New("retrystate: a run created from a template needs its version (Def)")
	}
	a := createLua{runArgs: s.runArgs(r.ID, r.Now), Workflow: r.Workflow, Input: r.Input, Owner: r.Owner,
		IdemKey: r.IdempotencyKey, Def: r.Def,
		OrdKey:   StoredOrderingKey(r.Owner, r.OrderingKey, r.OrderingShared),
		OrdLimit: r.OrderingLimit, OrdBlock: boolArg(r.OrderingBlock), MaxRunning: r.MaxRunning,
		FirstMsg: r.FirstTask, Trace: r.Trace}
	if r.Template == nil {
		// A run of a template takes its fixed fields from it.
		a.RunTimeout, a.MaxIterations = r.RunTimeout.Milliseconds(), r.MaxIterations
		for i, st := range r.Steps {
			a.Steps = append(a.Steps, createStepLua{Name: st.Name, Optional: boolArg(st.Optional),
				MaxAttempts: st.MaxAttempts, MaxCrashes: st.MaxCrashes, Timeout: st.Timeout.Milliseconds(),
				Policy: st.Policy, RunTimeout: st.RunTimeout.Milliseconds(), MaxIterations: st.MaxIterations,
				Kind: string(st.Kind), Signal: st.Signal, Wait: st.Wait.Milliseconds(), Breaker: st.Breaker.encode()})
			if c := st.Compensation; c != nil {
				a.Comps = append(a.Comps, createCompLua{Index: i, MaxAttempts: c.MaxAttempts, MaxCrashes: c.MaxCrashes,
					Timeout: c.Timeout.Milliseconds(), Policy: c.Policy, Breaker: c.Breaker.encode()})
			}
			if st.Group != "" {
				a.Groups = append(a.Groups, createGroupLua{Index: i, Group: st.Group, Optional: boolArg(st.GroupOptional)})
			}
		}
		if r.Compensate {
			a.OnFailure = "compensate"
		}
	}
	task := ""
	if r.FirstTask != nil {
		task = r.ID + "_s0_a1"
	}
	a.Idem, a.LegacyIdem = s.keys.idempotencyNone(), s.keys.idempotencyNone()
	if r.IdempotencyKey != "" {
		a.Idem, a.LegacyIdem = s.keys.idempotency(r.Owner, r.IdempotencyKey), s.keys.legacyIdempotency(r.IdempotencyKey)
	}
	a.FirstTask, a.Pending = s.keys.asynqTask(task), s.keys.asynqPending()
	a.Seed = s.keys.idempotencyNone() // any key of the slot: a run without a template has no seed
	if r.Template != nil {
		a.Seed = s.keys.seed(r.Def, s.scripts.create.Hash())
	}
	return a, nil
}

// created decodes create.lua's reply (or error) for r.
func (s *Store) created(r NewRun, res []string, err error) (decoded, error) {
	if rerr, ok := errors.AsType[redis.Error](err); ok && strings.Contains(rerr.Error(), "cairn: run ID collision") {
		return decoded{}, fmt.Errorf("create run %s: %w", r.ID, ErrRunIDCollision)
	}
	if err != nil {
		return decoded{}, fmt.Errorf("create run: %w", err)
	}
	return decodeCreate(res, r.ID, r.Steps[0])
}

// CreateResult is what CreateRun did. Its Outcome is one of:
//
//   - OutcomeCreated: run RunID was created; Next is its first step's
//     dispatch (Enqueued when the script wrote its task,
//     NewRun.FirstTask), Task that dispatch's task ID.
//   - OutcomeWaiting: run RunID was created and waits, holding no worker
//     slot, in the line of one of its gates (GateWait).
//   - OutcomeExists: the idempotency key had started run RunID before;
//     nothing written.
//   - OutcomeStale: the definition version (NewRun.Def) is not the
//     published one, Published ("" when its template is missing); nothing
//     written.
type CreateResult struct {
	Outcome Outcome
	// RunID is the run created (OutcomeCreated, OutcomeWaiting) or the one
	// the idempotency key started (OutcomeExists).
	RunID string
	// Next is the first step's dispatch (OutcomeCreated).
	Next
	// Task is the first step's task ID (OutcomeCreated).
	Task string
	// GateWait is the run's place in its gate's line (OutcomeWaiting).
	GateWait
	// Published is the published definition version (OutcomeStale).
	Published string
}

var createOutcomes = []Outcome{OutcomeCreated, OutcomeWaiting, OutcomeExists, OutcomeStale}

func createResult(d decoded, err error) (CreateResult, error) {
	if d, err = accept("create", d, err, createOutcomes); err != nil {
		return CreateResult{}, err
	}
	return CreateResult{Outcome: d.Outcome, RunID: d.RunID, Next: d.next(), Task: d.Task, GateWait: d.gateWait(),
		Published: d.Reason}, nil
}

// CancelParams asks to cancel a run (lua/cancel.lua).
type CancelParams struct {
	RunID string
	// Actor is who cancels, as journaled.
	Actor string
	// Compensate: the run's succeeded steps are compensated (sagas) instead
	// of the run ending cancelled at once.
	Compensate bool
	// Retention of the run once it ended.
	Retention time.Duration
	Now       time.Time
}

// Cancel ends a pending or running run as cancelled (OutcomeCancelled). A
// run cancelled before is OutcomeAlreadyCancelled. It returns
// ErrRunNotFound for an unknown run, a *RunEndedError for one that ended
// otherwise, and a *RefusedError for one the cancel does not apply to.
func (s *Store) Cancel(ctx context.Context, a CancelParams) (CancelResult, error) {
	res, err := s.run(ctx, s.scripts.cancel, cancelLua{runArgs: s.runArgs(a.RunID, a.Now), Actor: a.Actor,
		Retention: a.Retention.Milliseconds(), Compensate: boolArg(a.Compensate)})
	if err != nil {
		return CancelResult{}, fmt.Errorf("cancel: %w", err)
	}
	return cancelResult(refusal(decodeCancel(res)))
}

// CancelResult is what Cancel did. Its Outcome is one of:
//
//   - OutcomeCancelled: this call cancelled the run; Task and StepStatus
//     are the current step's task ID and its status before.
//   - OutcomeCompensating (CancelParams.Compensate): the run was cancelled
//     and compensates now; the script wrote its first compensation's task.
//     Task and StepStatus are the cancelled step's, as for
//     OutcomeCancelled.
//   - OutcomeAlreadyCancelled: the run had been cancelled before
//     (RunStatus StatusCancelled), or, for a cancel with compensation, set
//     compensating (StatusCompensating).
//
// (A run that ended otherwise, or that the cancel does not apply to, is an
// error: see Cancel.)
type CancelResult struct {
	Outcome Outcome
	// Task and StepStatus are the current step's task ID and its status
	// before the cancel (OutcomeCancelled, OutcomeCompensating).
	Task       string
	StepStatus StepStatus
	// RunStatus is the run's status (OutcomeAlreadyCancelled).
	RunStatus RunStatus
}

var cancelOutcomes = []Outcome{OutcomeCancelled, OutcomeCompensating, OutcomeAlreadyCancelled}

func cancelResult(d decoded, err error) (CancelResult, error) {
	if d, err = accept("cancel", d, err, cancelOutcomes); err != nil {
		return CancelResult{}, err
	}
	return CancelResult{Outcome: d.Outcome, Task: d.Task, StepStatus: d.StepStatus, RunStatus: d.RunStatus}, nil
}

// refusal turns the outcomes an action's caller can only report into
// errors: OutcomeGone into ErrRunNotFound, outcomeRefused into a
// *RefusedError, OutcomeEnded into a *RunEndedError and outcomeMailboxFull
// into a *MailboxFullError.
func refusal(d decoded, err error) (decoded, error) {
	if err != nil {
		return decoded{}, err
	}
	switch d.Outcome {
	case OutcomeGone:
		return decoded{}, ErrRunNotFound
	case outcomeRefused:
		return decoded{}, &RefusedError{Reason: d.Reason}
	case OutcomeEnded:
		return decoded{}, &RunEndedError{Status: d.RunStatus}
	case outcomeMailboxFull:
		return decoded{}, &MailboxFullError{Pending: d.Pending}
	default:
		return d, nil
	}
}

// Operator actions.
const (
	ActionRecover = "recover"
	ActionRetry   = "retry"
	ActionSkip    = "skip"
)

// OperateParams is an operator action on a run (lua/operate.lua).
type OperateParams struct {
	RunID string
	// Action is ActionRecover, ActionRetry or ActionSkip.
	Action string
	// Step is the step retried or skipped ("" for ActionRecover).
	Step string
	// Actor is who acts, as journaled.
	Actor string
	// Retention of the run, if the action ends it (a skip of its last step).
	Retention time.Duration
	Now       time.Time
}

// Operate applies an operator action (ActionRecover, ActionRetry with a
// step, ActionSkip with a step). It returns ErrRunNotFound for an unknown
// run and a *RefusedError, with the reason, for a run the action does not
// apply to.
func (s *Store) Operate(ctx context.Context, a OperateParams) (OperateResult, error) {
	res, err := s.run(ctx, s.scripts.operate, operateLua{runArgs: s.runArgs(a.RunID, a.Now), Action: a.Action,
		StepName: a.Step, Actor: a.Actor, Retention: a.Retention.Milliseconds()})
	if err != nil {
		return OperateResult{}, fmt.Errorf("%s: %w", a.Action, err)
	}
	d, err := refusal(decodeAction(res, a.Action))
	return operateResult(a.Action, d, err)
}

// OperateResult is what Operate did. Its Outcome is one of:
//
//   - OutcomeDispatch: the run goes on with Dispatch, of a run of
//     Workflow: enqueue it.
//   - OutcomeRunSucceeded: that was a skip of the last step: the run
//     succeeded.
//   - OutcomeWaiting: the run waits, holding no worker slot, in the line
//     of one of its gates (GateWait).
//
// (An action that does not apply to the run is an error: see Operate.)
type OperateResult struct {
	Outcome Outcome
	// Dispatch is the task to enqueue, of a run of Workflow
	// (OutcomeDispatch).
	Dispatch *Dispatch
	Workflow string
	// GateWait is the run's place in its gate's line (OutcomeWaiting).
	GateWait
}

var operateOutcomes = []Outcome{OutcomeDispatch, OutcomeRunSucceeded, OutcomeWaiting}

func operateResult(op string, d decoded, err error) (OperateResult, error) {
	if d, err = accept(op, d, err, operateOutcomes); err != nil {
		return OperateResult{}, err
	}
	return OperateResult{Outcome: d.Outcome, Dispatch: d.Dispatch, Workflow: d.Workflow, GateWait: d.gateWait()}, nil
}

// ActionRestore is the action of Restore, as journaled and audited.
const ActionRestore = "restore"

// RestoreParams asks to reopen a finished run (lua/restore.lua).
type RestoreParams struct {
	RunID string
	// FromStep is the step the run starts again from.
	FromStep string
	// Actor is who restores, as journaled and audited.
	Actor string
	Now   time.Time
}

// Restore reopens a finished run from the checkpoint before step FromStep:
// earlier steps keep their outputs, FromStep and later steps start afresh,
// and FromStep is dispatched (see lua/restore.lua). The restore is recorded
// in the audit stream with Actor. It returns ErrRunNotFound for an unknown
// run and a *RefusedError, with the reason, for a run or step it does not
// apply to.
func (s *Store) Restore(ctx context.Context, a RestoreParams) (RestoreResult, error) {
	res, err := s.run(ctx, s.scripts.restore, restoreLua{runArgs: s.runArgs(a.RunID, a.Now), Audit: s.keys.audit(),
		FromStep: a.FromStep, Actor: a.Actor, AuditMaxLen: auditMaxLen})
	if err != nil {
		return RestoreResult{}, fmt.Errorf("restore: %w", err)
	}
	return restoreResult(refusal(decodeAction(res, ActionRestore)))
}

// RestoreResult is what Restore did: as OperateResult, whose fields it has,
// but for OutcomeRunSucceeded (a restored run has a step to run). Its
// Outcome is one of:
//
//   - OutcomeDispatch: the run goes on with Dispatch, of a run of
//     Workflow: enqueue it.
//   - OutcomeWaiting: the run waits, holding no worker slot, in the line
//     of one of its gates (GateWait).
//
// (A restore that does not apply to the run or the step is an error: see
// Restore.)
type RestoreResult struct {
	Outcome Outcome
	// Dispatch is the task to enqueue, of a run of Workflow
	// (OutcomeDispatch).
	Dispatch *Dispatch
	Workflow string
	// GateWait is the run's place in its gate's line (OutcomeWaiting).
	GateWait
}

var restoreOutcomes = []Outcome{OutcomeDispatch, OutcomeWaiting}

func restoreResult(d decoded, err error) (RestoreResult, error) {
	if d, err = accept(ActionRestore, d, err, restoreOutcomes); err != nil {
		return RestoreResult{}, err
	}
	return RestoreResult{Outcome: d.Outcome, Dispatch: d.Dispatch, Workflow: d.Workflow, GateWait: d.gateWait()}, nil
}

// ExpireParams asks to fail a run past its deadline (lua/timeout.lua).
type ExpireParams struct {
	RunID string
	// Retention of the run once it failed.
	Retention time.Duration
	Now       time.Time
}

// ExpireDeadline fails a run that passed its deadline with run_timeout
// (OutcomeRunFailed, kind deadline).
func (s *Store) ExpireDeadline(ctx context.Context, a ExpireParams) (ExpireResult, error) {
	res, err := s.run(ctx, s.scripts.timeout, timeoutLua{runArgs: s.runArgs(a.RunID, a.Now),
		Retention: a.Retention.Milliseconds()})
	if err != nil {
		return ExpireResult{}, fmt.Errorf("expire deadline: %w", err)
	}
	return expireResult(decodeTimeout(res))
}

// ExpireResult is what ExpireDeadline did. Its Outcome is one of:
//
//   - OutcomeRunFailed: the run failed with CodeRunTimeout (RunFailure;
//     Kind "deadline"); Task and StepStatus are the current step's task ID
//     and its status before, so its task can be deleted or its execution
//     cancelled.
//   - OutcomeNoop: nothing to do (Reason).
type ExpireResult struct {
	Outcome Outcome
	// Kind names the repair, "deadline" (OutcomeRunFailed).
	Kind string
	// RunFailure is the run's failure (OutcomeRunFailed).
	RunFailure
	// Task and StepStatus are the current step's task ID and its status
	// before (OutcomeRunFailed).
	Task       string
	StepStatus StepStatus
	// Reason says why nothing was done (OutcomeNoop).
	Reason string
}

var expireOutcomes = []Outcome{OutcomeRunFailed, OutcomeNoop}

func expireResult(d decoded, err error) (ExpireResult, error) {
	if d, err = accept("expire deadline", d, err, expireOutcomes); err != nil {
		return ExpireResult{}, err
	}
	r := ExpireResult{Outcome: d.Outcome, Kind: d.Kind, RunFailure: d.failure(), Task: d.Task,
		StepStatus: d.StepStatus}
	if d.Outcome == OutcomeNoop {
		r.Reason = d.Reason // (a failure's reason is RunFailure.Reason)
	}
	return r, nil
}
