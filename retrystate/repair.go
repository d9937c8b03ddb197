package retrystate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

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

// Due is a run ID with the time an index holds for it.
type Due struct {
	RunID string
	At    time.Time
}

func (s *Store) rangeByScore(ctx context.Context, key string, maxMS int64, limit int64) ([]Due, error) {
	upper := "+inf"
	if maxMS >= 0 {
		upper = strconv.FormatInt(maxMS, 10)
	}
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: "-inf", Max: upper, Count: limit}).Result()
	if err != nil {
		return nil, err
	}
	entries, err := indexEntries(zs)
	if err != nil {
		return nil, err
	}
	out := make([]Due, len(entries))
	for i, z := range entries {
		out[i] = Due{RunID: z.ID, At: time.UnixMilli(int64(z.Score))}
	}
	return out, nil
}

// StalledTasks returns up to limit IDs of tasks of the queue that asynq
// holds as active under a lease that expires at or before leaseBefore (whole
// seconds): with asynq's lease of LeaseDuration extended every few seconds
// by the worker holding the task, a lease that expires before now +
// LeaseDuration - d has not been extended for about d. The IDs may be any
// task of the queue's asynq queue, not only step tasks.
func (s *Store) StalledTasks(ctx context.Context, leaseBefore time.Time, limit int64) ([]string, error) {
	return s.rdb.ZRangeByScore(ctx, s.keys.asynqLease(), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(leaseBefore.Unix(), 10), Count: limit}).Result()
}

// ExpiredFences returns up to limit runs whose running attempt's fence
// expired at or before now.
func (s *Store) ExpiredFences(ctx context.Context, now time.Time, limit int64) ([]Due, error) {
	return s.rangeByScore(ctx, s.keys.fences(), ms(now), limit)
}

// DueDeadlines returns up to limit non-terminal runs whose deadline passed.
func (s *Store) DueDeadlines(ctx context.Context, now time.Time, limit int64) ([]Due, error) {
	return s.rangeByScore(ctx, s.keys.deadlines(), ms(now), limit)
}

// ScheduledRetries returns up to limit runs with a scheduled retry, by due time.
func (s *Store) ScheduledRetries(ctx context.Context, limit int64) ([]Due, error) {
	return s.rangeByScore(ctx, s.keys.scheduled(), -1, limit)
}

// IndexCursor is a position in a walk of an index by score, page by page
// (ScheduledPage, IdlePage). The zero IndexCursor is the walk's start.
//
// It holds the score of the last entry read and how many entries of that
// score were read: the next page starts at that score, past them (entries
// of one score are in the order of their members). Entries added or removed
// meanwhile may shift it: an entry of that score removed before it makes
// the walk miss one entry of that score, and an entry added behind the
// cursor is not seen until the next walk; entries are never read twice in
// a walk unless their score moved.
type IndexCursor struct {
	score   float64
	skip    int64
	started bool
}

// ScheduledPage returns the next up to limit runs of idx:scheduled (runs
// with a scheduled retry, or a waiting await or sleep) from c, by due time,
// and the cursor after them; done when the walk reached the end (the
// cursor is then the start again).
func (s *Store) ScheduledPage(ctx context.Context, c IndexCursor, limit int64) ([]Due, IndexCursor, bool, error) {
	return s.page(ctx, s.keys.scheduled(), c, -1, limit)
}

// IdlePage returns the next up to limit non-terminal runs not updated since
// before (idx:active) from c, by last update, as ScheduledPage does.
func (s *Store) IdlePage(ctx context.Context, c IndexCursor, before time.Time, limit int64) ([]Due, IndexCursor, bool, error) {
	return s.page(ctx, s.keys.active(), c, ms(before), limit)
}

// page reads the entries of key from c with a score of at most maxMS (-1:
// any), up to limit of them.
func (s *Store) page(ctx context.Context, key string, c IndexCursor, maxMS, limit int64) ([]Due, IndexCursor, bool, error) {
	lower, upper := "-inf", "+inf"
	if c.started {
		lower = strconv.FormatFloat(c.score, 'f', -1, 64)
	}
	if maxMS >= 0 {
		upper = strconv.FormatInt(maxMS, 10)
	}
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: lower, Max: upper, Offset: c.skip,
		Count: limit}).Result()
	if err != nil {
		return nil, c, false, err
	}
	entries, err := indexEntries(zs)
	if err != nil {
		return nil, c, false, err
	}
	out := make([]Due, len(entries))
	for i, z := range entries {
		out[i] = Due{RunID: z.ID, At: time.UnixMilli(int64(z.Score))}
	}
	if int64(len(entries)) < limit {
		return out, IndexCursor{}, true, nil
	}
	last := entries[len(entries)-1].Score
	if c.started && last == c.score {
		// The whole page has the cursor's score.
		return out, IndexCursor{score: last, skip: c.skip + int64(len(entries)), started: true}, false, nil
	}
	n := int64(0)
	for i := len(entries) - 1; i >= 0 && entries[i].Score == last; i-- {
		n++
	}
	return out, IndexCursor{score: last, skip: n, started: true}, false, nil
}

// CountActive returns the number of non-terminal runs.
func (s *Store) CountActive(ctx context.Context) (int64, error) {
	return s.rdb.ZCard(ctx, s.keys.active()).Result()
}

// TrimIndexes removes from the indexes up to limit runs created earlier
// than before whose records have expired. It returns how many it removed.
func (s *Store) TrimIndexes(ctx context.Context, before time.Time, limit int64) (int, error) {
	old, err := s.rangeByScore(ctx, s.keys.all(), ms(before), limit)
	if err != nil || len(old) == 0 {
		return 0, err
	}
	pipe := s.rdb.Pipeline()
	exists := make([]*redis.IntCmd, len(old))
	for i, d := range old {
		exists[i] = pipe.Exists(ctx, s.keys.run(d.RunID))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	var gone []any
	for i, e := range exists {
		if e.Val() == 0 {
			gone = append(gone, old[i].RunID)
		}
	}
	if len(gone) == 0 {
		return 0, nil
	}
	pipe = s.rdb.Pipeline()
	keys := []string{s.keys.all(), s.keys.active(), s.keys.scheduled(), s.keys.attention(), s.keys.fences(),
		s.keys.deadlines()}
	for _, st := range RunStatuses {
		keys = append(keys, s.keys.byStatus(st))
	}
	for _, k := range keys {
		pipe.ZRem(ctx, k, gone...)
	}
	_, err = pipe.Exec(ctx)
	return len(gone), err
}

// Lock names.
const (
	LockReconcile = "reconcile"
	LockSweep     = "sweep"
)

func (s *Store) lockKey(name string) string {
	if name == LockSweep {
		return s.keys.sweepLock()
	}
	return s.keys.reconcileLock()
}

// TryLock takes the named lock for ttl if nobody holds it, or extends it
// when the caller holds it already: a caller that keeps its token across
// tries gets back a lock it took whose reply was lost.
func (s *Store) TryLock(ctx context.Context, name, token string, ttl time.Duration) (bool, error) {
	ok, err := s.rdb.SetNX(ctx, s.lockKey(name), token, ttl).Result()
	if errors.Is(err, redis.Nil) {
		ok, err = false, nil
	}
	if err != nil || ok {
		return ok, err
	}
	return s.ExtendLock(ctx, name, token, ttl)
}

// ExtendLock extends a lock the caller holds; false when it lost it.
func (s *Store) ExtendLock(ctx context.Context, name, token string, ttl time.Duration) (bool, error) {
	keys, argv := unlockLua{Lock: s.lockKey(name), Token: token, TTL: ttl.Milliseconds()}.args()
	n, err := s.scripts.unlock.Run(ctx, s.rdb, keys, argv...).Int()
	return n == 1, err
}

// Unlock releases a lock the caller holds.
func (s *Store) Unlock(ctx context.Context, name, token string) error {
	keys, argv := unlockLua{Lock: s.lockKey(name), Token: token}.args()
	return s.scripts.unlock.Run(ctx, s.rdb, keys, argv...).Err()
}

// Current is a run's status and its current step's dispatch, as Peek reads
// them.
type Current struct {
	Status         RunStatus
	NeedsAttention bool
	UpdatedAt      time.Time
	StepStatus     StepStatus
	Task           string
	FenceExpiresAt time.Time
	Dispatch       Dispatch
}

// Peek reads a run's status and current dispatch in one round trip. It
// returns ErrRunNotFound for an unknown run.
func (s *Store) Peek(ctx context.Context, runID string) (Current, error) {
	keys, _ := peekLua{Run: s.keys.run(runID)}.args()
	res, err := s.scripts.peek.Run(ctx, s.rdb, keys).Result()
	if err != nil {
		return Current{}, fmt.Errorf("peek: %w", err)
	}
	if arr, _ := res.([]any); len(arr) == 0 {
		return Current{}, ErrRunNotFound
	}
	v, err := toStrings(res)
	if err != nil {
		return Current{}, fmt.Errorf("peek: %w", err)
	}
	return decodePeek(v)
}

// CountByStatus returns the number of runs of each status, of runs
// needing attention under the key "needs_attention", and of runs waiting
// for each WaitReason under "waiting:<reason>".
func (s *Store) CountByStatus(ctx context.Context) (map[string]int64, error) {
	statuses := RunStatuses
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(statuses))
	for i, st := range statuses {
		cmds[i] = pipe.ZCard(ctx, s.keys.byStatus(st))
	}
	attention := pipe.ZCard(ctx, s.keys.attention())
	waiting := make([]*redis.IntCmd, len(waitReasons))
	for i, r := range waitReasons {
		waiting[i] = pipe.ZCard(ctx, s.keys.waiting(r))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(statuses)+1)
	for i, st := range statuses {
		out[string(st)] = cmds[i].Val()
	}
	out["needs_attention"] = attention.Val()
	for i, r := range waitReasons {
		out["waiting:"+string(r)] = waiting[i].Val()
	}
	return out, nil
}
