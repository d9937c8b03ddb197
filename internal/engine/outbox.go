package engine

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/internal/outbox"
	"github.com/cairnhq/cairn/retrystate"
)

// Offline enqueue: a Client opened with ClientConfig.Outbox queues its
// Starts and Signals in a local bbolt file while Redis is unreachable, and a
// flusher delivers them in order once Redis answers again.
//
// Idempotency of a flush: an entry is removed from the file only after it
// was applied, so a process killed between the two applies it again when it
// restarts. A queued Start carries the run ID the caller was given; applying
// it again finds that ID taken (retrystate.ErrRunIDCollision) or, with an
// idempotency key, the key naming that same ID, and takes either as "applied
// before". A queued Signal always carries a signal ID (one is generated when
// the caller gave none), which the run deduplicates.

// Errors of the outbox.
var (
	// ErrOutboxFull is returned by Start and Signal when they would queue
	// (Redis unreachable) but the outbox holds ClientConfig.OutboxMaxEntries
	// entries or OutboxMaxBytes bytes; nothing was queued.
	ErrOutboxFull = outbox.ErrFull
	// ErrOutboxLocked is returned by OpenClient and ReadOutbox when another
	// process has the outbox file open (one process at a time may) for
	// longer than ClientConfig.OutboxLockTimeout.
	ErrOutboxLocked = outbox.ErrLocked
)

// OutboxKind is what a queued entry does.
type OutboxKind string

// Outbox entry kinds.
const (
	OutboxStart  OutboxKind = "start"
	OutboxSignal OutboxKind = "signal"
)

// OutboxEntry is a Start or a Signal queued in the outbox, or a dead letter:
// one that could not be applied.
type OutboxEntry struct {
	// Seq orders the entries: they are applied in Seq order.
	Seq  uint64     `json:"seq"`
	Kind OutboxKind `json:"kind"`
	// RunID is the run started (the ID Start returned) or signalled.
	RunID string `json:"run_id"`
	// Workflow, Input, Owner, IdempotencyKey and OrderingKey: a Start's.
	Workflow       string          `json:"workflow,omitempty"`
	Input          json.RawMessage `json:"input,omitempty"`
	Owner          string          `json:"owner,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	OrderingKey    string          `json:"ordering_key,omitempty"`
	SharedOrdering bool            `json:"shared_ordering,omitempty"`
	// Trace is a Start's trace context (see ClientConfig.TracerProvider).
	Trace string `json:"trace,omitempty"`
	// Signal, SignalID, Payload and Actor: a Signal's (SignalID was
	// generated when the caller gave none).
	Signal   string          `json:"signal,omitempty"`
	SignalID string          `json:"signal_id,omitempty"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	Actor    string          `json:"actor,omitempty"`
	// QueuedAt is when it was queued.
	QueuedAt time.Time `json:"queued_at"`
	// Attempts counts the flushes that could not reach Redis with it;
	// LastError and LastAttemptAt are the last one's.
	Attempts      int        `json:"attempts"`
	LastError     string     `json:"last_error,omitempty"`
	LastAttemptAt *time.Time `json:"last_attempt_at,omitempty"`
	// DeadAt and DeadReason: a dead letter's, when and why it was taken out
	// of the queue.
	DeadAt     *time.Time `json:"dead_at,omitempty"`
	DeadReason string     `json:"dead_reason,omitempty"`
}

// OutboxContents are the entries of an outbox.
type OutboxContents struct {
	// Queued are the entries waiting to be applied, in order.
	Queued []OutboxEntry `json:"queued"`
	// Dead are the dead letters, oldest first.
	Dead []OutboxEntry `json:"dead"`
}

// OutboxStats describe a client's outbox, for metrics.
type OutboxStats struct {
	// Entries and Bytes are the queued entries and their size.
	Entries int   `json:"entries"`
	Bytes   int64 `json:"bytes"`
	// MaxEntries and MaxBytes are the bounds.
	MaxEntries int   `json:"max_entries"`
	MaxBytes   int64 `json:"max_bytes"`
	// DeadLetters is the number of dead letters kept.
	DeadLetters int `json:"dead_letters"`
	// Oldest is when the oldest queued entry was queued, and OldestAge
	// its age by the client's clock (zero when none).
	Oldest    time.Time     `json:"oldest,omitzero"`
	OldestAge time.Duration `json:"oldest_age,omitzero"`
	// Flushed and DeadLettered count the entries this client applied and
	// dead-lettered since it was opened.
	Flushed      uint64 `json:"flushed"`
	DeadLettered uint64 `json:"dead_lettered"`
}

// OutboxFlush is what FlushOutbox did.
type OutboxFlush struct {
	// Flushed entries were applied (or found applied before) and removed.
	Flushed int `json:"flushed"`
	// DeadLettered entries were refused (see ClientConfig.Outbox) and moved
	// to the dead letters.
	DeadLettered int `json:"dead_lettered"`
	// Remaining entries are still queued.
	Remaining int `json:"remaining"`
}

// Defaults of the outbox settings of ClientConfig.
const (
	DefaultOutboxMaxEntries  = outbox.DefaultMaxEntries
	DefaultOutboxMaxBytes    = outbox.DefaultMaxBytes
	DefaultOutboxLockTimeout = outbox.DefaultLockTimeout
)

// The flusher's backoff while Redis stays unreachable.
const (
	outboxBackoffShortest = 200 * time.Millisecond
	outboxBackoffLongest  = 10 * time.Second
)

// clientOutbox is a client's open outbox and its flusher.
type clientOutbox struct {
	c *Client

	mu  sync.RWMutex
	box *outbox.Box // nil once closed

	flushMu sync.Mutex // one flush at a time
	kick    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}

	flushed, deadLettered atomic.Uint64
}

// OpenClient returns a client of the workflow state in rdb, like NewClient,
// and opens the outbox cfg.Outbox names, if any (see ClientConfig.Outbox):
// it creates the file if needed, waiting up to cfg.OutboxLockTimeout for
// another process that has it open (ErrOutboxLocked), and starts the
// background flusher, which at once delivers what an earlier process left
// queued. Close the client to stop the flusher and close the file.
func OpenClient(rdb redis.UniversalClient, cfg ClientConfig) (*Client, error) {
	c := newClient(rdb, cfg)
	if cfg.Outbox == "" {
		return c, nil
	}
	box, err := outbox.Open(cfg.Outbox, c.outboxOptions(false))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	ob := &clientOutbox{c: c, box: box, kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	c.ob = ob
	go ob.run(ctx)
	return c, nil
}

func (c *Client) outboxOptions(readOnly bool) outbox.Options {
	return outbox.Options{MaxEntries: c.cfg.OutboxMaxEntries, MaxBytes: c.cfg.OutboxMaxBytes,
		LockTimeout: c.cfg.OutboxLockTimeout, ReadOnly: readOnly}
}

// Close stops the outbox's flusher (an entry it was applying stays queued
// and is applied again, idempotently, by the next flush) and closes the
// outbox file. The client keeps working, as one without an outbox. It does
// not close the Redis client. Close of a client without an outbox does
// nothing; a second Close neither.
func (c *Client) Close() error {
	ob := c.ob
	if ob == nil {
		return nil
	}
	ob.cancel()
	<-ob.done
	ob.flushMu.Lock()
	defer ob.flushMu.Unlock()
	ob.mu.Lock()
	defer ob.mu.Unlock()
	if ob.box == nil {
		return nil
	}
	err := ob.box.Close()
	ob.box = nil
	return err
}

// errOutboxClosed: the client was closed; it works as one without an
// outbox.
var errOutboxClosed = errors.New("outbox closed")

// with runs fn on the open box, or returns errOutboxClosed.
func (o *clientOutbox) with(fn func(b *outbox.Box) error) error {
	if o == nil {
		return errOutboxClosed
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.box == nil {
		return errOutboxClosed
	}
	return fn(o.box)
}

// backlog reports whether entries are queued: a Start or Signal then queues
// behind them, so that the order holds.
func (o *clientOutbox) backlog() bool {
	n := 0
	_ = o.with(func(b *outbox.Box) error {
		var err error
		n, err = b.Len()
		return err
	})
	return n > 0
}

// append queues e and wakes the flusher.
func (o *clientOutbox) append(e *OutboxEntry) error {
	v, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := o.with(func(b *outbox.Box) error {
		e.Seq, err = b.Append(v)
		return err
	}); err != nil {
		return err
	}
	select {
	case o.kick <- struct{}{}:
	default:
	}
	return nil
}

// run is the background flusher: it flushes at once, then whenever an entry
// is queued, and while Redis stays unreachable every so often, backing off
// from outboxBackoffShortest to outboxBackoffLongest (with jitter).
func (o *clientOutbox) run(ctx context.Context) {
	defer close(o.done)
	delay := time.Duration(0)
	for {
		_, err := o.c.FlushOutbox(ctx)
		if ctx.Err() != nil {
			return
		}
		var wait <-chan time.Time
		if err == nil {
			delay = 0
		} else {
			delay = min(max(2*delay, outboxBackoffShortest), outboxBackoffLongest)
			t := time.NewTimer(delay/2 + rand.N(delay/2+1))
			wait = t.C
		}
		select {
		case <-ctx.Done():
			return
		case <-wait:
		case <-o.kick:
			if wait != nil {
				// Redis was unreachable a moment ago: wait out the backoff
				// rather than try again for every entry queued meanwhile.
				select {
				case <-ctx.Done():
					return
				case <-wait:
				}
			}
		}
	}
}

// queueStart queues a Start and returns the run it will be.
func (c *Client) queueStart(r startReq, cause error) (*core.Run, error) {
	now := c.cfg.Clock.Now()
	e := &OutboxEntry{Kind: OutboxStart, RunID: r.id, Workflow: r.workflow, Input: r.input, Owner: r.owner,
		IdempotencyKey: r.idemKey, OrderingKey: r.ordKey, SharedOrdering: r.ordShared, Trace: r.trace, QueuedAt: now}
	if err := c.ob.append(e); err != nil {
		if errors.Is(err, errOutboxClosed) && cause != nil {
			return nil, cause
		}
		return nil, fmt.Errorf("cannot queue the start of %s in the outbox: %w", r.workflow, err)
	}
	log := c.log.With(core.AttrRunID, r.id, core.AttrWorkflow, r.workflow, "outbox_seq", e.Seq)
	if cause != nil {
		log.Warn("Redis unreachable; start queued in the outbox", core.AttrError, cause.Error())
	} else {
		log.Info("start queued in the outbox behind earlier entries")
	}
	return queuedRun(e), nil
}

// queuedRun is the Run a queued start will be.
func queuedRun(e *OutboxEntry) *core.Run {
	return &core.Run{ID: e.RunID, Workflow: e.Workflow, Status: core.StatusPending, Owner: e.Owner,
		IdempotencyKey: e.IdempotencyKey, Input: e.Input, OrderingKey: e.OrderingKey, OrderingShared: e.SharedOrdering, CreatedAt: e.QueuedAt,
		UpdatedAt: e.QueuedAt, Queued: true}
}

// queueSignal queues a Signal.
func (c *Client) queueSignal(runID, name string, payload json.RawMessage, id, actor string, cause error) (*core.SignalResult, error) {
	e := &OutboxEntry{Kind: OutboxSignal, RunID: runID, Signal: name, SignalID: id, Payload: payload, Actor: actor,
		QueuedAt: c.cfg.Clock.Now()}
	if err := c.ob.append(e); err != nil {
		if errors.Is(err, errOutboxClosed) && cause != nil {
			return nil, cause
		}
		return nil, fmt.Errorf("cannot queue signal %s for run %s in the outbox: %w", name, runID, err)
	}
	log := c.log.With(core.AttrRunID, runID, "signal", name, "signal_id", id, "outbox_seq", e.Seq)
	if cause != nil {
		log.Warn("Redis unreachable; signal queued in the outbox", core.AttrError, cause.Error())
	} else {
		log.Info("signal queued in the outbox behind earlier entries")
	}
	return &core.SignalResult{Outcome: core.SignalOutbox, ID: id}, nil
}

// newSignalID returns an ID for a signal the caller gave none: "ob_" and
// 24 hex digits.
func newSignalID() string {
	var b [12]byte
	_, _ = crand.Read(b[:])
	return "ob_" + hex.EncodeToString(b[:])
}

// shouldQueue reports whether a Start or Signal that failed with err
// queues: the client has an outbox, the caller's context is not done, and
// err says Redis could not be reached.
func (c *Client) shouldQueue(ctx context.Context, err error) bool {
	return c.ob != nil && ctx.Err() == nil && core.RedisUnreachable(err)
}

// FlushOutbox applies the queued entries, oldest first, until the outbox is
// empty (nil error), Redis cannot be reached (an error wrapping the last
// one; the entry that met it stays first, with its attempts and last error
// updated), or ctx is done. An entry Redis refuses (its workflow is unknown
// when it is applied, its run or signal is refused) becomes a dead letter:
// it is logged at error level, counted, kept in the outbox's dead letters
// and the flush goes on. The background flusher calls it too; one flush runs
// at a time. A client without an outbox has nothing to flush.
func (c *Client) FlushOutbox(ctx context.Context) (OutboxFlush, error) {
	var rep OutboxFlush
	ob := c.ob
	if ob == nil {
		return rep, nil
	}
	ob.flushMu.Lock()
	defer ob.flushMu.Unlock()
	remaining := func() int {
		n := 0
		_ = ob.with(func(b *outbox.Box) error {
			n, _ = b.Len()
			return nil
		})
		return n
	}
	for {
		if err := ctx.Err(); err != nil {
			rep.Remaining = remaining()
			return rep, err
		}
		var it outbox.Item
		var ok bool
		err := ob.with(func(b *outbox.Box) error {
			var err error
			it, ok, err = b.First()
			return err
		})
		if errors.Is(err, errOutboxClosed) {
			return rep, nil
		}
		if err != nil {
			return rep, err
		}
		if !ok {
			return rep, nil
		}
		var e OutboxEntry
		if err := json.Unmarshal(it.Value, &e); err != nil {
			e = OutboxEntry{Kind: "unreadable", Input: json.RawMessage(strconvQuote(it.Value))}
			err = fmt.Errorf("unreadable entry: %w", err)
			if berr := c.bury(it.Seq, &e, err); berr != nil {
				return rep, berr
			}
			rep.DeadLettered++
			continue
		}
		e.Seq = it.Seq
		alias, err := c.applyEntry(ctx, &e)
		switch {
		case err == nil:
			var ak, av []byte
			if alias != "" {
				ak, av = []byte(e.RunID), []byte(alias)
			}
			// Counted before the entry goes (OutboxStats reads the box, then
			// the counters: an entry it sees gone is counted).
			ob.flushed.Add(1)
			if err := ob.with(func(b *outbox.Box) error { return b.Delete(it.Seq, ak, av) }); err != nil {
				ob.flushed.Add(^uint64(0))
				return rep, err
			}
			rep.Flushed++
		case ctx.Err() != nil || errors.Is(err, redis.ErrClosed):
			rep.Remaining = remaining()
			return rep, err
		case core.RedisUnreachable(err) || core.RedisBusy(err):
			now := c.cfg.Clock.Now()
			e.Attempts++
			e.LastError, e.LastAttemptAt = err.Error(), &now
			if v, merr := json.Marshal(&e); merr == nil {
				_ = ob.with(func(b *outbox.Box) error { return b.Update(it.Seq, v) })
			}
			rep.Remaining = remaining()
			return rep, fmt.Errorf("outbox: %d entries wait for Redis: %w", rep.Remaining, err)
		default:
			if berr := c.bury(it.Seq, &e, err); berr != nil {
				return rep, berr
			}
			rep.DeadLettered++
		}
	}
}

func strconvQuote(b []byte) string {
	q, _ := json.Marshal(string(b))
	return string(q)
}

// bury moves entry seq to the dead letters because of err.
func (c *Client) bury(seq uint64, e *OutboxEntry, cause error) error {
	now := c.cfg.Clock.Now()
	e.DeadAt, e.DeadReason = &now, cause.Error()
	v, err := json.Marshal(e)
	if err != nil {
		return err
	}
	var dropped int
	c.ob.deadLettered.Add(1) // before the entry moves, as flush counts flushed
	if err := c.ob.with(func(b *outbox.Box) error {
		dropped, err = b.Bury(seq, v)
		return err
	}); err != nil {
		c.ob.deadLettered.Add(^uint64(0))
		return err
	}
	c.log.Error("outbox entry refused; moved to the dead letters (enqueue outbox lists them)",
		"kind", string(e.Kind), core.AttrRunID, e.RunID, core.AttrWorkflow, e.Workflow, "signal", e.Signal,
		"outbox_seq", seq, core.AttrReason, cause.Error())
	if dropped > 0 {
		c.log.Error("outbox dead letters full: the oldest were dropped", "dropped", dropped)
	}
	return nil
}

// applyEntry applies a queued entry. alias, when not empty, is the run a
// queued Start's idempotency key named: no run was created, and Get of the
// queued run ID returns that run.
func (c *Client) applyEntry(ctx context.Context, e *OutboxEntry) (alias string, err error) {
	switch e.Kind {
	case OutboxStart:
		return c.applyStart(ctx, e)
	case OutboxSignal:
		return "", c.applySignal(ctx, e)
	default:
		return "", fmt.Errorf("unknown outbox entry kind %q", e.Kind)
	}
}

func (c *Client) applyStart(ctx context.Context, e *OutboxEntry) (string, error) {
	// Start checked it before queueing it; an outbox written by an older
	// version may hold what Start refuses now.
	if err := core.CheckJSON(e.Input); err != nil {
		return "", fmt.Errorf("%w: %w", core.ErrInvalidInput, err)
	}
	log := c.log.With(core.AttrRunID, e.RunID, core.AttrWorkflow, e.Workflow, "outbox_seq", e.Seq)
	created, err := c.create(ctx, startReq{id: e.RunID, workflow: e.Workflow, input: e.Input, owner: e.Owner,
		idemKey: e.IdempotencyKey, ordKey: e.OrderingKey, ordShared: e.SharedOrdering && e.OrderingKey != "", trace: e.Trace})
	if errors.Is(err, retrystate.ErrRunIDCollision) {
		// An earlier flush created it and did not get to remove the entry.
		rec, err := c.store.Run(ctx, e.RunID)
		if err != nil {
			return "", err
		}
		if rec.Workflow != e.Workflow || rec.Owner != e.Owner {
			return "", fmt.Errorf("run ID %s is taken by a run of workflow %q, owner %q", e.RunID, rec.Workflow, rec.Owner)
		}
		log.Info("queued start was applied before; nothing to do")
		c.ensureFirstLogged(ctx, log, e.RunID)
		return "", nil
	}
	if err != nil {
		return "", err
	}
	switch created.Outcome {
	case retrystate.OutcomeExists:
		if created.RunID == e.RunID {
			log.Info("queued start was applied before; nothing to do")
			c.ensureFirstLogged(ctx, log, e.RunID)
			return "", nil
		}
		wf, err := c.store.RunWorkflow(ctx, created.RunID)
		if err != nil {
			return "", err
		}
		if wf != e.Workflow {
			return "", fmt.Errorf("%w: key %q started run %s of workflow %q", core.ErrIdempotencyConflict,
				e.IdempotencyKey, created.RunID, wf)
		}
		log.Info("queued start's idempotency key names a run already: no run created; the queued ID stands for it",
			"existing_run_id", created.RunID)
		c.ensureFirstLogged(ctx, log, created.RunID)
		return created.RunID, nil
	case retrystate.OutcomeWaiting:
		log.Info("queued run started; waiting for its turn", "waiting_for", string(created.WaitReason),
			"position", created.Position)
	default:
		if !created.Enqueued {
			if err := c.disp.Enqueue(ctx, created.RunID, e.Workflow, *created.Dispatch); err != nil {
				log.Warn("queued run created but its first task was not enqueued (the reconciler will enqueue it)",
					core.AttrError, err.Error())
			}
		}
		log.Info("queued run started")
	}
	return "", nil
}

// ensureFirstLogged makes sure a pending run's first task exists (the flush
// that created it may have died before enqueueing it); a failure is left to
// the reconciler.
func (c *Client) ensureFirstLogged(ctx context.Context, log *slog.Logger, id string) {
	if err := c.ensureFirst(ctx, id); err != nil && !errors.Is(err, retrystate.ErrRunNotFound) {
		log.Warn("cannot make sure the run's first task exists (the reconciler will)", core.AttrError, err.Error())
	}
}

func (c *Client) applySignal(ctx context.Context, e *OutboxEntry) error {
	if err := core.CheckJSON(e.Payload); err != nil { // as in applyStart
		return fmt.Errorf("%w: signal payload: %w", core.ErrInvalidInput, err)
	}
	target := e.RunID
	if alias := c.ob.alias(e.RunID); alias != "" {
		target = alias
	}
	out, err := c.signal(ctx, target, e.Signal, e.Payload, e.SignalID, e.Actor)
	if out != nil {
		if err != nil {
			c.log.Warn("queued signal delivered, but the next step's task was not enqueued (the reconciler will)",
				core.AttrRunID, target, "signal", e.Signal, core.AttrError, err.Error())
		}
		return nil
	}
	return err
}

// alias returns the run a queued start's ID stands for ("" for none).
func (o *clientOutbox) alias(id string) string {
	var v []byte
	_ = o.with(func(b *outbox.Box) error {
		var err error
		v, err = b.Alias([]byte(id))
		return err
	})
	return string(v)
}

// lookup finds what the outbox knows of run id, which Redis does not hold:
// the run its queued start will be, the run its start's idempotency key
// named, or the dead letter of its start (ErrRunNotFound saying so). ok is
// false when the outbox knows nothing of it.
func (c *Client) lookupQueued(ctx context.Context, id string) (run *core.Run, ok bool, err error) {
	if alias := c.ob.alias(id); alias != "" {
		run, err := c.Get(ctx, alias)
		return run, true, err
	}
	contents, err := c.outboxContents()
	if err != nil {
		return nil, false, nil //nolint:nilerr // an outbox that cannot be read knows nothing: Get reports Redis's answer
	}
	for i := range contents.Queued {
		if e := &contents.Queued[i]; e.Kind == OutboxStart && e.RunID == id {
			return queuedRun(e), true, nil
		}
	}
	for i := range contents.Dead {
		if e := &contents.Dead[i]; e.Kind == OutboxStart && e.RunID == id {
			return nil, true, fmt.Errorf("%w: %s (its queued start is a dead letter of the outbox: %s)", core.ErrRunNotFound, id,
				e.DeadReason)
		}
	}
	return nil, false, nil
}

func (c *Client) outboxContents() (*OutboxContents, error) {
	var out OutboxContents
	err := c.ob.with(func(b *outbox.Box) error {
		var err error
		out.Queued, out.Dead, err = readBox(b)
		return err
	})
	return &out, err
}

func readBox(b *outbox.Box) (queued, dead []OutboxEntry, err error) {
	decode := func(items []outbox.Item) []OutboxEntry {
		out := make([]OutboxEntry, 0, len(items))
		for _, it := range items {
			var e OutboxEntry
			if err := json.Unmarshal(it.Value, &e); err != nil {
				e = OutboxEntry{Kind: "unreadable", LastError: err.Error()}
			}
			e.Seq = it.Seq
			out = append(out, e)
		}
		return out
	}
	q, err := b.Queued()
	if err != nil {
		return nil, nil, err
	}
	d, err := b.Dead()
	if err != nil {
		return nil, nil, err
	}
	return decode(q), decode(d), nil
}

// Outbox returns the client's queued entries and dead letters (both empty
// for a client without an outbox).
func (c *Client) Outbox() (*OutboxContents, error) {
	if c.ob == nil {
		return &OutboxContents{Queued: []OutboxEntry{}, Dead: []OutboxEntry{}}, nil
	}
	out, err := c.outboxContents()
	if errors.Is(err, errOutboxClosed) {
		return &OutboxContents{Queued: []OutboxEntry{}, Dead: []OutboxEntry{}}, nil
	}
	return out, err
}

// ReadOutbox reads the outbox file at path without opening a client: for a
// tool that shows what another process queued. It waits up to lockTimeout
// (default DefaultOutboxLockTimeout) while a process has the file open
// (ErrOutboxLocked after that). A file that does not exist is an empty
// outbox.
func ReadOutbox(path string, lockTimeout time.Duration) (*OutboxContents, error) {
	out := &OutboxContents{Queued: []OutboxEntry{}, Dead: []OutboxEntry{}}
	b, err := outbox.Open(path, outbox.Options{ReadOnly: true, LockTimeout: lockTimeout})
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer b.Close()
	out.Queued, out.Dead, err = readBox(b)
	return out, err
}

// OutboxStats returns the size of the client's outbox and what its flushes
// did, for metrics; zero for a client without an outbox.
func (c *Client) OutboxStats() (OutboxStats, error) {
	var st OutboxStats
	ob := c.ob
	if ob == nil {
		return st, nil
	}
	err := ob.with(func(b *outbox.Box) error {
		s, err := b.Stats()
		if err != nil {
			return err
		}
		st.Entries, st.Bytes, st.DeadLetters, st.MaxEntries, st.MaxBytes = s.Entries, s.Bytes, s.Dead, s.MaxEntries, s.MaxBytes
		if s.Entries == 0 {
			return nil
		}
		first, ok, err := b.First()
		if err != nil || !ok {
			return err
		}
		var e OutboxEntry
		if json.Unmarshal(first.Value, &e) == nil {
			st.Oldest, st.OldestAge = e.QueuedAt, c.cfg.Clock.Now().Sub(e.QueuedAt)
		}
		return nil
	})
	// The box, then the counters: the flush counts an entry before it moves
	// it, so an entry seen gone above is counted.
	st.Flushed, st.DeadLettered = ob.flushed.Load(), ob.deadLettered.Load()
	if errors.Is(err, errOutboxClosed) {
		err = nil
	}
	return st, err
}

// RequeueOutboxDeadLetters moves the dead letters back to the end of the
// queue (their attempts and reasons cleared), as many as fit; it returns
// how many it moved, and ErrOutboxFull when some did not fit. They are
// applied after the entries queued before them: the order they had is
// lost.
func (c *Client) RequeueOutboxDeadLetters() (int, error) {
	var n int
	err := c.ob.with(func(b *outbox.Box) error {
		var err error
		n, err = b.Requeue(func(v []byte) []byte {
			var e OutboxEntry
			if json.Unmarshal(v, &e) != nil || e.Kind == "unreadable" {
				return v
			}
			e.DeadAt, e.DeadReason, e.Attempts, e.LastError, e.LastAttemptAt = nil, "", 0, "", nil
			out, err := json.Marshal(&e)
			if err != nil {
				return v
			}
			return out
		})
		return err
	})
	if errors.Is(err, errOutboxClosed) {
		return 0, nil
	}
	if n > 0 {
		select {
		case c.ob.kick <- struct{}{}:
		default:
		}
	}
	return n, err
}

// DropOutboxDeadLetters deletes the dead letters and returns how many there
// were.
func (c *Client) DropOutboxDeadLetters() (int, error) {
	var n int
	err := c.ob.with(func(b *outbox.Box) error {
		var err error
		n, err = b.DropDead()
		return err
	})
	if errors.Is(err, errOutboxClosed) {
		return 0, nil
	}
	return n, err
}
