package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/webhook"
)

// ClientConfig configures a Client. A zero field takes the default given in
// its comment.
type ClientConfig struct {
	// Queue must match the workers' queue. Default DefaultQueue.
	Queue string
	// Retention must match the workers' retention; it applies to runs the
	// client cancels. Default 7 days.
	Retention time.Duration
	// MaxInputBytes bounds the input of a run. Default 1 MiB.
	MaxInputBytes int
	// Clock tells the time. Default SystemClock.
	Clock core.Clock
	// Logger receives the client's logs. Default slog.Default().
	Logger *slog.Logger
	// Observer is told of the runs the client's actions end (cancel, skip
	// of a last step), for metrics. Default NopObserver.
	Observer core.Observer
	// TracerProvider, when set, records a span "cairn.start <workflow>"
	// for each run Start creates, a child of the span in Start's context,
	// and stores that span's context with the run: the workers' attempt
	// spans join its trace. Nil: no span, and Start stores the span
	// context of its ctx, if any (see tracing.go).
	TracerProvider trace.TracerProvider
	// Definitions are workflows the client knows. A Start of one of them
	// that finds no version of it published (no worker has published it
	// yet) publishes it first, as a worker would, so that runs can be
	// started before any worker is up: they wait, pending, for one. Once a
	// version is published, by a worker or by a client, Start uses the
	// published one, as without Definitions: the workers' Publish stays
	// the authority, and a run keeps the version it started with. A
	// workflow neither published nor known here is ErrUnknownWorkflow. A
	// definition is checked when it is first needed: an invalid one makes
	// Start return ErrInvalidDefinition. Step functions are not called by
	// the client. Nil: the client starts only published workflows.
	Definitions []core.Definition
	// Defaults is the global policy under which Definitions are published:
	// the EngineConfig.Defaults of the workers that run them, so that both
	// publish the same version. Zero: the built-in defaults.
	Defaults core.Policy

	// Outbox, when set, is the path of a local file (a bbolt database,
	// created if needed) where Start and Signal are queued while Redis is
	// unreachable; only OpenClient opens it (NewClient panics when it is
	// set). Such a Start returns at once the run it will be, with
	// Run.Queued set and the run ID the run will have; such a Signal
	// returns SignalOutbox. While entries are queued, later Starts and
	// Signals queue behind them, so that the order holds. A background
	// flusher applies the entries in order when Redis answers again (see
	// FlushOutbox), each exactly once even when the process is killed in
	// the middle of a flush.
	//
	// Only errors that mean Redis was not reached (a failed dial, a
	// refused or reset connection, a timeout, the client's pool timeout,
	// LOADING and the like) queue; refusals (ErrInvalidInput,
	// ErrUnknownWorkflow, ErrRunNotFound, ...) are returned as without an
	// outbox, and so is everything when ctx is done. What Redis refuses
	// when an entry is applied (a workflow no worker has published, a
	// signal the run refuses) moves the entry to the outbox's dead letters,
	// logged at error level and listed by Outbox.
	//
	// A queued Start with an IdempotencyKey that, when it is applied, names
	// a run already creates nothing: the queued run ID then stands for that
	// run (Get of it returns that run, whose ID differs; a queued Signal to
	// it goes to that run).
	//
	// One process at a time may open the file: OpenClient waits up to
	// OutboxLockTimeout for another one, then returns ErrOutboxLocked.
	Outbox string
	// OutboxMaxEntries bounds the entries queued; a Start or Signal that
	// would queue one more returns ErrOutboxFull. Default
	// DefaultOutboxMaxEntries (10,000).
	OutboxMaxEntries int
	// OutboxMaxBytes bounds the size of the entries queued (their input
	// or payload, and some 300 bytes each): past it, ErrOutboxFull.
	// Default DefaultOutboxMaxBytes (64 MiB).
	OutboxMaxBytes int64
	// OutboxLockTimeout bounds OpenClient's wait for another process that
	// has the outbox open. Default DefaultOutboxLockTimeout (5s).
	OutboxLockTimeout time.Duration
}

// Client starts runs and reads and steers them. It needs no workflow code:
// workers publish their definitions to Redis, and Start takes the step list
// and policies from there.
type Client struct {
	cfg   ClientConfig
	rdb   redis.UniversalClient
	store *retrystate.Store
	disp  *dispatcher
	log   *slog.Logger
	ob    *clientOutbox // nil without an outbox
	// tracing is nil unless ClientConfig.TracerProvider is set.
	tracing *tracer
	// defs holds the published definitions the client has read, by
	// workflow name (*publishedDef).
	defs sync.Map
}

// Queue returns the queue whose runs the client reads and steers (its
// name is the Redis Cluster hash tag of their keys).
func (c *Client) Queue() string { return c.cfg.Queue }

// NewClient returns a client of the workflow state in rdb. It panics when
// cfg.Outbox is set: OpenClient opens an outbox, and returns its errors.
func NewClient(rdb redis.UniversalClient, cfg ClientConfig) *Client {
	if cfg.Outbox != "" {
		panic("workflow: NewClient with ClientConfig.Outbox set; use OpenClient, which opens the outbox")
	}
	return newClient(rdb, cfg)
}

func newClient(rdb redis.UniversalClient, cfg ClientConfig) *Client {
	if cfg.Queue == "" {
		cfg.Queue = DefaultQueue
	}
	if cfg.Retention == 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.MaxInputBytes == 0 {
		cfg.MaxInputBytes = 1 << 20
	}
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Observer = core.OrNop(cfg.Observer)
	return &Client{
		cfg:     cfg,
		rdb:     rdb,
		store:   retrystate.New(rdb, cfg.Queue),
		disp:    newDispatcher(rdb, cfg.Queue, cfg.Clock),
		log:     cfg.Logger,
		tracing: newTracer(cfg.TracerProvider),
	}
}

// StartOptions are the options of Client.Start.
type StartOptions struct {
	// IdempotencyKey, when set, makes Start idempotent: a later Start with
	// the same key and Owner returns the run the first one started (for as
	// long as that run is retained) and starts nothing. Keys are scoped by
	// Owner: another owner's equal key is another key, so one owner can
	// neither collide with nor learn of another's runs through a key.
	IdempotencyKey string
	// Owner is the subject that starts the run (an API user, a service).
	Owner string
	// OrderingKey, when set, puts the run in the line of Owner's runs with
	// the same key in the queue: they start in start order, at most the
	// workflow's Ordering.Concurrency at once (CheckOrderingKey says what a
	// key may hold). A run that must wait is returned pending, with
	// WaitingFor set. Keys are scoped by Owner, as idempotency keys are:
	// another owner's equal key is another line, so no owner can delay,
	// block or observe another's runs through a key.
	OrderingKey string
	// SharedOrdering puts the run in the shared line of OrderingKey, which
	// runs of every owner join, instead of Owner's own line: for a trusted
	// caller that orders runs of several owners on purpose (the HTTP API
	// allows it to admins only). A run without an Owner is always in the
	// shared line, so a client that sets no Owner needs no SharedOrdering.
	SharedOrdering bool
}

// Start starts a run of the named workflow with input, which is any value
// that marshals to JSON; a json.RawMessage or []byte must hold valid JSON. A
// nil input is {}. It returns ErrUnknownWorkflow for a workflow no worker has
// published, ErrInvalidInput for input that is not JSON, is too large, or is
// JSON that readers take differently (CheckJSON: invalid UTF-8, a lone
// surrogate, a duplicate key; the error says where, wrapping a
// *JSONError); in either case nothing is written.
//
// A Start is one round trip to Redis: one script creates the run and writes
// its first task, and the Run returned is built from what the client knows
// (the client keeps the definitions it has read; a definition a worker has
// published since is read again). With an idempotency key that started a
// run before, that run is read and returned.
//
// With an outbox (ClientConfig.Outbox), a Start that cannot reach Redis, or
// that comes while earlier entries are queued, is queued instead: it returns
// the run it will be, pending with Queued set and the run ID the run will
// have, or ErrOutboxFull.
func (c *Client) Start(ctx context.Context, workflow string, input any, opts *StartOptions) (*core.Run, error) {
	res := c.StartMany(ctx, []StartRequest{{Workflow: workflow, Input: input, Options: opts}})
	return res[0].Run, res[0].Err
}

// StartRequest is one run for StartMany to start: the arguments of Start.
type StartRequest struct {
	Workflow string
	Input    any
	Options  *StartOptions // nil: none
}

// StartResult is the outcome of one StartRequest: the run started (or
// queued, or named by the idempotency key), or the error Start would have
// returned.
type StartResult struct {
	Run *core.Run
	Err error
}

// StartMany starts runs as Start does, each as if started alone (its own
// idempotency key, ordering key and outcome), in one round trip to Redis
// for all of them: the runs are created in one pipeline. It returns one
// result per request, in order; a request that fails (ErrUnknownWorkflow,
// ErrInvalidInput, Redis unreachable without an outbox, ...) does not keep
// the others from starting. Runs started with an idempotency key that
// names a run already are read after, as with Start. With an outbox, the
// requests that cannot reach Redis are queued, in order.
func (c *Client) StartMany(ctx context.Context, reqs []StartRequest) []StartResult {
	out := make([]StartResult, len(reqs))
	checked := make([]startReq, 0, len(reqs))
	at := make([]int, 0, len(reqs)) // index in reqs of each checked request
	for i, q := range reqs {
		r, err := c.checkStart(q)
		if err != nil {
			out[i].Err = err
			continue
		}
		r.trace = c.tracing.startRun(ctx, r.workflow, r.id)
		checked = append(checked, r)
		at = append(at, i)
	}
	if c.ob != nil && c.ob.backlog() {
		for j, r := range checked {
			out[at[j]].Run, out[at[j]].Err = c.queueStart(r, nil)
		}
		return out
	}
	created := c.createMany(ctx, checked)
	for j, r := range checked {
		out[at[j]].Run, out[at[j]].Err = c.started(ctx, r, created[j])
	}
	return out
}

// checkStart checks a StartRequest and gives its run an ID.
func (c *Client) checkStart(q StartRequest) (startReq, error) {
	opts := q.Options
	if opts == nil {
		opts = &StartOptions{}
	}
	if !core.NameRE.MatchString(q.Workflow) {
		return startReq{}, fmt.Errorf("%w %q", core.ErrUnknownWorkflow, q.Workflow)
	}
	if len(opts.IdempotencyKey) > 256 {
		return startReq{}, fmt.Errorf("%w: idempotency key longer than 256 bytes", core.ErrInvalidInput)
	}
	if opts.OrderingKey != "" {
		if err := core.CheckOrderingKey(opts.OrderingKey); err != nil {
			return startReq{}, err
		}
	}
	raw, err := c.encodeInput(q.Input)
	if err != nil {
		return startReq{}, err
	}
	r := startReq{id: core.NewRunID(c.cfg.Clock.Now()), workflow: q.Workflow, input: raw, owner: opts.Owner,
		idemKey: opts.IdempotencyKey, ordKey: opts.OrderingKey, ordShared: opts.SharedOrdering && opts.OrderingKey != ""}
	return r, nil
}

// started turns the create of r into the run Start returns.
func (c *Client) started(ctx context.Context, r startReq, cr createResult) (*core.Run, error) {
	if cr.err != nil {
		if c.shouldQueue(ctx, cr.err) {
			return c.queueStart(r, cr.err)
		}
		return nil, cr.err
	}
	switch cr.res.Outcome {
	case retrystate.OutcomeExists:
		run, err := c.Get(ctx, cr.res.RunID)
		if err != nil {
			return nil, err
		}
		if run.Workflow != r.workflow {
			return nil, fmt.Errorf("%w: key %q started run %s of workflow %q", core.ErrIdempotencyConflict,
				r.idemKey, run.ID, run.Workflow)
		}
		if run.Status == core.StatusPending {
			// The first Start may have died before enqueueing; make sure the
			// first task exists (a no-op when it does).
			if err := c.ensureFirst(ctx, run.ID); err != nil {
				return nil, err
			}
		}
		return run, nil
	case retrystate.OutcomeWaiting:
		c.log.Info("run started; waiting for its turn", core.AttrRunID, cr.res.RunID, core.AttrWorkflow, r.workflow,
			"waiting_for", string(cr.res.WaitReason), "position", cr.res.Position)
	default:
		if !cr.res.Enqueued {
			if err := c.disp.Enqueue(ctx, cr.res.RunID, r.workflow, *cr.res.Dispatch); err != nil {
				return nil, fmt.Errorf("run %s was created but its first task was not enqueued (the reconciler will enqueue it): %w",
					cr.res.RunID, err)
			}
		}
		c.log.Info("run started", core.AttrRunID, cr.res.RunID, core.AttrWorkflow, r.workflow)
	}
	return core.RunFromRecord(c.store.CreatedRun(cr.run, cr.res)), nil
}

// startReq is a checked Start: the run to create.
type startReq struct {
	id, workflow, owner, idemKey, ordKey string
	// ordShared: the run joins the shared line of ordKey
	// (StartOptions.SharedOrdering).
	ordShared bool
	input     json.RawMessage
	// trace is the trace context to store with the run (tracing.go).
	trace string
}

// createResult is the create of one startReq: the run asked for, and the
// script's result.
type createResult struct {
	run retrystate.NewRun
	res retrystate.CreateResult
	err error
}

// create creates the run of r (the outbox's flush of a queued Start).
func (c *Client) create(ctx context.Context, r startReq) (retrystate.CreateResult, error) {
	cr := c.createMany(ctx, []startReq{r})[0]
	return cr.res, cr.err
}

// createMany creates runs in one pipelined round trip, from the
// definitions the client keeps (reading those it does not have first). A
// create that finds another version of its definition published (a worker
// published it since) is made again, once, with that version.
func (c *Client) createMany(ctx context.Context, rs []startReq) []createResult {
	out := make([]createResult, len(rs))
	todo := make([]int, 0, len(rs))
	for i := range rs {
		todo = append(todo, i)
	}
	for try := 0; len(todo) > 0; try++ {
		nrs := make([]retrystate.NewRun, 0, len(todo))
		sent := make([]int, 0, len(todo))
		read := map[string]bool{} // the definitions read again in this try
		for _, i := range todo {
			def, err := c.definition(ctx, rs[i].workflow, try > 0 && !read[rs[i].workflow])
			read[rs[i].workflow] = true
			if err != nil {
				out[i].err = err
				continue
			}
			out[i].run = c.newRun(rs[i], def)
			nrs = append(nrs, out[i].run)
			sent = append(sent, i)
		}
		res, errs := c.store.CreateRuns(ctx, nrs)
		todo = todo[:0]
		for j, i := range sent {
			out[i].res, out[i].err = res[j], errs[j]
			if out[i].err == nil && res[j].Outcome == retrystate.OutcomeStale {
				if try == 0 {
					todo = append(todo, i)
					continue
				}
				out[i].err = fmt.Errorf("the definition of workflow %q changed while the run was started; start it again",
					rs[i].workflow)
			}
		}
	}
	return out
}

// publishedDef is a published definition the client keeps.
type publishedDef struct {
	version retrystate.DefinitionVersion
	snap    core.Snapshot
	// run is the fixed part of a run of it (snapshot.runTemplate).
	run retrystate.NewRun
}

// definition returns the published definition of workflow: the one the
// client keeps, unless refresh or it has none.
func (c *Client) definition(ctx context.Context, workflow string, refresh bool) (*publishedDef, error) {
	if !refresh {
		if d, ok := c.defs.Load(workflow); ok {
			return d.(*publishedDef), nil //nolint:forcetypeassert // only *publishedDef is stored
		}
	}
	// The queue's data must be of the format the client writes: checked
	// at each read of a definition (a migration publishes new versions,
	// which the clients' creates then find stale and read again).
	if err := c.store.CheckFormat(ctx, false); err != nil {
		return nil, err
	}
	v, err := c.store.PublishedDefinition(ctx, workflow)
	if errors.Is(err, retrystate.ErrUnknownWorkflow) {
		var known bool
		if known, err = c.publishKnown(ctx, workflow); err == nil && known {
			v, err = c.store.PublishedDefinition(ctx, workflow)
		}
		if errors.Is(err, retrystate.ErrUnknownWorkflow) || (err == nil && !known) {
			return nil, fmt.Errorf("%w %q (no worker has registered it)", core.ErrUnknownWorkflow, workflow)
		}
	}
	if err != nil {
		return nil, err
	}
	snap, err := core.ParseSnapshot(v.JSON)
	if err != nil {
		return nil, err
	}
	run, err := snap.RunTemplate()
	if err != nil {
		return nil, err
	}
	d := &publishedDef{version: v, snap: snap, run: run}
	c.defs.Store(workflow, d)
	return d, nil
}

// publishKnown publishes workflow if it is one of the client's Definitions
// (ClientConfig.Definitions), as a worker's Publish would; known reports
// whether it is.
func (c *Client) publishKnown(ctx context.Context, workflow string) (known bool, err error) {
	for i := range c.cfg.Definitions {
		d := &c.cfg.Definitions[i]
		if d.Name != workflow {
			continue
		}
		if err := c.cfg.Defaults.Validate(); err != nil {
			return true, fmt.Errorf("%w: ClientConfig.Defaults: %w", core.ErrInvalidDefinition, err)
		}
		snap, err := core.Resolve(d, c.cfg.Defaults)
		if err != nil {
			return true, err
		}
		pd, err := snap.Published()
		if err != nil {
			return true, err
		}
		if _, err := c.store.PublishNewDefinitions(ctx, []retrystate.PublishedDefinition{pd}); err != nil {
			return true, err
		}
		c.log.Info("workflow published by the client (ClientConfig.Definitions): no worker had published it",
			core.AttrWorkflow, workflow)
		return true, nil
	}
	return false, nil
}

// newRun is the run to create for r, of definition d: created from d's
// template, with its first task.
func (c *Client) newRun(r startReq, d *publishedDef) retrystate.NewRun {
	nr := d.run
	nr.ID, nr.Workflow, nr.Owner, nr.IdempotencyKey = r.id, r.workflow, r.owner, r.idemKey
	nr.Input, nr.Now = string(r.input), c.cfg.Clock.Now()
	nr.Def, nr.Template = d.version.SHA, d.version.Template
	nr.Trace = r.trace
	if r.ordKey != "" {
		ord := core.EffectiveOrdering(d.snap.Ordering)
		nr.OrderingKey, nr.OrderingLimit, nr.OrderingBlock = r.ordKey, ord.Concurrency, ord.OnFailure != core.OnFailureRelease
		nr.OrderingShared = r.ordShared
	}
	first := nr.Steps[0]
	// Due now: its worker counts the wait for a worker from then (the step
	// latencies, latency.go).
	nr.FirstTask = tasks.Step{RunID: r.id, Workflow: r.workflow, Index: 0, Name: first.Name, Attempt: 1}.
		AsynqMessageDue(c.cfg.Queue, first.Timeout, nr.Now)
	return nr
}

func (c *Client) ensureFirst(ctx context.Context, id string) error {
	rec, err := c.store.Run(ctx, id)
	if err != nil {
		return err
	}
	if rec.Status != core.StatusPending || len(rec.Steps) == 0 || rec.Waiting != "" {
		return nil // a waiting run gets its task when it is admitted
	}
	s := rec.Steps[rec.Current]
	_, _, attempt, gen, err := tasks.ParseID(s.Task)
	if err != nil {
		return err
	}
	return c.disp.Enqueue(ctx, id, rec.Workflow, retrystate.Dispatch{Index: rec.Current, Name: s.Name,
		Attempt: attempt, Gen: gen, DueAt: s.NextAttemptAt, Timeout: s.Timeout})
}

func (c *Client) encodeInput(input any) (json.RawMessage, error) {
	var raw []byte
	switch v := input.(type) {
	case nil:
		raw = []byte("{}")
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", core.ErrInvalidInput, err) //nolint:errorlint // the sentinel is the error's identity; the cause is only its text, not part of what callers match
		}
		raw = b
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return json.RawMessage("{}"), nil
	}
	if len(trimmed) > c.cfg.MaxInputBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than the limit of %d", core.ErrInvalidInput, len(trimmed), c.cfg.MaxInputBytes)
	}
	if !json.Valid(trimmed) {
		var v any
		err := json.Unmarshal(trimmed, &v)
		return nil, fmt.Errorf("%w: not valid JSON: %v", core.ErrInvalidInput, err) //nolint:errorlint // as above
	}
	// Offsets count from the start of what the caller gave.
	if err := core.CheckJSON(raw); err != nil {
		return nil, fmt.Errorf("%w: %w", core.ErrInvalidInput, err)
	}
	raw = trimmed
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, fmt.Errorf("%w: %v", core.ErrInvalidInput, err) //nolint:errorlint // as above
	}
	return compact.Bytes(), nil
}

func checkID(id string) error {
	if !core.ValidRunID(id) {
		return fmt.Errorf("%w %q", core.ErrInvalidRunID, id)
	}
	return nil
}

// mapStoreError turns the store's errors about run id that the client
// reports into the client's: ErrRunNotFound, and the refusals of an action
// (retrystate.RefusedError, RunEndedError, MailboxFullError) into
// ErrActionRefused, ErrRunFinished and ErrMailboxFull with what they say.
func mapStoreError(id string, err error) error {
	if errors.Is(err, retrystate.ErrRunNotFound) {
		return fmt.Errorf("%w: %s", core.ErrRunNotFound, id)
	}
	if refused, ok := errors.AsType[*retrystate.RefusedError](err); ok {
		return fmt.Errorf("%w: %s", core.ErrActionRefused, refused.Reason)
	}
	if ended, ok := errors.AsType[*retrystate.RunEndedError](err); ok {
		return fmt.Errorf("%w: run %s is %s", core.ErrRunFinished, id, ended.Status)
	}
	if full, ok := errors.AsType[*retrystate.MailboxFullError](err); ok {
		return fmt.Errorf("%w: run %s keeps %d signals for awaits it has not reached", core.ErrMailboxFull, id, full.Pending)
	}
	return err
}

// Get returns a run with the progress of each step. It returns
// ErrInvalidRunID or ErrRunNotFound for a bad or unknown ID. With an outbox,
// a run whose Start is still queued is returned as Start returned it
// (Queued set), also while Redis is unreachable; a queued run ID that stands
// for the run its idempotency key named returns that run.
func (c *Client) Get(ctx context.Context, id string) (*core.Run, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	rec, err := c.store.Run(ctx, id)
	if err != nil {
		if c.ob != nil && (errors.Is(err, retrystate.ErrRunNotFound) || core.RedisUnreachable(err)) {
			if run, ok, qerr := c.lookupQueued(ctx, id); ok {
				return run, qerr
			}
		}
		return nil, mapStoreError(id, err)
	}
	return core.RunFromRecord(rec), nil
}

// ListOptions select runs for List.
type ListOptions struct {
	// Status filters by run status; "" lists every run.
	Status core.RunStatus
	// Limit is the page size. Default 50, at most 1000.
	Limit int
	// Cursor continues a listing from the page before.
	Cursor string
	// Owner, when set, lists only the runs started by that owner (see
	// StartOptions.Owner).
	Owner string
	// Workflow, when set, lists only the runs of that workflow.
	//
	// With Owner or Workflow set, a page examines a bounded number of runs
	// (at least 1,000, or 10 per run of Limit): when few runs match, a page
	// may hold fewer than Limit runs, even none, with a cursor to go on.
	Workflow string
	// IDPrefix, when set, lists only the runs whose ID starts with it
	// (ParseIDPrefix checks one); a whole run ID lists that run alone.
	IDPrefix string
	// Input, when set, lists only the runs whose input has its conditions
	// (ParseInputFilter).
	Input *core.InputFilter
	// CreatedFrom and CreatedTo, when set, list only the runs created at
	// or after CreatedFrom and before CreatedTo (to the millisecond).
	CreatedFrom, CreatedTo time.Time
	// MaxScan bounds the runs one page examines, newest first, when
	// IDPrefix or Input is set. Default (0) and most: 10,000. A page that
	// reaches it holds what matched so far (maybe nothing), with
	// ListPage.Limited set and a cursor that goes on from there.
	MaxScan int
}

// MaxSearchScan is the default and greatest ListOptions.MaxScan: the runs
// one page of a search by ID prefix or input examines.
const MaxSearchScan = retrystate.SearchBudget

// ListPage is a page of Client.ListPage: the runs, the next cursor, and
// whether the bound of a search's scan ended the page.
type ListPage struct {
	Runs []*core.Run
	// Next is the cursor of the next page ("" after the last).
	Next string
	// Scanned is the number of runs the page examined, when it was
	// filtered by owner, workflow, ID prefix or input (0 otherwise).
	Scanned int
	// Limited: the bound of the scan (ListOptions.MaxScan) ended the page
	// before it held Limit runs; Next goes on from where it stopped.
	Limited bool
}

// List returns a page of runs, newest first, without their steps, and the
// cursor of the next page ("" after the last). It returns ErrInvalidStatus
// or ErrInvalidCursor for a bad filter or cursor.
func (c *Client) List(ctx context.Context, opts ListOptions) ([]*core.Run, string, error) {
	p, err := c.ListPage(ctx, opts)
	return p.Runs, p.Next, err
}

// ListPage returns a page of runs as List does, and whether the bound of
// its scan ended it. It returns ErrInvalidStatus or ErrInvalidCursor for
// a bad filter or cursor, and an error wrapping ErrInvalidSearch for a bad
// ID prefix, a CreatedTo not after CreatedFrom, or a MaxScan out of range.
func (c *Client) ListPage(ctx context.Context, opts ListOptions) (ListPage, error) {
	if opts.Status != "" && !opts.Status.Valid() {
		return ListPage{}, fmt.Errorf("%w: %q", core.ErrInvalidStatus, opts.Status)
	}
	q := retrystate.ListQuery{Status: opts.Status, Limit: opts.Limit, Cursor: opts.Cursor,
		Owner: opts.Owner, Workflow: opts.Workflow}
	if opts.IDPrefix != "" {
		p, err := core.ParseIDPrefix(opts.IDPrefix)
		if err != nil {
			return ListPage{}, err
		}
		q.IDPrefix = p
	}
	if !opts.Input.Empty() {
		q.Input = opts.Input.Match
	}
	if opts.MaxScan < 0 || opts.MaxScan > MaxSearchScan {
		return ListPage{}, fmt.Errorf("%w: scan limit %d: want 1 to %d", core.ErrInvalidSearch, opts.MaxScan, MaxSearchScan)
	}
	if q.IDPrefix != "" || q.Input != nil {
		q.Budget = opts.MaxScan
	}
	if !opts.CreatedFrom.IsZero() {
		q.CreatedFrom = max(opts.CreatedFrom.UnixMilli(), 1)
	}
	if !opts.CreatedTo.IsZero() {
		q.CreatedTo = max(opts.CreatedTo.UnixMilli(), 1)
	}
	if q.CreatedTo != 0 && q.CreatedTo <= q.CreatedFrom {
		return ListPage{}, fmt.Errorf("%w: the end of the creation range (%s) is not after its start (%s)",
			core.ErrInvalidSearch, opts.CreatedTo.UTC().Format(time.RFC3339Nano), opts.CreatedFrom.UTC().Format(time.RFC3339Nano))
	}
	if q.IDPrefix != "" && len(q.IDPrefix) < core.RunIDLen {
		// No run is created before the time its ID begins with (less the
		// slack of FindRuns): the scan ends there, not at the index's end.
		lo, _ := prefixTimes(q.IDPrefix)
		q.CreatedFrom = max(q.CreatedFrom, lo-findSlackBefore.Milliseconds(), 1)
		if q.CreatedTo != 0 && q.CreatedTo <= q.CreatedFrom {
			return ListPage{Runs: []*core.Run{}}, nil
		}
	}
	p, err := c.store.ListPage(ctx, q)
	if err != nil {
		return ListPage{}, err
	}
	out := ListPage{Runs: make([]*core.Run, len(p.Runs)), Next: p.Next, Scanned: p.Scanned, Limited: p.Limited}
	for i, rec := range p.Runs {
		out.Runs[i] = core.RunFromRecord(rec)
	}
	return out, nil
}

// Events returns a run's journal, oldest first.
func (c *Client) Events(ctx context.Context, id string) ([]core.Event, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	entries, err := c.store.Journal(ctx, id)
	if err != nil {
		return nil, mapStoreError(id, err)
	}
	out := make([]core.Event, len(entries))
	for i, e := range entries {
		out[i] = core.EventFromEntry(e)
	}
	return out, nil
}

// ActionOptions are the options of an operator action.
type ActionOptions struct {
	// Actor is who acts, recorded in the journal. Default "client".
	Actor string
	// Compensate (Cancel only) cancels and then compensates: the
	// compensations (Step.Compensate) of the run's succeeded steps run,
	// last first, and the run ends StatusCompensated with failure code
	// "cancelled". It also takes a failed run, which keeps its failure
	// code. A run with nothing to compensate is cancelled as without it.
	Compensate bool
}

func actor(o *ActionOptions) string {
	if o == nil || o.Actor == "" {
		return "client"
	}
	return o.Actor
}

// Cancel cancels a pending or running run (or a compensating one, whose
// compensations stop): no further attempt starts, a scheduled retry's task
// is deleted, a running step's context is cancelled, and later deliveries of
// its tasks are acknowledged without running. It is idempotent: cancelling
// a cancelled run returns it. It returns ErrRunFinished for a run that
// succeeded or failed, except a failed run that still holds its ordering
// key (on_failure: block): cancelling it gives the run up and lets the
// key's next run start. With opts.Compensate, see ActionOptions; it returns
// ErrActionRefused for a run whose compensation failed (Recover runs that
// again).
func (c *Client) Cancel(ctx context.Context, id string, opts *ActionOptions) (*core.Run, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	who := actor(opts)
	compensate := opts != nil && opts.Compensate
	res, err := c.store.Cancel(ctx, retrystate.CancelParams{RunID: id, Actor: who, Compensate: compensate,
		Retention: c.cfg.Retention, Now: c.cfg.Clock.Now()})
	if err != nil {
		return nil, mapStoreError(id, err)
	}
	if res.Outcome == retrystate.OutcomeCompensating {
		c.disp.Stop(c.log.With(core.AttrRunID, id), res.Task, res.StepStatus)
		c.log.Info("run cancelled; its compensations run", core.AttrRunID, id, core.AttrActor, who)
		return c.Get(ctx, id)
	}
	if res.Outcome == retrystate.OutcomeCancelled {
		c.disp.Stop(c.log.With(core.AttrRunID, id), res.Task, res.StepStatus)
		c.log.Info("run cancelled", core.AttrRunID, id, core.AttrActor, who)
	}
	run, err := c.Get(ctx, id)
	if res.Outcome == retrystate.OutcomeCancelled && err == nil && res.StepStatus != core.StepFailed {
		// (A failed run that blocked its key was counted when it failed.)
		c.cfg.Observer.RunFinished(ctx, id, run.Workflow, core.StatusCancelled, core.CodeCancelled)
	}
	return run, err
}

// Wait polls a run every interval (default 250ms) until it ends or ctx is
// done, and returns its last state.
func (c *Client) Wait(ctx context.Context, id string, interval time.Duration) (*core.Run, error) {
	if interval <= 0 {
		interval = 250 * time.Millisecond
	}
	for {
		run, err := c.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if run.Terminal() {
			return run, nil
		}
		if err := core.SleepContext(ctx, interval); err != nil {
			return run, err
		}
	}
}

// Workflows returns the names of the workflows the workers have published,
// with the step names of each.
func (c *Client) Workflows(ctx context.Context) (map[string][]string, error) {
	defs, err := c.store.Definitions(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(defs))
	for name, d := range defs {
		snap, err := core.ParseSnapshot(d)
		if err != nil {
			continue
		}
		for _, s := range snap.Steps {
			out[name] = append(out[name], s.Name)
		}
	}
	return out, nil
}

// Notification is an event from the queue's notification stream:
// run_failed (with the failed step, code, reason and the message "step
// failed after multiple attempts" or "step failed with a permanent error"),
// step_failed (the step that failed the run: step, attempt, optional "1" or
// "0", code, reason), retry_scheduled (step, attempt, due_at, delay_ms,
// error), run_succeeded, run_cancelled, run_recovered (by an operator:
// action recover, retry, skip or restore, step, actor; by an automatic
// repair: by "reconciler" or "worker", kind crashed_attempt, task_missing,
// retry_task_missing, task_archived, stalled_delivery or
// interrupted_attempt, step, attempt), run_needs_attention (code, reason),
// run_waiting (reason "signal": step, signal, until; reason "timer":
// step, until; until in Unix ms), and for compensations run_compensating
// (the step whose failure starts them, code, reason, group),
// run_compensated (code, reason) and group_rolled_back (group, step, code,
// reason); a run that compensates notifies run_compensating, not
// run_failed.
// It is the webhook payload type: a webhook delivers the same fields as
// JSON (with the owner under Details, see webhook.Payload), so one type
// serves both.
type Notification = webhook.Payload

// Notifications returns up to limit notifications after the one with ID
// after ("" for the oldest retained), oldest first. Pass the last ID
// returned to read on.
func (c *Client) Notifications(ctx context.Context, after string, limit int) ([]Notification, error) {
	if limit <= 0 {
		limit = 100
	}
	ns, err := c.store.Notifications(ctx, after, int64(limit))
	if err != nil {
		return nil, err
	}
	out := make([]Notification, len(ns))
	for i, n := range ns {
		out[i] = notificationFrom(n)
	}
	return out, nil
}

// ResumeNotifications returns the ID to pass to Notifications for a reader
// resuming after the notification with ID after (an entry ID, <ms>-<seq>)
// that should replay at most maxEntries notifications (<= 0: no bound) and
// none older than maxAge by the client's clock (<= 0: no bound): after
// itself, or a later ID when a bound moves it forward (the more recent of
// the two wins). skipped tells whether notifications following after are
// passed over. An ID beyond the newest notification resumes after the newest.
func (c *Client) ResumeNotifications(ctx context.Context, after string, maxEntries int, maxAge time.Duration) (start string, skipped bool, err error) {
	var notBefore time.Time
	if maxAge > 0 {
		notBefore = c.cfg.Clock.Now().Add(-maxAge)
	}
	return c.store.ResumeNotifications(ctx, after, int64(max(maxEntries, 0)), notBefore)
}

// Recover resumes a failed run (or a run left needing attention) from its
// last checkpoint: the first step that has not succeeded runs again with a
// fresh retry and crash budget; completed steps are not re-run. A passed
// deadline and the iteration count start afresh. It returns
// ErrActionRefused for a run in another state. Recover, RetryStep and
// SkipStep return the run as the action left it, read before the step's
// task is enqueued (a worker may have moved it on since).
func (c *Client) Recover(ctx context.Context, id string, opts *ActionOptions) (*core.Run, error) {
	return c.operate(ctx, id, retrystate.ActionRecover, "", opts)
}

// RetryStep re-runs the failed step of a failed run with a fresh budget. The
// step must be the one the run stopped at.
func (c *Client) RetryStep(ctx context.Context, id, step string, opts *ActionOptions) (*core.Run, error) {
	if step == "" {
		return nil, fmt.Errorf("%w: no step named", core.ErrActionRefused)
	}
	return c.operate(ctx, id, retrystate.ActionRetry, step, opts)
}

// SkipStep skips the failed step of a failed run, which must be optional,
// and continues the run with the next step (or ends it successfully when it
// was the last).
func (c *Client) SkipStep(ctx context.Context, id, step string, opts *ActionOptions) (*core.Run, error) {
	if step == "" {
		return nil, fmt.Errorf("%w: no step named", core.ErrActionRefused)
	}
	return c.operate(ctx, id, retrystate.ActionSkip, step, opts)
}

func (c *Client) operate(ctx context.Context, id, action, step string, opts *ActionOptions) (*core.Run, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	who := actor(opts)
	res, err := c.store.Operate(ctx, retrystate.OperateParams{RunID: id, Action: action, Step: step, Actor: who,
		Retention: c.cfg.Retention, Now: c.cfg.Clock.Now()})
	if err != nil {
		return nil, mapStoreError(id, err)
	}
	return c.applied(ctx, id, action, who, res)
}

// applied finishes an operator action (Recover, RetryStep, SkipStep,
// Restore) whose script answered res: it enqueues the task of the step the
// run goes on with and returns the run as the action left it.
func (c *Client) applied(ctx context.Context, id, action, who string, res retrystate.OperateResult) (*core.Run, error) {
	log := c.log.With(core.AttrRunID, id, core.AttrActor, who, "action", action)
	// The run as the action left it, read before its task is enqueued: a
	// quick step could otherwise have run, or the run ended, in between.
	run, err := c.Get(ctx, id)
	switch res.Outcome {
	case retrystate.OutcomeWaiting:
		log.Info("operator action applied; the run waits for its turn", "waiting_for", string(res.WaitReason),
			"position", res.Position)
	case retrystate.OutcomeDispatch:
		if err := c.disp.Enqueue(ctx, id, res.Workflow, *res.Dispatch); err != nil {
			return nil, fmt.Errorf("run %s was reopened but its task was not enqueued (the reconciler will enqueue it): %w", id, err)
		}
		log.Info("operator action applied", core.AttrStep, res.Dispatch.Name, core.AttrAttempt, res.Dispatch.Attempt)
	default:
		log.Info("operator action applied; run succeeded")
	}
	if res.Outcome == retrystate.OutcomeRunSucceeded && err == nil {
		c.cfg.Observer.RunFinished(ctx, id, run.Workflow, core.StatusSucceeded, "")
	}
	return run, err
}

// Counts returns how many runs the queue holds in each status, under
// "needs_attention" how many need an operator, and under
// "waiting:<reason>" how many wait for each WaitReason (holding no worker
// slot). Finished runs count until they expire.
func (c *Client) Counts(ctx context.Context) (map[string]int64, error) {
	return c.store.CountByStatus(ctx)
}
