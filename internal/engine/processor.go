package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/internal/testsignal"
	"github.com/cairnhq/cairn/tasks"
)

// The worker's own processor: Cairn's dequeue of its queue.
//
// asynq's processor polls: an idle server sleeps TaskCheckInterval (20 ms
// give or take 10) between looks at the queue, so each step of a run on an
// idle worker waits for the next look, and an idle worker's Redis cost is
// nearly all that polling. A Worker runs this processor instead (unless
// WorkerConfig.Dequeue is DequeueAsynq), on asynq's records and with
// asynq's semantics (tasks.Dequeuer):
//
//   - one fetcher takes a task when a slot is free: it blocks on the
//     queue's pending list (BLMOVE, fetchBlock at a time) into a claim list
//     of the worker's own, then takes it (active, its state, its lease) in
//     one script, which honours asynq's pause; while it finds work, it
//     takes the next task in one call, as asynq's dequeue does (TakeNext),
//     and blocks again once the queue is empty;
//   - a handler runs per task, the engine's for a step attempt, the webhook
//     handler for a delivery, with the deadline asynq would give it; its
//     result is acknowledged as asynq's processor would (done or completed,
//     retried with the worker's retry delay and failure predicate, archived
//     past the task's retry budget or on asynq.SkipRetry);
//   - every second one call renews the worker's heartbeat, hands the
//     claims of dead workers back, forwards due scheduled and retry tasks
//     (the promoter's fallback), deletes completed tasks past their
//     retention, and retries or archives the active tasks whose lease
//     expired, as asynq's recoverer would; every leaseEvery one call
//     extends the leases of the tasks running here;
//   - asynq's cancellation channel (Inspector.CancelProcessing, which
//     dispatcher.Stop sends) cancels a running handler's context;
//   - at shutdown it stops fetching, waits up to ShutdownTimeout for the
//     running handlers, hands the tasks still running back to pending (as
//     asynq's Shutdown does), and leaves (its claim list and heartbeat).

// DequeueCairn and DequeueAsynq are the values of WorkerConfig.Dequeue.
const (
	DequeueCairn = "cairn"
	DequeueAsynq = "asynq"
)

const (
	// fetchBlock is how long one BLMOVE blocks: an idle worker's fetch
	// costs one command per fetchBlock, and a shutdown waits for it.
	fetchBlock = time.Second
	// housekeepEvery is how often the worker renews its heartbeat and
	// keeps the queue's house (tasks.Dequeuer.Housekeep); heartbeatTTL is
	// how long after its last renewal a worker's claims are handed back.
	housekeepEvery = time.Second
	heartbeatTTL   = 10 * time.Second
	// leaseEvery is how often the leases of running tasks are extended,
	// as asynq's heartbeat does.
	leaseEvery = 5 * time.Second
	// pausedPoll is how often a fetcher on a paused queue looks whether
	// it was resumed.
	pausedPoll = time.Second
	// asynqDefaultTimeout is asynq's timeout of a task whose message has
	// neither timeout nor deadline (asynq v0.26, client.go).
	asynqDefaultTimeout = 30 * time.Minute
)

// processor is a Worker's own dequeue (see above).
type processor struct {
	e           *Engine
	dq          *tasks.Dequeuer
	rdb         redis.UniversalClient
	log         core.Logger
	concurrency int
	shutdown    time.Duration
	webhook     func(ctx context.Context, body []byte, retried int) error

	mu      sync.Mutex
	running map[string]*runningTask

	// Test events: a task taken (its ID), a take that found the queue
	// paused, a task acknowledged (its ID and how), a housekeeping pass.
	taken     testsignal.Signal[string]
	paused    testsignal.Signal[struct{}]
	acked     testsignal.Signal[ackEvent]
	housekept testsignal.Signal[tasks.Housekept]
}

// runningTask is a task a handler runs here.
type runningTask struct {
	cancel context.CancelFunc
	// handedBack is set when a shutdown handed the task back: its handler's
	// result is not acknowledged.
	handedBack bool
}

// ackEvent tells a test how a task was acknowledged: "done", "checkpoint"
// (done by the step's checkpoint or failure, stepAck), "retry", "archive", "requeue",
// or "lost" (no longer active here).
type ackEvent struct{ id, how string }

// newWorkerID returns an ID unique among a queue's workers.
func newWorkerID() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

func newProcessor(e *Engine, rdb redis.UniversalClient, concurrency int, shutdown time.Duration,
	version string) *processor {
	id := e.id // the worker's identity, in its attempts' journal entries too
	p := &processor{e: e, dq: tasks.NewDequeuer(rdb, e.cfg.Queue, id), rdb: rdb,
		log:         core.LineLogger{L: e.log, Attrs: []any{"component", "dequeue", "worker_id", id}},
		concurrency: concurrency, shutdown: shutdown, running: map[string]*runningTask{}}
	// The worker's record, rewritten with each heartbeat (once a second,
	// off the step path): what the Workers page shows.
	host, _ := os.Hostname()
	started := e.cfg.Clock.Now()
	p.dq.Describe(func() tasks.WorkerInfo {
		p.mu.Lock()
		inFlight := len(p.running)
		p.mu.Unlock()
		return tasks.WorkerInfo{Host: host, PID: os.Getpid(), Queues: []string{e.cfg.Queue}, Concurrency: concurrency,
			InFlight: inFlight, StartedAt: started, Version: version}
	})
	return p
}

// run processes the queue's tasks until ctx ends, then shuts down (see
// above).
//
// The worker's first heartbeat (housekeep) comes before run, so that a
// claim list is never without one and a ready worker is listed live.
func (p *processor) run(ctx context.Context) {
	bgCtx, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	var bg sync.WaitGroup
	bg.Go(func() { p.housekeeping(bgCtx) })
	bg.Go(func() { p.cancellations(bgCtx) })

	slots := make(chan struct{}, p.concurrency)
	var handlers sync.WaitGroup
	p.fetch(ctx, slots, &handlers)

	// Shutdown: wait for the handlers, up to the timeout.
	done := make(chan struct{})
	go func() {
		handlers.Wait()
		close(done)
	}()
	t := time.NewTimer(p.shutdown)
	select {
	case <-done:
		t.Stop()
	case <-t.C:
		p.handBack()
	}
	stopBg()
	bg.Wait()
	leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := p.dq.Leave(leaveCtx); err != nil {
		p.log.Warn("could not leave the queue cleanly; its claims are handed back once its heartbeat expires",
			core.AttrError, err)
	}
}

// fetch takes tasks while a slot is free, until ctx ends.
func (p *processor) fetch(ctx context.Context, slots chan struct{}, handlers *sync.WaitGroup) {
	failing := false
	backoff := func(err error) {
		if !failing {
			p.log.Warn("cannot fetch tasks; retrying", core.AttrError, err)
			failing = true
		}
		_ = core.SleepContext(ctx, time.Second)
	}
	// busy: the last look found a task, so the next one takes the next
	// task in one call (TakeNext) before it blocks again.
	busy := false
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case slots <- struct{}{}:
		}
		release := func() { <-slots }
		var (
			msg     *tasks.Message
			outcome tasks.TakeOutcome
			err     error
		)
		if busy {
			msg, outcome, err = p.dq.TakeNext(ctx, p.e.cfg.Clock.Now())
			if err != nil && outcome != tasks.TakeMalformed {
				release()
				busy = false
				if ctx.Err() == nil {
					backoff(err)
				}
				continue
			}
		}
		if !busy || outcome == tasks.TakeEmpty {
			busy = false
			// The claim is never abandoned half-way: a BLMOVE ctx ended
			// would leave its reply unread (Leave hands back whatever it
			// claimed).
			id, err := p.dq.Claim(context.WithoutCancel(ctx), fetchBlock)
			if err != nil {
				release()
				backoff(err)
				continue
			}
			if id == "" {
				release()
				continue
			}
			if ctx.Err() != nil {
				release()
				return // Leave hands the claim back
			}
			if msg, outcome, err = p.take(ctx, id, backoff); err != nil {
				release()
				return // ctx ended: Leave hands the claim back
			}
		}
		if failing {
			p.log.Info("fetching tasks again")
			failing = false
		}
		switch outcome {
		case tasks.TakePaused:
			release()
			busy = false
			p.paused.Signal(struct{}{})
			p.waitPaused(ctx)
			continue
		case tasks.TakeMalformed:
			if err != nil {
				p.log.Error("took a task whose message cannot be read; left active for an operator",
					core.AttrError, err)
			}
			release()
			continue
		case tasks.TakeGone, tasks.TakeMissing, tasks.TakeEmpty:
			release()
			continue
		case tasks.Taken:
		}
		busy = true
		p.taken.Signal(msg.ID)
		handlers.Go(func() {
			defer release()
			p.handle(msg)
		})
	}
}

// take takes the claimed task id, trying again while Redis fails (the ID
// would otherwise stay claimed for as long as this worker lives); an error
// only when ctx ended first. A take whose reply was lost answers TakeGone
// when tried again: its task is active under a lease nobody extends, and
// the lease's recovery delivers it again (as after asynq's lost replies).
func (p *processor) take(ctx context.Context, id string, backoff func(error)) (*tasks.Message, tasks.TakeOutcome, error) {
	for {
		msg, outcome, err := p.dq.Take(context.WithoutCancel(ctx), id, p.e.cfg.Clock.Now())
		if err == nil {
			return msg, outcome, nil
		}
		if outcome == tasks.TakeMalformed {
			p.log.Error("took a task whose message cannot be read; left active for an operator",
				core.AttrTaskID, id, core.AttrError, err)
			return nil, outcome, nil
		}
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		backoff(err)
	}
}

// waitPaused returns once the queue is no longer paused, or ctx ended.
func (p *processor) waitPaused(ctx context.Context) {
	p.log.Info("queue paused; fetching resumes when it is unpaused")
	for core.SleepContext(ctx, pausedPoll) == nil {
		paused, err := p.dq.Paused(ctx)
		if err == nil && !paused {
			p.log.Info("queue unpaused; fetching again")
			return
		}
	}
}

// deadline is the deadline asynq's processor gives a task's handler.
func deadline(m *tasks.Message, now time.Time) time.Time {
	switch {
	case m.Timeout != 0 && m.Deadline != 0:
		return time.Unix(min(now.Unix()+m.Timeout, m.Deadline), 0)
	case m.Timeout != 0:
		return now.Add(time.Duration(m.Timeout) * time.Second)
	case m.Deadline != 0:
		return time.Unix(m.Deadline, 0)
	}
	return now.Add(asynqDefaultTimeout)
}

// handle runs the handler of m and acknowledges its result, as asynq's
// processor does.
func (p *processor) handle(m *tasks.Message) {
	log := core.LineLogger{L: p.e.log, Attrs: []any{core.AttrTaskID, m.ID, "task_type", m.Type}}
	ctx, cancel := context.WithDeadline(context.Background(), deadline(m, p.e.cfg.Clock.Now()))
	defer cancel()
	rt := &runningTask{cancel: cancel}
	p.mu.Lock()
	p.running[m.ID] = rt
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.running, m.ID)
		p.mu.Unlock()
	}()

	// A step's checkpoint may acknowledge the task itself (stepAck).
	sa := &stepAck{args: func(now time.Time) tasks.DoneArgs { return p.dq.DoneArgs(m, now) }}
	res := make(chan error, 1)
	go func() { res <- p.perform(withStepAck(ctx, sa), m) }()
	var err error
	select {
	case err = <-res:
	case <-ctx.Done():
		// asynq does not wait for a handler past its deadline or its
		// cancellation: the task's fate is decided now.
		err = ctx.Err()
	}
	p.mu.Lock()
	handedBack := rt.handedBack
	p.mu.Unlock()
	if handedBack {
		return // a shutdown handed it back to pending
	}
	if err == nil && sa.acked.Load() {
		p.acked.Signal(ackEvent{m.ID, "checkpoint"})
		return
	}
	p.ack(log, m, err)
}

// stepAck lets the checkpoint (or the failure) that ends a step task's
// delivery acknowledge the task in the same script
// (retrystate.CompleteParams.Ack, FailParams.Ack): one round trip where a
// checkpoint and a done took two. The engine finds it in the
// delivery's context; acked says the script did it, and the processor then
// does not.
type stepAck struct {
	args  func(now time.Time) tasks.DoneArgs
	acked atomic.Bool
}

type stepAckKey struct{}

func withStepAck(ctx context.Context, a *stepAck) context.Context {
	return context.WithValue(ctx, stepAckKey{}, a)
}

// stepAckOf returns the delivery's stepAck, nil when its task is not
// Cairn's own dequeue's (asynq's processor acknowledges its own).
func stepAckOf(ctx context.Context) *stepAck {
	a, _ := ctx.Value(stepAckKey{}).(*stepAck)
	return a
}

// perform runs m's handler, a panic becoming its error.
func (p *processor) perform(ctx context.Context, m *tasks.Message) (err error) {
	defer func() {
		if x := recover(); x != nil {
			p.log.Error("recovering from a panic in a task's handler", core.AttrTaskID, m.ID,
				"panic", fmt.Sprint(x), "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", x)
		}
	}()
	switch m.Type {
	case tasks.TypeStep:
		return p.e.processStep(ctx, m.ID, m.Payload, tasks.DueOf(m.Headers))
	case tasks.TypeWebhook:
		if p.webhook != nil {
			return p.webhook(ctx, m.Payload, m.Retried)
		}
	}
	// asynq's ServeMux answers a type it has no handler for with an error
	// (NotFound), which is retried.
	return fmt.Errorf("handler not found for task %q", m.Type)
}

// ack acknowledges m's handler result err as asynq's processor does
// (handleSucceededMessage, handleFailedMessage), retrying a failed write
// while the task's lease lasts.
func (p *processor) ack(log core.LineLogger, m *tasks.Message, err error) {
	how := "done"
	write := func(ctx context.Context, now time.Time) error { return p.dq.Done(ctx, m, now) }
	switch {
	case err == nil:
	case errors.Is(err, asynq.RevokeTask):
		log.Warn("task revoked")
		write = func(ctx context.Context, now time.Time) error {
			c := *m
			c.Retention = 0 // asynq's markAsDone: the record goes
			return p.dq.Done(ctx, &c, now)
		}
	case m.Retried >= m.Retry || errors.Is(err, asynq.SkipRetry):
		how = "archive"
		log.Warn("retry exhausted for task", core.AttrError, err)
		write = func(ctx context.Context, now time.Time) error { return p.dq.Archive(ctx, m, err.Error(), now) }
	default:
		how = "retry"
		d := retryDelay(m.Retried, err, asynq.NewTask(m.Type, m.Payload))
		at := p.e.cfg.Clock.Now().Add(d)
		failure := IsFailure(err)
		write = func(ctx context.Context, now time.Time) error { return p.retryTask(ctx, m, at, err, failure, now) }
	}
	// As asynq: a write that fails is tried again until the lease (30 s
	// from the last extension at most) would end; then the recoverer's.
	ctx, cancel := context.WithTimeout(context.Background(), tasks.AsynqLeaseDuration)
	defer cancel()
	notActive := false
	werr := p.e.retry(ctx, log, "acknowledge the task ("+how+")", func(ctx context.Context) error {
		err := write(ctx, p.e.cfg.Clock.Now())
		if errors.Is(err, tasks.ErrNotActive) {
			notActive = true
			return nil // nothing to try again
		}
		return err
	})
	switch {
	case notActive:
		log.Warn("task no longer active here (its lease was recovered); not acknowledged")
		p.acked.Signal(ackEvent{m.ID, "lost"})
	case werr == nil:
		p.acked.Signal(ackEvent{m.ID, how})
	default:
		log.Error("could not acknowledge the task; asynq's recovery will deliver it again",
			"ack", how, core.AttrError, werr)
		p.acked.Signal(ackEvent{m.ID, "lost"})
	}
}

// handBack hands the tasks still running back to pending and cancels
// their handlers, as asynq's Shutdown does once its timeout passed.
func (p *processor) handBack() {
	p.mu.Lock()
	ids := make([]string, 0, len(p.running))
	for id, rt := range p.running {
		rt.handedBack = true
		ids = append(ids, id)
	}
	p.mu.Unlock()
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := p.dq.Requeue(ctx, id)
		cancel()
		if err != nil {
			p.log.Warn("could not hand a running task back; asynq's recovery will", core.AttrTaskID, id,
				core.AttrError, err)
		} else {
			p.log.Info("handed a running task back to the queue", core.AttrTaskID, id)
			p.acked.Signal(ackEvent{id, "requeue"})
		}
	}
	p.mu.Lock()
	for _, id := range ids {
		if rt := p.running[id]; rt != nil {
			rt.cancel()
		}
	}
	p.mu.Unlock()
}

// housekeeping renews the heartbeat and keeps the queue's house every
// housekeepEvery, and extends the running tasks' leases every leaseEvery,
// until ctx ends.
func (p *processor) housekeeping(ctx context.Context) {
	t := time.NewTicker(housekeepEvery)
	defer t.Stop()
	lastLease := p.e.cfg.Clock.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if now := p.e.cfg.Clock.Now(); now.Sub(lastLease) >= leaseEvery-housekeepEvery/2 {
			lastLease = now
			p.extendLeases(ctx, now)
		}
		p.housekeep(ctx)
	}
}

// extendLeases extends the leases of the tasks running here.
func (p *processor) extendLeases(ctx context.Context, now time.Time) {
	p.mu.Lock()
	ids := make([]string, 0, len(p.running))
	for id, rt := range p.running {
		if !rt.handedBack {
			ids = append(ids, id)
		}
	}
	p.mu.Unlock()
	if err := p.dq.ExtendLeases(ctx, ids, now); err != nil && ctx.Err() == nil {
		p.log.Warn("could not extend the leases of running tasks", core.AttrError, err, "tasks", len(ids))
	}
}

// housekeep is one pass of tasks.Dequeuer.Housekeep; the tasks whose lease
// expired are retried or archived as asynq's recoverer does.
func (p *processor) housekeep(ctx context.Context) {
	now := p.e.cfg.Clock.Now()
	h, err := p.dq.Housekeep(ctx, now, heartbeatTTL)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("cannot renew the worker's heartbeat; retrying", core.AttrError, err)
		}
		return
	}
	if h.HandedBack > 0 {
		p.log.Info("handed back the tasks claimed by a worker that stopped", "tasks", h.HandedBack)
	}
	for _, m := range h.Expired {
		p.mu.Lock()
		_, here := p.running[m.ID]
		p.mu.Unlock()
		if here {
			continue // its lease is extended here
		}
		p.recover(ctx, m, now)
	}
	p.housekept.Signal(h)
}

// recover retries or archives a task whose lease expired, as asynq's
// recoverer does (recoverer.go, v0.26).
func (p *processor) recover(ctx context.Context, m *tasks.Message, now time.Time) {
	errLease := asynq.ErrLeaseExpired
	var err error
	if m.Retried >= m.Retry {
		err = p.dq.Archive(ctx, m, errLease.Error(), now)
	} else {
		at := now.Add(retryDelay(m.Retried, errLease, asynq.NewTask(m.Type, m.Payload)))
		err = p.retryTask(ctx, m, at, errLease, IsFailure(errLease), now)
	}
	switch {
	case err == nil:
		p.log.Info("recovered a task whose lease expired", core.AttrTaskID, m.ID)
	case errors.Is(err, tasks.ErrNotActive):
	default:
		p.log.Warn("could not recover a task whose lease expired", core.AttrTaskID, m.ID, core.AttrError, err)
	}
}

// retryTask puts task m back in asynq's retry set for at, as asynq's Retry
// does, and wakes this worker's promoter for its due time.
func (p *processor) retryTask(ctx context.Context, m *tasks.Message, at time.Time, cause error, failure bool,
	now time.Time) error {
	if err := p.dq.Retry(ctx, m, at, cause.Error(), failure, now); err != nil {
		return err
	}
	p.e.disp.timers.wake(at)
	return nil
}

// cancellations cancels the context of a running handler whose task asynq's
// Inspector.CancelProcessing names, until ctx ends.
func (p *processor) cancellations(ctx context.Context) {
	for ctx.Err() == nil {
		sub := p.rdb.Subscribe(ctx, tasks.CancelChannel)
		if _, err := sub.Receive(ctx); err != nil {
			_ = sub.Close()
			if ctx.Err() == nil {
				p.log.Warn("cannot subscribe to asynq's cancellations; retrying", core.AttrError, err)
				_ = core.SleepContext(ctx, 5*time.Second)
			}
			continue
		}
		ch := sub.Channel()
	loop:
		for {
			select {
			case <-ctx.Done():
				break loop
			case msg, ok := <-ch:
				if !ok {
					break loop
				}
				p.mu.Lock()
				if rt := p.running[msg.Payload]; rt != nil {
					rt.cancel()
				}
				p.mu.Unlock()
			}
		}
		_ = sub.Close()
	}
}
