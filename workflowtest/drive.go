package workflowtest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// ErrNothingDue is returned by RunUntilDone for a run that has not ended
// while nothing is due: it waits for something only the test can do, such
// as a run ahead of it in its ordering key's line that failed for good (and
// blocks the key until it is recovered or cancelled). An await is not such a
// wait: its timeout is due, and RunUntilDone goes through it.
var ErrNothingDue = errors.New("workflowtest: nothing is due")

// ErrTooManyDeliveries is returned when one call delivered
// Options.MaxDeliveries tasks and more were due: a workflow that does not
// end (a step that snoozes or jumps back forever).
var ErrTooManyDeliveries = errors.New("workflowtest: too many deliveries")

// Task is a step attempt's task in the queue: what the Env delivers to the
// engine when it is due.
type Task struct {
	// ID is the asynq task ID.
	ID string
	// RunID, Workflow, Step and Attempt name the step attempt (Step is
	// "compensate:<step>" for a compensation).
	RunID    string
	Workflow string
	Step     string
	Attempt  int
	// Due is when the task is due by the fake clock: when its retry, its
	// snooze, its sleep or its await's timeout ends; for a task due at
	// once, the fake clock's time.
	Due time.Time

	typ     string
	payload []byte
}

// RunUntilIdle delivers the step tasks due by the fake clock, one at a
// time, oldest first, until none is (the tasks a delivery enqueues run too
// when they are due at once), and fails the runs whose deadline has passed.
// The clock does not move. It returns the first error a delivery returned
// (a step the engine has no body for, a Redis error); the task is then left
// in the queue.
func (e *Env) RunUntilIdle() error {
	if err := e.lock(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	budget := e.opts.MaxDeliveries
	return e.settle(&budget)
}

// Advance moves the fake clock forward by d, running what falls due on the
// way at the moment it falls due: a retry due in 1s runs at 1s, and its
// own retry, due 2s later, at 3s, within one Advance of 5s. See AdvanceTo.
func (e *Env) Advance(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("workflowtest: Advance(%s): the clock does not go back", d)
	}
	return e.AdvanceTo(e.clock.Now().Add(d))
}

// AdvanceTo moves the fake clock forward to t: it first runs what is due
// now (RunUntilIdle), then, while a task or a run's deadline falls due
// before or at t, moves the clock to that moment and runs what is due
// then; the clock ends at t.
func (e *Env) AdvanceTo(t time.Time) error {
	if err := e.lock(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	if t.Before(e.clock.Now()) {
		return fmt.Errorf("workflowtest: AdvanceTo(%s): the clock is at %s and does not go back", t, e.clock.Now())
	}
	budget := e.opts.MaxDeliveries
	for {
		if err := e.settle(&budget); err != nil {
			return err
		}
		next, ok, err := e.next()
		if err != nil {
			return err
		}
		if !ok || next.After(t) {
			break
		}
		e.clock.set(next)
	}
	e.clock.set(t)
	return e.settle(&budget)
}

// RunUntilDone runs the run to its end, moving the fake clock from one due
// moment to the next (through backoffs, snoozes, sleeps, await timeouts,
// other runs' steps), and returns the ended run. It returns the run and an
// error wrapping ErrNothingDue when the run has not ended and nothing is
// due. To test an await that gets its signal, send the signal before.
func (e *Env) RunUntilDone(id string) (*workflow.Run, error) {
	if err := e.lock(); err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	budget := e.opts.MaxDeliveries
	for {
		if err := e.settle(&budget); err != nil {
			return nil, err
		}
		run, err := e.cli.Get(e.ctx, id)
		if err != nil {
			return nil, err
		}
		if run.Terminal() {
			return run, nil
		}
		next, ok, err := e.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return run, fmt.Errorf("%w: run %s is %s at %s", ErrNothingDue, id, run.Status, e.clock.Now().Format(time.RFC3339Nano))
		}
		e.clock.set(next)
	}
}

// Tasks returns the step tasks in the queue, in the order the Env delivers
// them: by due time, then oldest first.
func (e *Env) Tasks() ([]Task, error) {
	if err := e.lock(); err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	return e.scan()
}

// NextDue returns the next moment something is due after the fake clock's
// time: a task, or a run's deadline; false when nothing is.
func (e *Env) NextDue() (time.Time, bool, error) {
	if err := e.lock(); err != nil {
		return time.Time{}, false, err
	}
	defer e.mu.Unlock()
	return e.next()
}

// ErrInStep is returned by the methods that deliver tasks (RunUntilIdle,
// Advance, Start, ...) when called while the Env delivers one: from a step
// body, which would wait for itself.
var ErrInStep = errors.New("workflowtest: called while a step runs (a step body may use Client, not the Env's methods that run steps)")

// lock takes the Env's delivery lock, or returns ErrInStep when a delivery
// holds it: the caller is (most likely) a step body of that delivery.
func (e *Env) lock() error {
	if e.mu.TryLock() {
		return nil
	}
	if e.delivering.Load() {
		return ErrInStep
	}
	e.mu.Lock()
	return nil
}

// settle delivers the due tasks and fails the runs past their deadline
// until nothing more is due now.
func (e *Env) settle(budget *int) error {
	// Runs whose deadline a reconciler pass left as it was: not due again
	// at this time.
	passed := map[string]bool{}
	for {
		ts, err := e.scan()
		if err != nil {
			return err
		}
		now := e.clock.Now()
		if len(ts) > 0 && !ts[0].Due.After(now) {
			if *budget <= 0 {
				return fmt.Errorf("%w: %d tasks delivered and task %s still due at %s", ErrTooManyDeliveries,
					e.opts.MaxDeliveries, ts[0].ID, now.Format(time.RFC3339Nano))
			}
			*budget--
			if err := e.deliver(ts[0]); err != nil {
				return err
			}
			continue
		}
		due, err := e.state.DueDeadlines(e.ctx, now, 100)
		if err != nil {
			return err
		}
		fresh := false
		for _, d := range due {
			if !passed[d.RunID] {
				fresh = true
			}
			passed[d.RunID] = true
		}
		if !fresh {
			return nil
		}
		// The reconciler fails runs past their deadline (and repairs
		// nothing else: the Env leaves no task missing).
		if _, err := e.rec.Pass(e.ctx); err != nil {
			return err
		}
	}
}

// next returns the earliest time after now at which a task or a deadline
// is due.
func (e *Env) next() (time.Time, bool, error) {
	now := e.clock.Now()
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	ts, err := e.scan()
	if err != nil {
		return time.Time{}, false, err
	}
	for _, t := range ts {
		consider(t.Due)
	}
	// (The deadlines index holds the runs with a deadline, by deadline.)
	dls, err := e.state.DueDeadlines(e.ctx, now.Add(workflow.MaxWait*100), 1000)
	if err != nil {
		return time.Time{}, false, err
	}
	for _, d := range dls {
		consider(d.At)
	}
	return next, !next.IsZero(), nil
}

// scan reads the queue's step tasks, with their due times, in delivery
// order.
//
// asynq keeps a task due now on its pending list and a later one in its
// scheduled set, by due time in whole seconds (rounded up). The Env
// delivers a run's current task at the exact due time its state records
// (its retry's, snooze's, sleep's or await timeout's, a circuit breaker's),
// so that a 1.5s backoff ends after 1.5s; any other task (a stale one, the
// run having moved on) when asynq would.
func (e *Env) scan() ([]Task, error) {
	ctx := e.ctx
	pending, err := e.rdb.LRange(ctx, e.keys.Pending(), 0, -1).Result()
	if err != nil {
		return nil, err
	}
	scheduled, err := e.rdb.ZRangeWithScores(ctx, e.keys.Scheduled(), 0, -1).Result()
	if err != nil {
		return nil, err
	}
	now := e.clock.Now()
	var out []Task
	// asynq pushes on the left of the pending list and takes from the
	// right: the oldest is last.
	for _, id := range slices.Backward(pending) {
		out = append(out, Task{ID: id, Due: now})
	}
	for _, z := range scheduled {
		id, _ := z.Member.(string) // a sorted set's members are strings
		out = append(out, Task{ID: id, Due: time.Unix(int64(z.Score), 0)})
	}
	ts := out[:0]
	for _, t := range out {
		msg, err := e.rdb.HGet(ctx, e.keys.Task(t.ID), tasks.MessageField).Bytes()
		if errors.Is(err, redis.Nil) {
			continue // deleted since
		}
		if err != nil {
			return nil, err
		}
		t.typ, t.payload, err = tasks.DecodeMessage(msg)
		if err != nil {
			return nil, fmt.Errorf("workflowtest: task %s: %w", t.ID, err)
		}
		if t.typ != tasks.TypeStep {
			continue // not a step attempt's: not the Env's to deliver
		}
		p, err := tasks.Decode(t.payload)
		if err != nil {
			return nil, fmt.Errorf("workflowtest: task %s: %w", t.ID, err)
		}
		t.RunID, t.Workflow, t.Step, t.Attempt = p.RunID, p.Workflow, p.Name, p.Attempt
		cur, err := e.state.Peek(ctx, p.RunID)
		if err == nil && cur.Task == t.ID && !cur.Dispatch.DueAt.IsZero() {
			t.Due = cur.Dispatch.DueAt
		}
		ts = append(ts, t)
	}
	slices.SortStableFunc(ts, func(a, b Task) int { return a.Due.Compare(b.Due) })
	return ts, nil
}

// deliver hands a task to the engine, as asynq's server would, and removes
// it once handled, as asynq does with a task whose handler returned nil.
func (e *Env) deliver(t Task) error {
	e.delivering.Store(true)
	err := e.eng.ProcessTask(e.ctx, asynq.NewTask(t.typ, t.payload))
	e.delivering.Store(false)
	if err != nil {
		return fmt.Errorf("workflowtest: delivery of task %s (run %s, step %s, attempt %d) at %s: %w",
			t.ID, t.RunID, t.Step, t.Attempt, e.clock.Now().Format(time.RFC3339Nano), err)
	}
	_, err = e.rdb.TxPipelined(e.ctx, func(p redis.Pipeliner) error {
		p.LRem(e.ctx, e.keys.Pending(), 0, t.ID)
		p.ZRem(e.ctx, e.keys.Scheduled(), t.ID)
		p.Del(e.ctx, e.keys.Task(t.ID))
		return nil
	})
	return err
}
