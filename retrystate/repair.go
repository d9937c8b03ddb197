package retrystate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The reconciler's repairs: Redispatch (a crashed attempt), RepairTask (a
// task in trouble) and CheckTasks (the check, and repair, of many runs'
// tasks at once).

// RedispatchParams asks to repair the attempt of a run whose fence expired
// (lua/redispatch.lua).
type RedispatchParams struct {
	RunID string
	// MaxAuto is the most automatic repairs of a run: past it, the run is
	// left to an operator (OutcomeAttention).
	MaxAuto int
	// Retention of the run, if the crash fails it.
	Retention time.Duration
	Now       time.Time
}

// Redispatch repairs the current attempt of a run whose fence expired: its
// worker died. The crash is counted (the run fails when the step's crash
// budget is spent) and the attempt gets a new dispatch.
func (s *Store) Redispatch(ctx context.Context, a RedispatchParams) (RedispatchResult, error) {
	res, err := s.run(ctx, s.scripts.redispatch, redispatchLua{runArgs: s.runArgs(a.RunID, a.Now), MaxAuto: a.MaxAuto,
		Retention: a.Retention.Milliseconds()})
	if err != nil {
		return RedispatchResult{}, fmt.Errorf("redispatch: %w", err)
	}
	return redispatchResult(decodeRedispatch(res))
}

// RedispatchResult is what Redispatch did. Its Outcome is one of:
//
//   - OutcomeDispatch: the crash was counted (Crashes, on the step) and the
//     attempt resumes as Dispatch, of a run of Workflow: enqueue it.
//   - OutcomeRunFailed: the crash spent the step's crash budget: the run
//     failed (RunFailure).
//   - OutcomeAttention: the run was repaired too often and is left to an
//     operator (Reason).
//   - OutcomeNoop: nothing to do (Reason).
type RedispatchResult struct {
	Outcome Outcome
	// Kind names the repair, "crashed_attempt" (OutcomeDispatch,
	// OutcomeRunFailed, OutcomeAttention).
	Kind string
	// Dispatch is the resumed attempt's, of a run of Workflow
	// (OutcomeDispatch).
	Dispatch *Dispatch
	Workflow string
	// Crashes counted on the step (OutcomeDispatch).
	Crashes int
	// RunFailure is the run's failure (OutcomeRunFailed).
	RunFailure
	// Reason says why the run needs attention (OutcomeAttention) or why
	// nothing was done (OutcomeNoop).
	Reason string
}

var redispatchOutcomes = []Outcome{OutcomeDispatch, OutcomeRunFailed, OutcomeAttention, OutcomeNoop}

func redispatchResult(d decoded, err error) (RedispatchResult, error) {
	if d, err = accept("redispatch", d, err, redispatchOutcomes); err != nil {
		return RedispatchResult{}, err
	}
	r := RedispatchResult{Outcome: d.Outcome, Kind: d.Kind, Dispatch: d.Dispatch, Workflow: d.Workflow,
		Crashes: d.Crashes, RunFailure: d.failure()}
	if d.Outcome != OutcomeRunFailed {
		r.Reason = d.Reason // (a failure's reason is RunFailure.Reason)
	}
	return r, nil
}

// TaskTrouble is what the caller of RepairTask found wrong with a task.
type TaskTrouble string

// What RepairTask repairs.
const (
	// TaskMissing: asynq has no such task (lost after a state write, or
	// deleted). The step's task is enqueued again under the same ID.
	TaskMissing TaskTrouble = "missing"
	// TaskArchived: asynq gave up delivering the task; its ID stays taken.
	TaskArchived TaskTrouble = "archived"
	// TaskStalled: asynq moved the task to active for a worker that never
	// received it (the reply of its dequeue was lost): its lease is not
	// being extended, and the step was never begun.
	TaskStalled TaskTrouble = "stalled"
)

// RepairParams names a task of a run's current step that the caller found
// in trouble (lua/repair.lua).
type RepairParams struct {
	RunID string
	// TaskID is the task found in trouble.
	TaskID  string
	Trouble TaskTrouble
	// MaxAuto is the most automatic repairs of a run: past it, the run is
	// left to an operator (OutcomeAttention).
	MaxAuto int
	Now     time.Time
}

// RepairTask re-creates the task of a run's current step, which the caller
// found in trouble: under the same ID when it is missing, under a new
// dispatch ID (the next gen) when asynq still holds the old one. Nothing is
// done (OutcomeNoop) unless the step is still pending with that task. The
// script writes the dispatch's task itself (Enqueued), for its due time,
// unless asynq has one under its ID already. Repair kinds: task_missing,
// retry_task_missing, wake_task_missing, task_archived, stalled_delivery.
func (s *Store) RepairTask(ctx context.Context, a RepairParams) (RepairResult, error) {
	res, err := s.run(ctx, s.scripts.repair, repairLua{runArgs: s.runArgs(a.RunID, a.Now), Task: a.TaskID,
		Trouble: string(a.Trouble), MaxAuto: a.MaxAuto})
	if err != nil {
		return RepairResult{}, fmt.Errorf("repair task: %w", err)
	}
	rp, err := repairResult(decodeRepair(res))
	if err == nil && rp.Enqueued {
		err = s.registerAsynqQueue(ctx)
	}
	return rp, err
}

// RepairResult is what RepairTask did. Its Outcome is one of:
//
//   - OutcomeDispatch: the step got a task that will be delivered:
//     Next.Dispatch, of a run of Workflow, whose task the script wrote
//     (Next.Enqueued). Kind names the repair: task_missing,
//     retry_task_missing, wake_task_missing, task_archived or
//     stalled_delivery.
//   - OutcomeAttention: the run was repaired too often and is left to an
//     operator (Reason).
//   - OutcomeNoop: nothing to do (Reason).
type RepairResult struct {
	Outcome Outcome
	// Kind names the repair (OutcomeDispatch).
	Kind string
	// Next is the repaired step's dispatch, of a run of Workflow
	// (OutcomeDispatch).
	Next
	Workflow string
	// Reason says why the run needs attention (OutcomeAttention) or why
	// nothing was done (OutcomeNoop).
	Reason string
}

var repairOutcomes = []Outcome{OutcomeDispatch, OutcomeAttention, OutcomeNoop}

func repairResult(d decoded, err error) (RepairResult, error) {
	if d, err = accept("repair task", d, err, repairOutcomes); err != nil {
		return RepairResult{}, err
	}
	return RepairResult{Outcome: d.Outcome, Kind: d.Kind, Next: d.next(), Workflow: d.Workflow, Reason: d.Reason}, nil
}

// registerAsynqQueue lists the queue in asynq:queues, as asynq's own
// enqueue does, for the scripts that write asynq's tasks directly: asynq's
// Inspector (GetTaskInfo, DeleteTask) finds no task of a queue not listed
// there.
func (s *Store) registerAsynqQueue(ctx context.Context) error {
	if err := s.rdb.SAdd(ctx, s.keys.asynqQueues(), s.keys.queue).Err(); err != nil {
		return fmt.Errorf("register the queue with asynq: %w", err)
	}
	return nil
}

// CheckParams are the settings of CheckTasks.
type CheckParams struct {
	// Grace leaves to the engine a pending or waiting step written less
	// than this long ago (OutcomeRecheck).
	Grace time.Duration
	// MaxAuto is the most automatic repairs of a run.
	MaxAuto int
	Now     time.Time
}

// Check is what CheckTasks found and did for one run: Result, or Err when
// its script failed (Result is then zero).
type Check struct {
	RunID  string
	Result CheckResult
	Err    error
}

// CheckResult is what CheckTasks found and did for one run: a
// RepairResult's outcomes, and two more:
//
//   - OutcomeRecheck: the step was written within the grace, its task may
//     be on its way; look again at RecheckAt.
//   - OutcomeCrashed: the step runs under an expired fence: its worker
//     died (Store.Redispatch).
type CheckResult struct {
	RepairResult
	// RecheckAt is when to look at the run again (OutcomeRecheck).
	RecheckAt time.Time
}

var checkOutcomes = append(slices.Clip(repairOutcomes), OutcomeRecheck, OutcomeCrashed)

func checkResult(d decoded, err error) (CheckResult, error) {
	if d, err = accept("check task", d, err, checkOutcomes); err != nil {
		return CheckResult{}, err
	}
	return CheckResult{RepairResult: RepairResult{Outcome: d.Outcome, Kind: d.Kind, Next: d.next(),
		Workflow: d.Workflow, Reason: d.Reason}, RecheckAt: d.RecheckAt}, nil
}

// CheckTasks checks, for each run, that the task its current step waits
// for will be delivered, and repairs it when it will not, with one script
// call per run (repair.lua "check"), all sent in one pipeline. The script
// reads the run and the task's record in asynq (both in the queue's slot)
// at once:
//
//   - no task to check (the run is gone or ended, needs attention, its step
//     has no task, runs under a live fence, or is neither pending nor
//     waiting), or the task exists and is not archived: OutcomeNoop;
//   - a pending or waiting step written within Grace: OutcomeRecheck at
//     RecheckAt (the engine may be about to enqueue its task);
//   - a running step whose fence expired: OutcomeCrashed (see Redispatch);
//   - a missing task is re-created under its ID, an archived one gets a new
//     dispatch (the next gen) and its task, as RepairTask does: OutcomeDispatch
//     (Enqueued), or OutcomeAttention when the run was repaired too often.
//
// The error is the pipeline's (Redis unreachable, loading, read-only); a
// script's own error is its Check's Err.
func (s *Store) CheckTasks(ctx context.Context, runIDs []string, a CheckParams) ([]Check, error) {
	out := make([]Check, len(runIDs))
	if len(runIDs) == 0 {
		return out, nil
	}
	grace := a.Grace.Milliseconds()
	todo := make([]int, len(runIDs))
	for i := range todo {
		todo[i] = i
	}
	// A NOSCRIPT (the server's script cache was flushed: a restart) runs
	// nothing: load the script and send those calls again, once.
	for try := 0; ; try++ {
		pipe := s.rdb.Pipeline()
		// The repairs write asynq's tasks directly (registerAsynqQueue).
		pipe.SAdd(ctx, s.keys.asynqQueues(), s.keys.queue)
		cmds := make([]*redis.Cmd, len(todo))
		for j, i := range todo {
			id := runIDs[i]
			keys, argv := repairLua{runArgs: s.runArgs(id, a.Now), Trouble: "check", MaxAuto: a.MaxAuto,
				Grace: grace}.args()
			cmds[j] = s.scripts.repair.EvalSha(ctx, pipe, keys, argv...)
		}
		_, _ = pipe.Exec(ctx) // the errors are the commands'
		var again []int
		for j, i := range todo {
			out[i].RunID = runIDs[i]
			cerr := cmds[j].Err()
			switch {
			case cerr == nil:
				res, err := toStrings(cmds[j].Val())
				if err == nil {
					out[i].Result, err = checkResult(decodeRepair(res))
				}
				if err != nil {
					out[i].Err = fmt.Errorf("check task: %w", err)
				}
			case isNoScript(cerr) && try == 0:
				again = append(again, i)
			case isScriptError(cerr):
				out[i].Err = fmt.Errorf("check task: %w", cerr)
			default:
				// Not the script's error but the pipeline's: Redis
				// unreachable, loading, read-only, out of memory.
				return nil, fmt.Errorf("check tasks: %w", cerr)
			}
		}
		if len(again) == 0 {
			return out, nil
		}
		if err := s.scripts.repair.Load(ctx, s.rdb).Err(); err != nil {
			return nil, fmt.Errorf("check tasks: load the script: %w", err)
		}
		todo = again
	}
}

// Unscheduled returns, in their order, the runs of runIDs that are not in
// idx:scheduled (one pipeline of ZSCOREs): the pass's walk of the idle
// runs leaves the others to its walk of idx:scheduled.
func (s *Store) Unscheduled(ctx context.Context, runIDs []string) ([]string, error) {
	if len(runIDs) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.FloatCmd, len(runIDs))
	for i, id := range runIDs {
		cmds[i] = pipe.ZScore(ctx, s.keys.scheduled(), id)
	}
	_, _ = pipe.Exec(ctx) // the errors are the commands'
	var out []string
	for i, c := range cmds {
		switch err := c.Err(); {
		case errors.Is(err, redis.Nil):
			out = append(out, runIDs[i])
		case err != nil:
			return nil, fmt.Errorf("read idx:scheduled: %w", err)
		}
	}
	return out, nil
}

// isScriptError tells whether err is Redis's reply that a script ran and
// failed (a Lua error, a redis.call that failed on the run's keys), rather
// than that it could not run: Redis unreachable, or refusing every command
// for now (loading, read-only, out of memory, busy, cluster down, ...).
func isScriptError(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	return !moved && !ask && !redis.IsLoadingError(err) && !redis.IsReadOnlyError(err) &&
		!redis.IsClusterDownError(err) && !redis.IsTryAgainError(err) && !redis.IsMasterDownError(err) &&
		!redis.IsMaxClientsError(err) && !redis.IsAuthError(err) && !redis.IsPermissionError(err) &&
		!redis.IsOOMError(err) && !redis.IsNoReplicasError(err) && !strings.HasPrefix(re.Error(), "BUSY")
}

// isNoScript tells whether err is Redis's NOSCRIPT: the script is not in
// the server's cache, and the call ran nothing.
func isNoScript(err error) bool {
	return errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT")
}
