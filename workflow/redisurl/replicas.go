package redisurl

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/workflow"
)

// replicaWaitLogEvery bounds how often ReplicaWait logs a shortfall: the
// first at once, then one line per interval with the count in between.
const replicaWaitLogEvery = 10 * time.Second

// stateKeyPrefix starts KEYS[1] of every Cairn state script
// (retrystate/keys.go); asynq's scripts start with "asynq:".
const stateKeyPrefix = "cairn:"

// ReplicaWait makes every workflow-state write of a client wait until a
// number of replicas have it (CAIRN_REDIS_MIN_REPLICAS): each EVALSHA or
// EVAL of a Cairn script (its first key starts with "cairn:") is sent in
// one pipeline with WAIT n timeout, on the same connection, since WAIT
// waits for the writes of its own connection (a pipeline of such scripts
// ends with one WAIT for them all). The script's reply is
// returned once the replicas have its writes or the timeout has passed. A
// shortfall (fewer replicas in time, or no answer to WAIT) does not fail
// the write, which has happened on the master: it is logged (at most once
// every 10s, with a count) and counted (Shortfalls), since a failover
// before the replicas catch up would lose it.
type ReplicaWait struct {
	n       int
	timeout time.Duration
	log     *slog.Logger

	waits      atomic.Int64
	shortfalls atomic.Int64

	mu       sync.Mutex
	lastLog  time.Time
	unlogged int64
}

// WaitForReplicas installs a ReplicaWait of n replicas and timeout on rdb,
// which must be a *redis.Client (one server, or a Sentinel-backed client)
// or a *redis.ClusterClient (each node's connection waits for that node's
// replicas), and must not have sent a command yet. It returns nil, and
// changes nothing, when n is 0 or rdb is of another type.
func WaitForReplicas(rdb redis.UniversalClient, n int, timeout time.Duration, log *slog.Logger) *ReplicaWait {
	if n <= 0 {
		return nil
	}
	w := &ReplicaWait{n: n, timeout: timeout, log: log}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		c.OnNewNode(func(node *redis.Client) { node.AddHook(&waitHook{w: w, c: node}) })
	case *redis.Client:
		c.AddHook(&waitHook{w: w, c: c})
	default:
		return nil
	}
	return w
}

// Waits returns how many state writes waited for replicas.
func (w *ReplicaWait) Waits() int64 { return w.waits.Load() }

// Shortfalls returns how many state writes were not confirmed by enough
// replicas within the timeout.
func (w *ReplicaWait) Shortfalls() int64 { return w.shortfalls.Load() }

// observe records the outcome of one WAIT.
func (w *ReplicaWait) observe(ctx context.Context, wait *redis.IntCmd) {
	w.waits.Add(1)
	got, err := wait.Result()
	if err == nil && got >= int64(w.n) {
		return
	}
	w.shortfalls.Add(1)
	w.mu.Lock()
	now := workflow.SystemClock.Now()
	if !w.lastLog.IsZero() && now.Sub(w.lastLog) < replicaWaitLogEvery {
		w.unlogged++
		w.mu.Unlock()
		return
	}
	w.lastLog = now
	skipped := w.unlogged
	w.unlogged = 0
	w.mu.Unlock()
	attrs := []any{"replicas", got, "want", w.n, "timeout", w.timeout, "not_logged_since_last", skipped}
	if err != nil {
		attrs = append(attrs, "error", err)
	}
	w.log.WarnContext(ctx, "a workflow-state write was not confirmed by enough replicas in time (CAIRN_REDIS_MIN_REPLICAS): it stands on the master, but a failover before the replicas catch up would lose it", attrs...)
}

// waitHook is the ReplicaWait of one node's client c.
type waitHook struct {
	w *ReplicaWait
	c *redis.Client
}

func (h *waitHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook makes a pipeline that runs state scripts (the
// reconciler's checks, Store.CheckTasks) wait once, at its end, for all of
// them: WAIT is appended to the pipeline. A transaction (MULTI ... EXEC),
// which no state write uses, is left as it is.
func (h *waitHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		// (A pipeline that ends with a WAIT is ProcessHook's own.)
		if len(cmds) == 0 || cmds[0].Name() == "multi" || cmds[len(cmds)-1].Name() == "wait" ||
			!slices.ContainsFunc(cmds, isStateWrite) {
			return next(ctx, cmds)
		}
		wait := redis.NewIntCmd(ctx, "wait", h.w.n, h.w.timeout.Milliseconds())
		err := next(ctx, append(slices.Clip(cmds), wait))
		wrote := false
		for _, c := range cmds {
			if isStateWrite(c) && c.Err() == nil {
				wrote = true
			}
		}
		if wrote {
			h.w.observe(ctx, wait)
		}
		// The pipeline's error is its commands', not the WAIT's.
		for _, c := range cmds {
			if c.Err() != nil {
				return c.Err()
			}
		}
		if err != nil && !errors.Is(wait.Err(), err) {
			return err
		}
		return nil
	}
}

func (h *waitHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isStateWrite(cmd) {
			return next(ctx, cmd)
		}
		wait := redis.NewIntCmd(ctx, "wait", h.w.n, h.w.timeout.Milliseconds())
		pipe := h.c.Pipeline()
		_ = pipe.Process(ctx, cmd)
		_ = pipe.Process(ctx, wait)
		_, _ = pipe.Exec(ctx) // the errors are the commands'
		if cmd.Err() == nil {
			// A script that failed (NOSCRIPT, before go-redis sends it with
			// EVAL; Redis unreachable, and then its caller tries again) is
			// not a write to confirm.
			h.w.observe(ctx, wait)
		}
		return cmd.Err()
	}
}

// isStateWrite reports whether cmd runs a Cairn state script: an EVALSHA or
// EVAL whose first key is a Cairn key.
func isStateWrite(cmd redis.Cmder) bool {
	name := cmd.Name()
	if name != "evalsha" && name != "eval" {
		return false
	}
	args := cmd.Args()
	if len(args) < 4 {
		return false
	}
	key, ok := args[3].(string)
	return ok && strings.HasPrefix(key, stateKeyPrefix)
}
