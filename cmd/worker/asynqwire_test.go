package main

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/tasks"
)

// redisEnv runs the worker on the Redis server srv.
func redisEnv(t *testing.T, srv *redistest.Server) []string {
	t.Helper()
	return append(baseEnv(testkit.FreeAddr(t)), "CAIRN_REDIS_URL="+srv.URL(), "CAIRN_QUEUE=wirecheck")
}

// requireNoProbeKeys fails the test if the asynq task-format check left a
// key or a queue behind.
func requireNoProbeKeys(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*"+tasks.ProbeQueuePrefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	queues, err := rdb.SMembers(ctx, tasks.AllQueues).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		if strings.HasPrefix(q, tasks.ProbeQueuePrefix) {
			keys = append(keys, "asynq:queues "+q)
		}
	}
	if len(keys) > 0 {
		t.Errorf("the asynq task-format check left %q", keys)
	}
}

// TestWorkerChecksAsynqTaskFormat: the worker checks asynq's task format
// before it starts, and the check leaves nothing in Redis.
func TestWorkerChecksAsynqTaskFormat(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	srv := redistest.Start(t, nil)
	p := proctest.Start(t, worker(t), redisEnv(t, srv))
	off := p.WaitForOutputFrom(t, 0, "asynq task format checked", waitTimeout)
	p.WaitForOutputFrom(t, off, "worker started", waitTimeout)
	if !strings.Contains(p.Output(), "asynq="+tasks.AsynqFormatVersion) {
		t.Errorf("the check does not name asynq %s:\n%s", tasks.AsynqFormatVersion, p.Output())
	}
	requireNoProbeKeys(t, srv.Client(t))
	p.Signal(t, syscall.SIGTERM)
	if code := p.Wait(t, waitTimeout); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0\n%s", code, p.Output())
	}
}

// TestWorkerChecksAsynqTaskFormatOnceRedisAnswers: a worker started while
// Redis is down waits for it as before, and checks asynq's task format once
// Redis answers.
func TestWorkerChecksAsynqTaskFormatOnceRedisAnswers(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	srv := redistest.Start(t, nil)
	srv.Stop(t)
	p := proctest.Start(t, worker(t), redisEnv(t, srv))
	off := p.WaitForOutputFrom(t, 0, "cannot check asynq's task format yet; checking again until Redis answers",
		waitTimeout)
	off = p.WaitForOutputFrom(t, off, "cannot publish workflow definitions; is Redis reachable? retrying", waitTimeout)
	srv.Restart(t)
	p.WaitForOutputFrom(t, off, "asynq task format checked", 2*waitTimeout)
	p.WaitForOutputFrom(t, off, "worker started", 2*waitTimeout)
	requireNoProbeKeys(t, srv.Client(t))
	p.Signal(t, syscall.SIGTERM)
	if code := p.Wait(t, waitTimeout); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0\n%s", code, p.Output())
	}
}
