package retrystate_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// gateHook holds the first script call sent on its own until release is
// closed, and records the size of every pipeline.
type gateHook struct {
	held      atomic.Bool
	holding   chan struct{} // closed when the first call is held
	release   chan struct{}
	mu        sync.Mutex
	pipelines []int
	// flush, when set, empties the server's script cache before each
	// pipeline; evals counts the EVALs sent on their own.
	flush *redis.Client
	evals atomic.Int64
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "eval" {
			h.evals.Add(1)
		}
		if cmd.Name() == "evalsha" && h.held.CompareAndSwap(false, true) {
			close(h.holding)
			<-h.release
		}
		return next(ctx, cmd)
	}
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		h.pipelines = append(h.pipelines, len(cmds))
		h.mu.Unlock()
		if h.flush != nil {
			if err := h.flush.ScriptFlush(ctx).Err(); err != nil {
				return err
			}
		}
		return next(ctx, cmds)
	}
}

// The step path's calls made while another is on the wire leave together,
// in one pipeline, and each gets its own answer; a batch that meets a
// server whose script cache was flushed loads the script, as a lone call
// does.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	for _, flush := range []bool{false, true} {
		t.Run(fmt.Sprintf("script flushed %v", flush), func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, nil)
			rdb := srv.Client(t)
			h := &gateHook{holding: make(chan struct{}), release: make(chan struct{})}
			s := retrystate.New(rdb, "gc")
			const n = 12
			ids := make([]string, n)
			for i := range ids {
				ids[i] = runID(7000 + i)
				create(t, s, ids[i], t0, "a", "b")
			}
			if flush {
				h.flush = srv.Client(t)
			}
			rdb.AddHook(h)
			results := make([]retrystate.BeginResult, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			call := func(i int) {
				defer wg.Done()
				results[i], errs[i] = s.Begin(ctxb, retrystate.BeginParams{RunID: ids[i], Index: 0,
					TaskID: tasks.ID(ids[i], 0, 1, 0), Token: "tok" + ids[i], FenceTTL: 10 * time.Second,
					Retention: time.Hour, Now: t0.Add(time.Second)})
			}
			wg.Add(1)
			go call(0)
			<-h.holding // the first call is on the wire, held
			wg.Add(n - 1)
			for i := 1; i < n; i++ {
				go call(i)
			}
			deadline := time.Now().Add(30 * time.Second)
			for s.BatchQueued() < n-1 {
				if time.Now().After(deadline) {
					t.Fatalf("%d calls queued behind the one on the wire, want %d", s.BatchQueued(), n-1)
				}
				time.Sleep(time.Millisecond) // polling for the event, under the deadline
			}
			close(h.release)
			wg.Wait()
			for i := range n {
				if errs[i] != nil || results[i].Outcome != retrystate.OutcomeOK {
					t.Fatalf("run %d: %+v %v", i, results[i], errs[i])
				}
				r, err := s.Run(ctxb, ids[i])
				if err != nil || r.Steps[0].Status != retrystate.StepRunning || r.Steps[0].Fence != "tok"+ids[i] {
					t.Fatalf("run %d after its begin: %+v %v", i, r, err)
				}
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if len(h.pipelines) == 0 || h.pipelines[0] != n-1 {
				t.Fatalf("pipelines sent: %v, want the %d queued calls in one", h.pipelines, n-1)
			}
			if flush && h.evals.Load() == 0 {
				t.Fatal("the batch met no missing script: the test did not test the reload")
			}
		})
	}
}

// A caller whose context ends stops waiting for its batch, and a call whose
// caller stopped waiting before its batch left is not sent.
func TestGroupCommitCallerContext(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, nil)
	rdb := srv.Client(t)
	h := &gateHook{holding: make(chan struct{}), release: make(chan struct{})}
	s := retrystate.New(rdb, "gcctx")
	a, b := runID(7100), runID(7101)
	create(t, s, a, t0, "a")
	create(t, s, b, t0, "a")
	rdb.AddHook(h)
	done := make(chan error, 1)
	go func() {
		_, err := s.Begin(ctxb, retrystate.BeginParams{RunID: a, Index: 0, TaskID: tasks.ID(a, 0, 1, 0), Token: "t1",
			FenceTTL: 10 * time.Second, Retention: time.Hour, Now: t0})
		done <- err
	}()
	<-h.holding
	ctx, cancel := context.WithCancel(ctxb)
	cancel()
	if _, err := s.Begin(ctx, retrystate.BeginParams{RunID: b, Index: 0, TaskID: tasks.ID(b, 0, 1, 0), Token: "t2",
		FenceTTL: 10 * time.Second, Retention: time.Hour, Now: t0}); err == nil {
		t.Fatal("a begin whose context ended waited for its batch")
	}
	close(h.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !s.BatchIdle() {
		if time.Now().After(deadline) {
			t.Fatal("the batcher is still sending")
		}
		time.Sleep(time.Millisecond) // polling for the event, under the deadline
	}
	// Its caller had stopped waiting before its batch left: it was not sent.
	r, err := s.Run(ctxb, b)
	if err != nil || r.Steps[0].Status != retrystate.StepPending {
		t.Fatalf("the abandoned begin ran: %+v %v", r, err)
	}
}
