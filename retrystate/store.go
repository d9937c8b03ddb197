package retrystate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Errors returned by Store.
var (
	// ErrRunNotFound: no run has the ID (never created, or expired after
	// its retention).
	ErrRunNotFound = errors.New("run not found")
	// ErrUnknownWorkflow: no worker has registered a workflow of that name.
	ErrUnknownWorkflow = errors.New("unknown workflow")
)

// Store reads and writes the workflow state of one queue.
type Store struct {
	rdb     redis.UniversalClient
	keys    keys
	scripts scripts
}

// New returns the Store of queue on rdb.
func New(rdb redis.UniversalClient, queue string) *Store {
	return &Store{rdb: rdb, keys: newKeys(queue), scripts: loadScripts()}
}

// Queue returns the queue name the store works on.
func (s *Store) Queue() string { return s.keys.queue }

// Redis returns the client the store uses.
func (s *Store) Redis() redis.UniversalClient { return s.rdb }

// argv starts the ARGV of a run-level script: run ID, key prefix, now.
func (s *Store) argv(runID string, now time.Time, rest ...any) []any {
	return append([]any{runID, s.keys.prefix, ms(now)}, rest...)
}

func (s *Store) run(ctx context.Context, sc *redis.Script, keys []string, argv []any) ([]string, error) {
	res, err := sc.Run(ctx, s.rdb, keys, argv...).Result()
	if err != nil {
		return nil, err
	}
	return toStrings(res)
}

// RegisterDefinitions publishes workflow definitions (name -> JSON) so that
// clients without the workflow code (the CLI, the dashboard) can start runs.
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

// NewRun describes a run to create.
type NewRun struct {
	ID             string
	Workflow       string
	Owner          string
	IdempotencyKey string // "" for none
	Input          string // JSON
	Definition     string // JSON snapshot kept with the run
	RunTimeout     time.Duration
	MaxIterations  int
	Steps          []NewStep
	Now            time.Time
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
}

// Created is the result of CreateRun.
type Created struct {
	RunID   string
	Existed bool // the idempotency key had started RunID before
	First   Dispatch
}

// Dispatch names the task that must exist for a step to make progress.
type Dispatch struct {
	Index   int
	Name    string
	Attempt int
	Gen     int
	DueAt   time.Time // zero: due now
	Timeout time.Duration
}

// CreateRun creates a run and makes its first step due. With an
// idempotency key that already started a run, it writes nothing and returns
// that run's ID with Existed set.
func (s *Store) CreateRun(ctx context.Context, r NewRun) (Created, error) {
	if len(r.Steps) == 0 {
		return Created{}, errors.New("retrystate: a run needs at least one step")
	}
	argv := s.argv(r.ID, r.Now, r.Workflow, r.Input, r.Owner, r.IdempotencyKey, r.Definition,
		r.RunTimeout.Milliseconds(), r.MaxIterations, len(r.Steps))
	for _, st := range r.Steps {
		argv = append(argv, st.Name, boolArg(st.Optional), st.MaxAttempts, st.MaxCrashes,
			st.Timeout.Milliseconds(), st.Policy, st.RunTimeout.Milliseconds(), st.MaxIterations)
	}
	idem, legacy := s.keys.idempotencyNone(), s.keys.idempotencyNone()
	if r.IdempotencyKey != "" {
		idem, legacy = s.keys.idempotency(r.Owner, r.IdempotencyKey), s.keys.legacyIdempotency(r.IdempotencyKey)
	}
	res, err := s.run(ctx, s.scripts.create, []string{s.keys.run(r.ID), idem, legacy}, argv)
	if err != nil {
		return Created{}, fmt.Errorf("create run: %w", err)
	}
	switch res[0] {
	case "exists":
		return Created{RunID: res[1], Existed: true}, nil
	case "created":
		return Created{RunID: r.ID, First: Dispatch{Index: 0, Name: r.Steps[0].Name, Attempt: atoi(res[2]),
			Timeout: r.Steps[0].Timeout}}, nil
	}
	return Created{}, unexpected("create", res)
}

// BeginOutcome tells a delivery what to do.
type BeginOutcome int

// Outcomes of Begin.
const (
	// BeginOK: run the step body.
	BeginOK BeginOutcome = iota
	// BeginGone: no such run; acknowledge the task.
	BeginGone
	// BeginEnded: the run is terminal; acknowledge the task.
	BeginEnded
	// BeginStale: the task is not the step's current dispatch; acknowledge.
	BeginStale
	// BeginBusy: another delivery of this dispatch holds a live fence; try
	// again after Wait.
	BeginBusy
	// BeginEarly: the attempt is not due; try again after Wait.
	BeginEarly
	// BeginFailed: the run failed on this begin (Code, Reason).
	BeginFailed
)

// BeginArgs identifies a delivery of a step attempt's task.
type BeginArgs struct {
	RunID     string
	Index     int
	TaskID    string
	Token     string // fence token, unique to this delivery
	FenceTTL  time.Duration
	Retention time.Duration
	Now       time.Time
}

// Begun is the result of Begin.
type Begun struct {
	Outcome BeginOutcome
	Status  string        // BeginEnded: the run's status
	Wait    time.Duration // BeginBusy, BeginEarly
	Code    string        // BeginFailed
	Reason  string        // BeginFailed
	// BeginStale: the dispatch the run is waiting for, if any.
	Pending *Dispatch
	// BeginOK:
	Attempt  int
	Crashes  int
	Crashed  bool // this begin resumed an attempt whose worker died
	Input    string
	Policy   string       // the step's effective policy (JSON)
	Used     int          // attempts of the current budget, this one included
	Deadline time.Time    // the run's deadline; zero: none
	Earlier  []Checkpoint // outputs of the steps before this one, in order
	// Next is the dispatch the next step will get when this one completes
	// (nil for the last step), so its task can be prepared in advance.
	Next *Dispatch
}

// Checkpoint is the stored output of a step.
type Checkpoint struct {
	Name   string
	Output string // JSON; "" for a step that produced none (skipped)
}

// Begin starts an attempt for a delivered task, or tells the caller why not.
func (s *Store) Begin(ctx context.Context, a BeginArgs) (Begun, error) {
	res, err := s.run(ctx, s.scripts.begin, []string{s.keys.run(a.RunID)},
		s.argv(a.RunID, a.Now, a.TaskID, a.Token, a.FenceTTL.Milliseconds(), a.Index, a.Retention.Milliseconds()))
	if err != nil {
		return Begun{}, fmt.Errorf("begin: %w", err)
	}
	switch res[0] {
	case "ok":
		if len(res) < 11 || (len(res)-11)%2 != 0 {
			return Begun{}, unexpected("begin", res)
		}
		b := Begun{Outcome: BeginOK, Attempt: atoi(res[1]), Crashes: atoi(res[2]), Crashed: res[3] == "1",
			Input: res[4], Policy: res[5], Used: atoi(res[6]), Deadline: msTime(res[7])}
		if res[8] != "" {
			b.Next = &Dispatch{Index: a.Index + 1, Name: res[8], Attempt: atoi(res[9]) + 1,
				Timeout: time.Duration(atoi(res[10])) * time.Millisecond}
		}
		for i := 11; i+1 < len(res); i += 2 {
			b.Earlier = append(b.Earlier, Checkpoint{Name: res[i], Output: res[i+1]})
		}
		return b, nil
	case "gone":
		return Begun{Outcome: BeginGone}, nil
	case "ended":
		return Begun{Outcome: BeginEnded, Status: res[1]}, nil
	case "stale":
		b := Begun{Outcome: BeginStale}
		if len(res) == 7 {
			b.Pending = &Dispatch{Index: atoi(res[1]), Name: res[2], Attempt: atoi(res[3]), Gen: atoi(res[4]),
				DueAt: msTime(res[5]), Timeout: time.Duration(atoi(res[6])) * time.Millisecond}
		}
		return b, nil
	case "busy":
		return Begun{Outcome: BeginBusy, Wait: time.Duration(atoi(res[1])) * time.Millisecond}, nil
	case "early":
		return Begun{Outcome: BeginEarly, Wait: time.Duration(atoi(res[1])) * time.Millisecond}, nil
	case "failed":
		return Begun{Outcome: BeginFailed, Code: res[1], Reason: res[2]}, nil
	}
	return Begun{}, unexpected("begin", res)
}

// CompleteArgs checkpoints a step's output.
type CompleteArgs struct {
	RunID     string
	Index     int
	Token     string
	Output    string // JSON
	Retention time.Duration
	Now       time.Time
	// NextTaskID and NextMessage, when set, are the task ID and the asynq
	// message (tasks.AsynqMessage) of the next step's first dispatch, as
	// Begun.Next predicted it: the script creates that task with the
	// checkpoint when the prediction holds.
	NextTaskID  string
	NextMessage []byte
}

// Completed is the result of Complete.
type Completed struct {
	// Next is the step now due, or nil.
	Next *Dispatch
	// Enqueued: the script created Next's task with the checkpoint.
	Enqueued bool
	// Succeeded: that was the last step; the run succeeded.
	Succeeded bool
	// Fenced: the attempt no longer owned the step (Why); nothing written.
	Fenced bool
	Why    string
	// Done: this attempt's complete was applied before (its reply was
	// lost); RunStatus is the run's status now. Nothing written.
	Done      bool
	RunStatus string
}

// Complete stores a step's output, clears its retry metadata and advances
// the run; fenced by the attempt's token.
func (s *Store) Complete(ctx context.Context, a CompleteArgs) (Completed, error) {
	keys := []string{s.keys.run(a.RunID), s.keys.asynqTask(a.NextTaskID), s.keys.asynqPending()}
	res, err := s.run(ctx, s.scripts.complete, keys,
		s.argv(a.RunID, a.Now, a.Token, a.Index, a.Output, a.Retention.Milliseconds(), a.NextTaskID, a.NextMessage))
	if err != nil {
		return Completed{}, fmt.Errorf("complete: %w", err)
	}
	switch res[0] {
	case "next":
		return Completed{Next: &Dispatch{Index: atoi(res[1]), Name: res[2], Attempt: atoi(res[3]),
			Timeout: time.Duration(atoi(res[4])) * time.Millisecond}, Enqueued: res[5] == "1"}, nil
	case "succeeded":
		return Completed{Succeeded: true}, nil
	case "fenced":
		return Completed{Fenced: true, Why: res[1]}, nil
	case "done":
		return Completed{Done: true, RunStatus: res[1]}, nil
	}
	return Completed{}, unexpected("complete", res)
}

// FailArgs records a failed attempt.
type FailArgs struct {
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

// FailResult is the result of Fail.
type FailResult struct {
	// Retry is the scheduled next attempt, or nil.
	Retry *Dispatch
	// Enqueued: the script wrote Retry's task with the retry.
	Enqueued bool
	// RunFailed: no retry; the run failed with Code and Reason.
	RunFailed bool
	Code      string
	Reason    string
	// Fenced: the attempt no longer owned the step (Why); nothing written.
	Fenced bool
	Why    string
	// Done: this attempt's failure was recorded before (its reply was
	// lost): the run is now RunStatus, failed with Code when it failed.
	// Nothing written; a retry it scheduled has its task already (when
	// RetryTaskID was right).
	Done      bool
	RunStatus string
}

// Fail records a failed attempt: for a transient error with budget left it
// schedules the next attempt after Delay; otherwise the run fails, needing
// attention. Fenced by the attempt's token.
func (s *Store) Fail(ctx context.Context, a FailArgs) (FailResult, error) {
	keys := []string{s.keys.run(a.RunID), s.keys.asynqTask(a.RetryTaskID), s.keys.asynqPending(), s.keys.asynqScheduled()}
	res, err := s.run(ctx, s.scripts.fail, keys,
		s.argv(a.RunID, a.Now, a.Token, a.Index, a.Error, a.Class, a.Delay.Milliseconds(),
			a.Retention.Milliseconds(), a.Code, a.RetryTaskID, a.RetryMessage))
	if err != nil {
		return FailResult{}, fmt.Errorf("fail: %w", err)
	}
	switch res[0] {
	case "retry":
		return FailResult{Retry: &Dispatch{Index: a.Index, DueAt: msTime(res[1]), Attempt: atoi(res[2]),
			Timeout: time.Duration(atoi(res[3])) * time.Millisecond}, Enqueued: len(res) > 4 && res[4] == "1"}, nil
	case "failed":
		return FailResult{RunFailed: true, Code: res[1], Reason: res[2]}, nil
	case "fenced":
		return FailResult{Fenced: true, Why: res[1]}, nil
	case "done":
		if len(res) < 3 {
			return FailResult{}, unexpected("fail", res)
		}
		return FailResult{Done: true, RunStatus: res[1], Code: res[2], RunFailed: res[1] == StatusFailed}, nil
	}
	return FailResult{}, unexpected("fail", res)
}

// ReleaseArgs hands back an attempt its worker stopped because it could not
// renew the attempt's fence.
type ReleaseArgs struct {
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

// Released is the result of Release.
type Released struct {
	// Dispatch resumes the attempt; Enqueued: the script wrote its task.
	Dispatch *Dispatch
	Enqueued bool
	// Fenced: the attempt no longer owned the step (Why); nothing written.
	Fenced bool
	Why    string
}

// Release hands back a running attempt whose worker stopped it because it
// could not renew its fence (Redis unreachable): neither a crash nor a
// failed attempt. The attempt resumes under a new dispatch, due now, and the
// run is notified (run_recovered, by worker, kind interrupted_attempt).
// Fenced by the attempt's token.
func (s *Store) Release(ctx context.Context, a ReleaseArgs) (Released, error) {
	keys := []string{s.keys.run(a.RunID), s.keys.asynqTask(a.TaskID), s.keys.asynqPending()}
	res, err := s.run(ctx, s.scripts.release, keys, s.argv(a.RunID, a.Now, a.Token, a.Index, a.TaskID, a.Message))
	if err != nil {
		return Released{}, fmt.Errorf("release: %w", err)
	}
	switch res[0] {
	case "released":
		if len(res) < 7 {
			return Released{}, unexpected("release", res)
		}
		return Released{Dispatch: dispatchOf(res[1], res[2], res[3], res[4], "0", res[5]), Enqueued: res[6] == "1"}, nil
	case "fenced":
		return Released{Fenced: true, Why: res[1]}, nil
	}
	return Released{}, unexpected("release", res)
}

// CancelResult is the result of Cancel.
type CancelResult struct {
	Cancelled  bool   // this call cancelled the run
	Already    bool   // the run had been cancelled before
	Status     string // the run's status when it was terminal already
	Task       string // task ID of the step that was current
	StepStatus string // that step's status before the cancel
}

// Cancel ends a pending or running run as cancelled. It returns
// ErrRunNotFound for an unknown run.
func (s *Store) Cancel(ctx context.Context, runID, actor string, retention time.Duration, now time.Time) (CancelResult, error) {
	res, err := s.run(ctx, s.scripts.cancel, []string{s.keys.run(runID)},
		s.argv(runID, now, actor, retention.Milliseconds()))
	if err != nil {
		return CancelResult{}, fmt.Errorf("cancel: %w", err)
	}
	switch res[0] {
	case "cancelled":
		return CancelResult{Cancelled: true, Task: res[1], StepStatus: res[2]}, nil
	case "already":
		return CancelResult{Already: true, Status: StatusCancelled}, nil
	case "ended":
		return CancelResult{Status: res[1]}, nil
	case "gone":
		return CancelResult{}, ErrRunNotFound
	}
	return CancelResult{}, unexpected("cancel", res)
}

// Renewal is the answer to a fence renewal.
type Renewal int

// Renewal outcomes.
const (
	Renewed    Renewal = 1
	FenceLost  Renewal = 0
	RunStopped Renewal = -1 // the run is no longer running (cancelled, failed, gone)
)

// Renew extends the fence of a running attempt to now+ttl.
func (s *Store) Renew(ctx context.Context, runID string, idx int, token string, ttl time.Duration, now time.Time) (Renewal, error) {
	n, err := s.scripts.renew.Run(ctx, s.rdb, []string{s.keys.run(runID), s.keys.fences()},
		token, ms(now), ttl.Milliseconds(), runID, idx).Int()
	if err != nil {
		return FenceLost, fmt.Errorf("renew: %w", err)
	}
	return Renewal(n), nil
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
	runHash, stepHashes := splitRunHash(h)
	r := parseRun(id, runHash)
	r.Steps = make([]Step, len(stepHashes))
	for i, m := range stepHashes {
		r.Steps[i] = parseStep(i, m)
	}
	return r, nil
}

// ListQuery selects runs, newest first.
type ListQuery struct {
	Status string // "" for every status
	Limit  int    // default 50, at most 1000
	Cursor string // from the previous page; "" for the first
	// Owner and Workflow, when set, keep only the runs of that owner and
	// workflow. A filtered listing examines a bounded number of index
	// entries per page (see scanRuns): a page may then hold fewer than
	// Limit runs, or none, with a next cursor to go on from.
	Owner    string
	Workflow string
}

// ErrBadCursor is returned by ListRuns for a cursor it did not make.
var ErrBadCursor = errors.New("malformed cursor")

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
	var ids []redis.Z
	for offset := int64(0); len(ids) < limit+1; {
		page, err := s.rdb.ZRevRangeByScoreWithScores(ctx, idx, &redis.ZRangeBy{
			Max: maxScore, Min: "-inf", Offset: offset, Count: int64(limit + 1),
		}).Result()
		if err != nil {
			return nil, "", err
		}
		for _, z := range page {
			if afterID != "" && strconv.FormatInt(int64(z.Score), 10) == maxScore && z.Member.(string) >= afterID {
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
		next = fmt.Sprintf("%d:%s", int64(last.Score), last.Member.(string))
		ids = ids[:limit]
	}
	runs, err := s.runHeads(ctx, ids)
	if err != nil {
		return nil, "", err
	}
	return runs, next, nil
}

func splitCursor(c string) (int64, string, bool) {
	for i := 0; i < len(c); i++ {
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
	exists := pipe.Exists(ctx, s.keys.run(id))
	xs := pipe.XRange(ctx, s.keys.journal(id), "-", "+")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	if exists.Val() == 0 {
		return nil, ErrRunNotFound
	}
	out := make([]Entry, 0, len(xs.Val()))
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
		return nil, fmt.Errorf("retrystate: unexpected script reply %v", res)
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
			return nil, fmt.Errorf("retrystate: unexpected script reply element %T", v)
		}
	}
	return out, nil
}

func unexpected(op string, res []string) error {
	return fmt.Errorf("retrystate: %s: unexpected script reply %q", op, res)
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
