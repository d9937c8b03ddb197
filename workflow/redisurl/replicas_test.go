package redisurl_test

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow/redisurl"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// incr is a script like Cairn's state scripts: it writes its first key.
var incr = redis.NewScript(`return redis.call("INCR", KEYS[1])`)

// TestReplicaWait: with CAIRN_REDIS_MIN_REPLICAS=1, a Cairn state script
// (first key cairn:...) returns once the replica has its write; other
// commands and asynq's scripts do not wait. With the replica gone, a state
// write returns after the timeout, succeeded, and the shortfall is counted
// and logged once per 10s. On a Redis Cluster every node's connections
// wait.
func TestReplicaWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clusterNode := redistest.StartClusterNodeLater(t, nil) // a master without replicas
	master := redistest.Start(t, &redistest.Options{Args: []string{"--repl-diskless-sync-delay", "0"}})
	replica := redistest.Start(t, &redistest.Options{Args: []string{"--replicaof", "127.0.0.1", strconv.Itoa(master.Port())}})
	replicaClient := replica.Client(t)
	testkit.Eventually(t, 10*time.Second, "the replica to be in sync", func() bool {
		info, err := replicaClient.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})

	target, err := redisurl.Parse(master.URL())
	if err != nil {
		t.Fatal(err)
	}
	// One client waits up to 2s (generous for a loaded machine) while the
	// replica is up; the other 300ms, once it is gone.
	rdb, short := target.NewClient(), target.NewClient()
	defer rdb.Close()
	defer short.Close()
	var logs syncBuffer
	rw := redisurl.WaitForReplicas(rdb, 1, 2*time.Second, slog.New(slog.DiscardHandler))
	if rw == nil {
		t.Fatal("WaitForReplicas on a *redis.Client: nil")
	}
	const timeout = 300 * time.Millisecond
	srw := redisurl.WaitForReplicas(short, 1, timeout, slog.New(slog.NewTextHandler(&logs, nil)))
	for i := 1; i <= 20; i++ {
		if n, err := incr.Run(ctx, rdb, []string{"cairn:{q}:run:x"}).Int(); err != nil || n != i {
			t.Fatalf("state write %d: %d, %v", i, n, err)
		}
		if rw.Shortfalls() != 0 {
			t.Fatalf("state write %d: the replica did not confirm it within 2s", i)
		}
		// The reply came after the replica had the write.
		if got, err := replicaClient.Get(ctx, "cairn:{q}:run:x").Int(); err != nil || got != i {
			t.Fatalf("after state write %d the replica has %d, %v", i, got, err)
		}
	}
	if rw.Waits() != 20 {
		t.Errorf("%d waits; want 20", rw.Waits())
	}
	// A pipeline of state writes (the reconciler's checks) waits once, at
	// its end, for them all; its result is its commands'.
	pipe := rdb.Pipeline()
	p1 := incr.EvalSha(ctx, pipe, []string{"cairn:{q}:run:p1"})
	p2 := incr.EvalSha(ctx, pipe, []string{"cairn:{q}:run:p2"})
	plain := pipe.Incr(ctx, "cairn:{q}:n")
	if _, err := pipe.Exec(ctx); err != nil || p1.Val() != int64(1) || p2.Val() != int64(1) || plain.Val() != 1 {
		t.Fatalf("pipeline: %v, %v, %v: %v", p1.Val(), p2.Val(), plain.Val(), err)
	}
	if rw.Waits() != 21 || rw.Shortfalls() != 0 {
		t.Errorf("after a pipeline of state writes: %d waits, %d shortfalls; want 21, 0", rw.Waits(), rw.Shortfalls())
	}
	for _, k := range []string{"cairn:{q}:run:p1", "cairn:{q}:run:p2"} {
		if got, err := replicaClient.Get(ctx, k).Int(); err != nil || got != 1 {
			t.Errorf("after the pipeline the replica has %s = %d, %v", k, got, err)
		}
	}
	pipe = rdb.Pipeline()
	pipe.Incr(ctx, "cairn:{q}:n")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := incr.Run(ctx, rdb, []string{"asynq:{q}:t:x"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "cairn:{q}:plain", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if rw.Waits() != 21 {
		t.Errorf("an asynq script, a plain command or a pipeline without a state write waited: %d waits, want 21", rw.Waits())
	}

	replica.Kill(t)
	for i := range 2 {
		began := time.Now()
		if err := incr.Run(ctx, short, []string{"cairn:{q}:run:x"}).Err(); err != nil {
			t.Fatalf("a state write with the replica gone: %v; want it to succeed", err)
		}
		if took := time.Since(began); took < timeout {
			t.Errorf("a state write with the replica gone returned after %s, before the %s timeout", took, timeout)
		}
		if srw.Shortfalls() != int64(i+1) {
			t.Errorf("%d shortfalls, want %d", srw.Shortfalls(), i+1)
		}
	}
	if n := strings.Count(logs.String(), "not confirmed by enough replicas"); n != 1 {
		t.Errorf("%d warnings for 2 shortfalls within 10s, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "replicas=0 want=1") {
		t.Errorf("the warning does not say how many replicas confirmed:\n%s", logs.String())
	}

	// A cluster: the wait is on the node that ran the script.
	node := clusterNode(t)
	ctarget, err := redisurl.Parse("redis-cluster://" + node.Addr())
	if err != nil {
		t.Fatal(err)
	}
	cc := ctarget.NewClient()
	defer cc.Close()
	crw := redisurl.WaitForReplicas(cc, 1, 50*time.Millisecond, slog.New(slog.DiscardHandler))
	if err := incr.Run(ctx, cc, []string{"cairn:{q}:run:x"}).Err(); err != nil {
		t.Fatal(err)
	}
	if crw.Waits() != 1 || crw.Shortfalls() != 1 {
		t.Errorf("cluster: %d waits, %d shortfalls; want 1, 1 (the node has no replica)", crw.Waits(), crw.Shortfalls())
	}
	if redisurl.WaitForReplicas(cc, 0, time.Second, slog.New(slog.DiscardHandler)) != nil {
		t.Error("WaitForReplicas(0) installed a wait")
	}
}
