package retrystate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store reads and writes the workflow state of one queue.
type Store struct {
	rdb     redis.UniversalClient
	keys    keys
	scripts scripts
	// templates holds the definition templates read (definitions.go), by
	// version: they never change.
	templates sync.Map
	// queueAdded: this store added its queue to asynq's set of queues
	// (CreateRuns), as asynq's own enqueue does.
	queueAdded atomic.Bool
}

// New returns the Store of queue on rdb.
func New(rdb redis.UniversalClient, queue string) *Store {
	return &Store{rdb: rdb, keys: newKeys(queue), scripts: loadScripts()}
}

// runArgs returns the run-level arguments of a script acting on run runID
// (args.go).
func (s *Store) runArgs(runID string, now time.Time) runArgs {
	return runArgs{Run: s.keys.run(runID), RunID: runID, Prefix: s.keys.prefix, Now: ms(now)}
}

// run runs script sc with the KEYS and ARGV of a.
func (s *Store) run(ctx context.Context, sc *redis.Script, a luaArgs) ([]string, error) {
	keys, argv := a.args()
	res, err := sc.Run(ctx, s.rdb, keys, argv...).Result()
	if err != nil {
		return nil, err
	}
	return toStrings(res)
}

// RegisterDefinitions publishes workflow definitions (name -> JSON) so that
// clients without the workflow code (the CLI, the dashboard) can start runs,
// as workers did before definitions had versions: without a version or a
// template, so the runs started from them carry their fixed fields
// themselves and are never compacted. Workers publish with
// PublishDefinitions.
func (s *Store) RegisterDefinitions(ctx context.Context, defs map[string]string) error {
	if len(defs) == 0 {
		return nil
	}
	vals := make([]any, 0, 2*len(defs))
	for name, def := range defs {
		vals = append(vals, name, def)
	}
	return s.rdb.HSet(ctx, s.keys.definitions(), vals...).Err()
}

// Definition returns the registered definition JSON of a workflow, or
// ErrUnknownWorkflow.
func (s *Store) Definition(ctx context.Context, name string) (string, error) {
	def, err := s.rdb.HGet(ctx, s.keys.definitions(), name).Result()
	if errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("%w %q", ErrUnknownWorkflow, name)
	}
	return def, err
}

// Definitions returns every registered definition, by workflow name.
func (s *Store) Definitions(ctx context.Context) (map[string]string, error) {
	return s.rdb.HGetAll(ctx, s.keys.definitions()).Result()
}

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

// Dispatch names the task that must exist for a step to make progress.
type Dispatch struct {
	Index   int
	Name    string
	Attempt int
	Gen     int
	DueAt   time.Time // zero: due now
	Timeout time.Duration
}

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

// BeginParams identifies a delivery of a step attempt's task.
type BeginParams struct {
	RunID     string
	Index     int
	TaskID    string
	Token     string // fence token, unique to this delivery
	FenceTTL  time.Duration
	Retention time.Duration
	Now       time.Time
	// Trace asks for the trace context stored with the run
	// (Started.Trace); a caller that does not trace leaves it unread.
	Trace bool
}

// Checkpoint is the stored output of a step.
type Checkpoint struct {
	Name   string
	Output string // JSON; "" for a step that produced none (skipped)
}

// Begin starts an attempt for a delivered task (OutcomeOK, with Started),
// or tells the caller why not (see the Outcome constants of begin).
func (s *Store) Begin(ctx context.Context, a BeginParams) (BeginResult, error) {
	args := beginLua{runArgs: s.runArgs(a.RunID, a.Now), Task: a.TaskID, Token: a.Token,
		FenceTTL: a.FenceTTL.Milliseconds(), Index: a.Index, Retention: a.Retention.Milliseconds()}
	if a.Trace {
		args.Trace = "1"
	}
	res, err := s.run(ctx, s.scripts.begin, args)
	if err != nil {
		return BeginResult{}, fmt.Errorf("begin: %w", err)
	}
	return beginResult(decodeBegin(res, a.Index, a.Trace))
}

// CompleteParams checkpoints a step's output.
type CompleteParams struct {
	RunID     string
	Index     int
	Token     string
	Output    string // JSON
	Retention time.Duration
	Now       time.Time
	// NextTaskID and NextMessage, when set, are the task ID and the asynq
	// message (tasks.AsynqMessage) of the next step's first dispatch, as
	// Started.Next predicted it: the script creates that task with the
	// checkpoint when the prediction holds.
	NextTaskID  string
	NextMessage []byte
	// InlineToken, when set, asks the script to begin the next step itself
	// under this fence token, for FenceTTL, instead of writing its task
	// (inline continuation): OutcomeInline when it did.
	InlineToken string
	FenceTTL    time.Duration
}

// Complete stores a step's output, clears its retry metadata and advances
// the run; fenced by the attempt's token.
func (s *Store) Complete(ctx context.Context, a CompleteParams) (CompleteResult, error) {
	script, decode := s.scripts.complete, decodeComplete
	if IsCompensation(a.Index) {
		// A compensation's complete goes on with the saga (compdone.lua);
		// complete.lua's hot path knows nothing of sagas.
		script, decode = s.scripts.compdone, decodeCompDone
	}
	res, err := s.run(ctx, script, completeLua{runArgs: s.runArgs(a.RunID, a.Now),
		NextTask: s.keys.asynqTask(a.NextTaskID), Pending: s.keys.asynqPending(), Token: a.Token, Index: a.Index,
		Output: a.Output, Retention: a.Retention.Milliseconds(), NextID: a.NextTaskID, NextMsg: a.NextMessage,
		InlineToken: a.InlineToken, InlineTTL: a.FenceTTL.Milliseconds()})
	if err != nil {
		return CompleteResult{}, fmt.Errorf("complete: %w", err)
	}
	return completeResult(decode(res))
}

// FailParams records a failed attempt.
type FailParams struct {
	RunID     string
	Index     int
	Token     string
	Error     string
	Class     string // ClassTransient or ClassPermanent
	Code      string // the error's code, "" for none
	Delay     time.Duration
	Retention time.Duration
	Now       time.Time
	// RetryTaskID and RetryMessage, when set, are the task ID and the
	// asynq message (tasks.AsynqMessage) the caller expects the retry to
	// get: the script writes that task with the retry when the prediction
	// holds.
	RetryTaskID  string
	RetryMessage []byte
}

// Fail records a failed attempt: for a transient error with budget left it
// schedules the next attempt after Delay; otherwise the run fails, needing
// attention. Fenced by the attempt's token.
func (s *Store) Fail(ctx context.Context, a FailParams) (FailResult, error) {
	res, err := s.run(ctx, s.scripts.fail, failLua{runArgs: s.runArgs(a.RunID, a.Now),
		RetryTask: s.keys.asynqTask(a.RetryTaskID), Pending: s.keys.asynqPending(), Scheduled: s.keys.asynqScheduled(),
		Token: a.Token, Index: a.Index, Message: a.Error, Class: a.Class, Delay: a.Delay.Milliseconds(),
		Retention: a.Retention.Milliseconds(), Code: a.Code, RetryID: a.RetryTaskID, RetryMsg: a.RetryMessage})
	if err != nil {
		return FailResult{}, fmt.Errorf("fail: %w", err)
	}
	return failResult(decodeFail(res, a.Index))
}

// SnoozeParams asks for the next visit of a running attempt after Delay
// (workflow.Snooze).
type SnoozeParams struct {
	RunID     string
	Index     int
	Token     string
	Delay     time.Duration
	Retention time.Duration
	Now       time.Time
	// TaskID and Message, when set, are the task ID and the asynq message
	// (tasks.AsynqMessage) the caller expects the next visit to get (the
	// same attempt, the next gen): the script writes that task, scheduled
	// for its due time, when the prediction holds.
	TaskID  string
	Message []byte
}

// Snooze records that a running attempt's body asked to run again after
// Delay: the step is pending again under a new dispatch of the same
// attempt, due at Now+Delay, spending no retry budget (OutcomeSnoozed). A
// visit due at or after the run's deadline fails the run (OutcomeRunFailed,
// run_timeout). Fenced by the attempt's token; a snooze applied before whose
// reply was lost answers OutcomeDone.
func (s *Store) Snooze(ctx context.Context, a SnoozeParams) (SnoozeResult, error) {
	res, err := s.run(ctx, s.scripts.snooze, snoozeLua{runArgs: s.runArgs(a.RunID, a.Now),
		NextTask: s.keys.asynqTask(a.TaskID), Pending: s.keys.asynqPending(), Scheduled: s.keys.asynqScheduled(),
		Token: a.Token, Index: a.Index, Delay: a.Delay.Milliseconds(), NextID: a.TaskID, NextMsg: a.Message,
		Retention: a.Retention.Milliseconds()})
	if err != nil {
		return SnoozeResult{}, fmt.Errorf("snooze: %w", err)
	}
	return snoozeResult(decodeSnooze(res))
}

// GotoParams asks a running attempt's run to continue at step Target
// (workflow.Goto).
type GotoParams struct {
	RunID     string
	Index     int
	Token     string
	Target    string
	Retention time.Duration
	Now       time.Time
	// TaskID and Message, when set, are the task ID and the asynq message
	// the caller expects the target's new attempt to get: the script writes
	// that task, due now, when the prediction holds.
	TaskID  string
	Message []byte
}

// Goto records that a running attempt's body asked to continue at an
// earlier step, or its own: the checkpoints from the target on are
// superseded (kept in the journal) and the target gets a new attempt, due
// now (OutcomeGoto). A target that is not this step or an earlier one fails
// the run (OutcomeRunFailed, invalid_goto). Fenced by the attempt's token; a
// goto applied before whose reply was lost answers OutcomeDone.
func (s *Store) Goto(ctx context.Context, a GotoParams) (GotoResult, error) {
	res, err := s.run(ctx, s.scripts.jump, gotoLua{runArgs: s.runArgs(a.RunID, a.Now),
		NextTask: s.keys.asynqTask(a.TaskID), Pending: s.keys.asynqPending(), Token: a.Token, Index: a.Index,
		TargetName: a.Target, NextID: a.TaskID, NextMsg: a.Message, Retention: a.Retention.Milliseconds()})
	if err != nil {
		return GotoResult{}, fmt.Errorf("goto: %w", err)
	}
	return gotoResult(decodeGoto(res))
}

// ReleaseParams hands back an attempt its worker stopped because it could not
// renew the attempt's fence.
type ReleaseParams struct {
	RunID string
	Index int
	Token string
	Now   time.Time
	// TaskID and Message, when set, are the task ID and the asynq message
	// (tasks.AsynqMessage) the caller expects the new dispatch to get: the
	// script writes that task when the prediction holds.
	TaskID  string
	Message []byte
}

// Release hands back a running attempt whose worker stopped it because it
// could not renew its fence (Redis unreachable): neither a crash nor a
// failed attempt. The attempt resumes under a new dispatch, due now, and the
// run is notified (run_recovered, by worker, kind interrupted_attempt).
// Fenced by the attempt's token.
func (s *Store) Release(ctx context.Context, a ReleaseParams) (ReleaseResult, error) {
	res, err := s.run(ctx, s.scripts.release, releaseLua{runArgs: s.runArgs(a.RunID, a.Now),
		NextTask: s.keys.asynqTask(a.TaskID), Pending: s.keys.asynqPending(), Token: a.Token, Index: a.Index,
		NextID: a.TaskID, NextMsg: a.Message})
	if err != nil {
		return ReleaseResult{}, fmt.Errorf("release: %w", err)
	}
	return releaseResult(decodeRelease(res))
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

// Renewal is the answer to a fence renewal.
type Renewal int

// Renewal outcomes.
const (
	Renewed    Renewal = 1
	FenceLost  Renewal = 0
	RunStopped Renewal = -1 // the run is no longer running (cancelled, failed, gone)
)

// RenewParams asks to extend the fence of a running attempt (lua/renew.lua).
type RenewParams struct {
	RunID string
	Index int
	// Token is the attempt's fence token (BeginParams.Token).
	Token string
	// TTL: the fence expires at Now+TTL.
	TTL time.Duration
	Now time.Time
}

// Renew extends the fence of a running attempt to Now+TTL.
func (s *Store) Renew(ctx context.Context, a RenewParams) (Renewal, error) {
	keys, argv := renewLua{Run: s.keys.run(a.RunID), Fences: s.keys.fences(), Token: a.Token, Now: ms(a.Now),
		TTL: a.TTL.Milliseconds(), RunID: a.RunID, Index: a.Index}.args()
	n, err := s.scripts.renew.Run(ctx, s.rdb, keys, argv...).Int64()
	if err != nil {
		return FenceLost, fmt.Errorf("renew: %w", err)
	}
	return decodeRenewal(n)
}

// Run returns a run with its steps, read at one instant, or ErrRunNotFound.
func (s *Store) Run(ctx context.Context, id string) (*Run, error) {
	// One command: the run and its steps are one hash, read at one instant.
	h, err := s.rdb.HGetAll(ctx, s.keys.run(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("read run: %w", err)
	}
	if len(h) == 0 {
		return nil, ErrRunNotFound
	}
	if err := s.fillCompact(ctx, id, h); err != nil {
		return nil, fmt.Errorf("read run: %w", err)
	}
	r := recordFromHash(id, h)
	if r.Waiting != "" {
		g := r.waitGate()
		pipe := s.rdb.Pipeline()
		rank := pipe.ZRank(ctx, s.keys.gateWait(g), id)
		var held *redis.StringSliceCmd
		if r.Waiting == WaitOrderingKey {
			held = pipe.ZRange(ctx, s.keys.gateAdmitted(g), 0, maxHeldBy-1)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("read run: %w", err)
		}
		if pos, err := rank.Result(); err == nil {
			r.Position = int(pos) + 1
		}
		if held != nil {
			r.HeldBy = held.Val()
		}
	}
	return r, nil
}

// ListQuery selects runs, newest first.
type ListQuery struct {
	Status RunStatus // "" for every status
	Limit  int       // default 50, at most 1000
	Cursor string    // from the previous page; "" for the first
	// Owner and Workflow, when set, keep only the runs of that owner and
	// workflow. A filtered listing examines a bounded number of index
	// entries per page (see scanRuns): a page may then hold fewer than
	// Limit runs, or none, with a next cursor to go on from.
	Owner    string
	Workflow string
}

// ListRuns returns a page of runs (without their steps) and the cursor of
// the next page ("" after the last).
func (s *Store) ListRuns(ctx context.Context, q ListQuery) ([]*Run, string, error) {
	if q.Owner != "" || q.Workflow != "" {
		return s.listFiltered(ctx, q)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	idx := s.keys.all()
	if q.Status != "" {
		idx = s.keys.byStatus(q.Status)
	}
	// The cursor is "<created ms>:<run ID>" of the last run of the previous
	// page. Runs created in the same millisecond sort by ID, descending.
	maxScore, afterID := "+inf", ""
	if q.Cursor != "" {
		score, id, ok := splitCursor(q.Cursor)
		if !ok {
			return nil, "", ErrBadCursor
		}
		maxScore, afterID = strconv.FormatInt(score, 10), id
	}
	var ids []indexEntry
	for offset := int64(0); len(ids) < limit+1; {
		page, err := s.rdb.ZRevRangeByScoreWithScores(ctx, idx, &redis.ZRangeBy{
			Max: maxScore, Min: "-inf", Offset: offset, Count: int64(limit + 1),
		}).Result()
		if err != nil {
			return nil, "", err
		}
		entries, err := indexEntries(page)
		if err != nil {
			return nil, "", err
		}
		for _, z := range entries {
			if afterID != "" && strconv.FormatInt(int64(z.Score), 10) == maxScore && z.ID >= afterID {
				continue
			}
			ids = append(ids, z)
		}
		if len(page) < limit+1 {
			break
		}
		offset += int64(len(page))
	}
	next := ""
	if len(ids) > limit {
		last := ids[limit-1]
		next = fmt.Sprintf("%d:%s", int64(last.Score), last.ID)
		ids = ids[:limit]
	}
	runs, err := s.runHeads(ctx, ids)
	if err != nil {
		return nil, "", err
	}
	return runs, next, nil
}

func splitCursor(c string) (int64, string, bool) {
	for i := range len(c) {
		if c[i] == ':' {
			n, err := strconv.ParseInt(c[:i], 10, 64)
			if err != nil || i+1 >= len(c) {
				return 0, "", false
			}
			return n, c[i+1:], true
		}
	}
	return 0, "", false
}

// Journal returns a run's journal, oldest first, or ErrRunNotFound.
func (s *Store) Journal(ctx context.Context, id string) ([]Entry, error) {
	pipe := s.rdb.Pipeline()
	head := pipe.HMGet(ctx, s.keys.run(id), "status", "jn")
	xs := pipe.XRange(ctx, s.keys.journal(id), "-", "+")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	hv := head.Val()
	if len(hv) < 2 || hv[0] == nil {
		return nil, ErrRunNotFound
	}
	// A compact run's journal starts in its hash (compact.go).
	jn, _ := hv[1].(string)
	out, err := s.movedJournal(ctx, id, jn)
	if err != nil {
		return nil, err
	}
	for _, x := range xs.Val() {
		out = append(out, parseEntry(x.ID, x.Values))
	}
	return out, nil
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func toStrings(res any) ([]string, error) {
	arr, ok := res.([]any)
	if !ok || len(arr) == 0 {
		return nil, fmt.Errorf("%w: %v", ErrUnexpectedReply, res)
	}
	out := make([]string, len(arr))
	for i, v := range arr {
		switch x := v.(type) {
		case string:
			out[i] = x
		case int64:
			out[i] = strconv.FormatInt(x, 10)
		case nil:
			out[i] = ""
		default:
			return nil, fmt.Errorf("%w: an element of type %T", ErrUnexpectedReply, v)
		}
	}
	return out, nil
}

// Notification is one entry of the queue's notification stream: a run-level
// event (run_failed, run_succeeded, run_cancelled, ...).
type Notification struct {
	ID       string // stream entry ID; pass it as after to read on
	Type     string
	At       time.Time
	RunID    string
	Workflow string
	Fields   map[string]string
}

// streamAfter reads up to count entries of a stream after the entry ID
// after ("" or "0" for the oldest retained), oldest first.
func (s *Store) streamAfter(ctx context.Context, key, after string, count int64) ([]redis.XMessage, error) {
	start := "-"
	if after != "" && after != "0" {
		if after == maxStreamID {
			return nil, nil // nothing comes after it (Redis refuses the exclusive range)
		}
		start = "(" + after
	}
	return s.rdb.XRangeN(ctx, key, start, "+", count).Result()
}

// maxStreamID is the largest stream entry ID.
const maxStreamID = "18446744073709551615-18446744073709551615"

// Notifications returns up to count notifications after the stream ID
// after ("" or "0" for the oldest retained), oldest first.
func (s *Store) Notifications(ctx context.Context, after string, count int64) ([]Notification, error) {
	xs, err := s.streamAfter(ctx, s.keys.notifications(), after, count)
	if err != nil {
		return nil, err
	}
	out := make([]Notification, 0, len(xs))
	for _, x := range xs {
		typ, at, rest := streamFields(x.Values)
		out = append(out, Notification{ID: x.ID, Type: typ, At: at, RunID: take(rest, "run"),
			Workflow: take(rest, "workflow"), Fields: rest})
	}
	return out, nil
}

// ErrQueueNodeUnknown says a Redis Cluster names no master for the slot of the
// queue's keys (it is down, or failing over).
var ErrQueueNodeUnknown = errors.New("no Redis Cluster master is known for the queue's slot")

// PingQueue checks that the Redis node that holds the queue's keys serves
// them: it reads a key of the queue's slot on that node alone. On a Redis
// Cluster that is the master that owns the slot of the queue's hash tag, so
// a cluster that is down, a failed or unreachable master, or a node that no
// longer owns the slot fails (another node answering is not enough; the
// error wraps ErrQueueNodeUnknown when no master is known); otherwise it is
// the server (for Sentinel, the current master).
func (s *Store) PingQueue(ctx context.Context) error {
	key := s.keys.asynqPending() // any key of the slot
	var node redis.Cmdable = s.rdb
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrQueueNodeUnknown, err)
		}
		node = m
	}
	return node.Exists(ctx, key).Err()
}
