package retrystate

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Group commit. A worker runs many steps at once, and each begin and
// complete is a script call and a round trip; a round trip costs Redis a
// read and a write on its socket, in the kernel, whatever it carries (21 to
// 33 µs of its CPU under load, docs/performance.md). The step path's calls
// (Begin, Complete) go through the store's batcher: a call made while
// another batch is on the wire waits for it and leaves with every call made
// meanwhile, in one pipeline; a call made when none is on the wire leaves
// at once, so an idle worker's latency does not change.
//
// Each call is still its own script, atomic on its own, and its caller
// still waits for its own reply before it goes on: a step's checkpoint is
// durable before its next step begins, as without batching. A batch that
// fails on the wire fails each of its calls, as a lost reply would; the
// scripts answer a call made again after a lost reply as they answer the
// first (begin.lua, complete.lua). A caller whose context ends stops
// waiting; its call may still run, as after a lost reply.

// batcher sends script calls made concurrently in one pipeline.
type batcher struct {
	rdb redis.UniversalClient

	mu      sync.Mutex
	queue   []*batchCall
	sending bool // a goroutine is sending batches
}

// batchCall is one script call waiting in or sent with a batch.
type batchCall struct {
	ctx  context.Context // its caller's
	sc   *redis.Script
	keys []string
	args []any
	res  any
	err  error
	done chan struct{}
}

// maxBatch bounds the calls in one pipeline.
const maxBatch = 64

// run runs sc, in a batch with the calls made meanwhile.
func (b *batcher) run(ctx context.Context, sc *redis.Script, keys []string, args []any) (any, error) {
	c := &batchCall{ctx: ctx, sc: sc, keys: keys, args: args, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	start := !b.sending
	b.sending = true
	b.mu.Unlock()
	if start {
		go b.send()
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// send sends the waiting calls, a batch at a time, until none waits.
func (b *batcher) send() {
	for {
		b.mu.Lock()
		q := b.queue
		if len(q) > maxBatch {
			q = q[:maxBatch:maxBatch]
			b.queue = b.queue[maxBatch:]
		} else {
			b.queue = nil
		}
		if len(q) == 0 {
			b.sending = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.exec(q)
	}
}

// exec sends one batch and answers its calls. A call whose caller stopped
// waiting before its batch left is not sent (its caller saw an error, as
// for a request lost on the way). (The batch's context is not the
// callers': each of them stops waiting when its own ends, and the client's
// timeouts bound the batch.)
func (b *batcher) exec(q []*batchCall) {
	live := q[:0]
	for _, c := range q {
		if c.ctx.Err() != nil {
			c.err = c.ctx.Err()
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	q = live
	if len(q) == 0 {
		return
	}
	ctx := context.Background()
	if len(q) == 1 {
		c := q[0]
		c.res, c.err = c.sc.Run(ctx, b.rdb, c.keys, c.args...).Result()
		close(c.done)
		return
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(q))
	for i, c := range q {
		cmds[i] = c.sc.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command's own error is read below
	for i, c := range q {
		c.res, c.err = cmds[i].Result()
		if c.err != nil && strings.HasPrefix(c.err.Error(), "NOSCRIPT") {
			// The script is not loaded (a new or flushed server):
			// Run loads it, as an unbatched call does.
			c.res, c.err = c.sc.Run(ctx, b.rdb, c.keys, c.args...).Result()
		}
		close(c.done)
	}
}
