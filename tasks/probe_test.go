package tasks_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/tasks"
)

// probeRedis returns a client of a Redis server of the test's own, so the
// test can tell that the probe left no key behind.
func probeRedis(t *testing.T) *redis.Client {
	t.Helper()
	return redistest.Start(t, nil).Client(t)
}

// requireEmpty fails the test unless the server holds no key at all.
func requireEmpty(t *testing.T, rdb *redis.Client) {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		t.Errorf("the probe left keys behind: %q", keys)
	}
}

// TestCheckAsynqWire: Cairn's task writers (tasks/lua/put_task.lua, and
// put_now.lua, which encodes the message in Lua) and asynq's own client
// write the same record, and the probe deletes every key it wrote,
// asynq:queues included.
func TestCheckAsynqWire(t *testing.T) {
	t.Parallel()
	rdb := probeRedis(t)
	if err := tasks.CheckAsynqWire(context.Background(), rdb, tasks.NewLuaTaskWriter(rdb), time.Now); err != nil {
		t.Fatal(err)
	}
	requireEmpty(t, rdb)
}

// corruptWriter writes as Cairn does, then changes the record with mutate.
type corruptWriter struct {
	rdb    *redis.Client
	mutate func(ctx context.Context, rdb *redis.Client, task, pending, id string, msg []byte) error
}

func (w corruptWriter) WriteTask(ctx context.Context, queue, id string, msg []byte, due, now time.Time) error {
	if err := tasks.NewLuaTaskWriter(w.rdb).WriteTask(ctx, queue, id, msg, due, now); err != nil {
		return err
	}
	return w.mutate(ctx, w.rdb, "asynq:{"+queue+"}:t:"+id, "asynq:{"+queue+"}:pending", id, msg)
}

func (w corruptWriter) WriteStepTask(ctx context.Context, queue string, s tasks.Step, timeout time.Duration,
	due, now time.Time) error {
	if err := tasks.NewLuaTaskWriter(w.rdb).WriteStepTask(ctx, queue, s, timeout, due, now); err != nil {
		return err
	}
	return w.mutate(ctx, w.rdb, "asynq:{"+queue+"}:t:"+s.ID(), "asynq:{"+queue+"}:pending", s.ID(),
		s.AsynqMessage(queue, timeout))
}

// setMsg replaces the task's message with msg followed by extra.
func setMsg(extra []byte) func(context.Context, *redis.Client, string, string, string, []byte) error {
	return func(ctx context.Context, rdb *redis.Client, task, _, _ string, msg []byte) error {
		return rdb.HSet(ctx, task, "msg", append(append([]byte(nil), msg...), extra...)).Err()
	}
}

func varintField(n protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, n, protowire.VarintType), v)
}

// TestCheckAsynqWireFindsDifferences: a writer that differs from asynq's
// enqueue in any part of the record makes the probe fail with a
// WireMismatchError that names the field and the asynq version; the probe
// still deletes every key it wrote.
func TestCheckAsynqWireFindsDifferences(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(ctx context.Context, rdb *redis.Client, task, pending, id string, msg []byte) error
		want   string // in the error
	}{
		{"a message field asynq does not write", setMsg(varintField(12, 3600)), "msg.retention: asynq (unset), Cairn 3600"},
		{"another timeout", setMsg(varintField(8, 60)), "msg.timeout: asynq "},
		{"another payload", setMsg(protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte("x"))),
			`msg.payload: asynq "cairn1 probe`},
		{"a field unknown to asynq", setMsg(varintField(99, 1)), "msg: fields unknown to asynq's asynq.TaskMessage"},
		{"an extra hash field", func(ctx context.Context, rdb *redis.Client, task, _, _ string, _ []byte) error {
			return rdb.HSet(ctx, task, "unique_key", "u").Err()
		}, `hash field unique_key: asynq (absent), Cairn "u"`},
		{"a hash field missing", func(ctx context.Context, rdb *redis.Client, task, _, _ string, _ []byte) error {
			return rdb.HDel(ctx, task, "state").Err()
		}, `hash field state: asynq "`},
		{"pending_since in seconds", func(ctx context.Context, rdb *redis.Client, task, _, _ string, _ []byte) error {
			n, err := rdb.HGet(ctx, task, "pending_since").Int64()
			if errors.Is(err, redis.Nil) {
				return nil // a scheduled task has none
			}
			if err != nil {
				return err
			}
			return rdb.HSet(ctx, task, "pending_since", strconv.FormatInt(n/1e9, 10)).Err()
		}, "hash field pending_since: asynq"},
		{"the ID pushed twice", func(ctx context.Context, rdb *redis.Client, _, pending, id string, _ []byte) error {
			if n, err := rdb.Exists(ctx, pending).Result(); err != nil || n == 0 {
				return err
			}
			return rdb.LPush(ctx, pending, id).Err()
		}, "pending list (asynq:{queue}:pending): asynq"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rdb := probeRedis(t)
			err := tasks.CheckAsynqWire(context.Background(), rdb, corruptWriter{rdb, tt.mutate}, time.Now)
			var mm *tasks.WireMismatchError
			if !errors.As(err, &mm) {
				t.Fatalf("got %v, want a WireMismatchError", err)
			}
			msg := err.Error()
			for _, want := range []string{tt.want, "asynq " + tasks.AsynqFormatVersion + "'s task record",
				"asynq " + mm.AsynqVersion + " does not store tasks"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the error does not say %q:\n%s", want, msg)
				}
			}
			if mm.AsynqVersion != tasks.AsynqFormatVersion {
				t.Errorf("linked asynq version %q, want %q (go.mod's)", mm.AsynqVersion, tasks.AsynqFormatVersion)
			}
			requireEmpty(t, rdb)
		})
	}
}

// TestCheckAsynqWireScheduledScore: a writer that schedules the retry a
// second later than asynq does is caught by the scheduled set's score.
func TestCheckAsynqWireScheduledScore(t *testing.T) {
	t.Parallel()
	rdb := probeRedis(t)
	w := laterWriter{tasks.NewLuaTaskWriter(rdb)}
	err := tasks.CheckAsynqWire(context.Background(), rdb, w, time.Now)
	if err == nil || !strings.Contains(err.Error(), "scheduled retry: scheduled set (asynq:{queue}:scheduled)") ||
		strings.Contains(err.Error(), "pending task:") {
		t.Fatalf("got %v, want only the scheduled retry's score to differ", err)
	}
	requireEmpty(t, rdb)
}

type laterWriter struct{ w tasks.LuaTaskWriter }

func (l laterWriter) WriteTask(ctx context.Context, queue, id string, msg []byte, due, now time.Time) error {
	if !due.IsZero() {
		due = due.Add(time.Second)
	}
	return l.w.WriteTask(ctx, queue, id, msg, due, now)
}

func (l laterWriter) WriteStepTask(ctx context.Context, queue string, s tasks.Step, timeout time.Duration,
	due, now time.Time) error {
	if !due.IsZero() {
		due = due.Add(time.Second)
	}
	return l.w.WriteStepTask(ctx, queue, s, timeout, due, now)
}

// TestCheckAsynqWireRedisError: when Redis cannot be used the probe returns
// Redis's error, not a mismatch.
func TestCheckAsynqWireRedisError(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t, nil).Client(t)
	if err := rdb.Close(); err != nil {
		t.Fatal(err)
	}
	err := tasks.CheckAsynqWire(context.Background(), rdb, tasks.NewLuaTaskWriter(rdb), time.Now)
	var mm *tasks.WireMismatchError
	if !errors.Is(err, redis.ErrClosed) || errors.As(err, &mm) {
		t.Fatalf("got %v, want Redis's error", err)
	}
}

// TestCheckAsynqWireSubMillisecondClock: a clock whose reading has a
// sub-millisecond part that makes the scheduled retry's due time a whole
// second in milliseconds but not in nanoseconds: the probe still finds no
// difference (it once refused to start the worker about once in a thousand
// starts: asynq rounded the nanoseconds up to the next second).
func TestCheckAsynqWireSubMillisecondClock(t *testing.T) {
	t.Parallel()
	rdb := probeRedis(t)
	// Now, moved within its second to .500000500: the retry, due 1h1.5s
	// later, is then due at a whole second and 500ns.
	at := func() time.Time { return time.Now().Truncate(time.Second).Add(500*time.Millisecond + 500) }
	if err := tasks.CheckAsynqWire(context.Background(), rdb, tasks.NewLuaTaskWriter(rdb), at); err != nil {
		t.Fatal(err)
	}
	requireEmpty(t, rdb)
}

// luaTimeoutWriter writes as Cairn does, but for the tasks whose message
// it encodes in Lua (put_now), which it gives another timeout.
type luaTimeoutWriter struct{ tasks.LuaTaskWriter }

func (w luaTimeoutWriter) WriteStepTask(ctx context.Context, queue string, s tasks.Step, timeout time.Duration,
	due, now time.Time) error {
	return w.LuaTaskWriter.WriteStepTask(ctx, queue, s, timeout+time.Hour, due, now)
}

// TestCheckAsynqWireChecksTheLuaEncoder: the probe writes each task a
// second time as the scripts write the tasks no Go code encoded (gate
// admissions, compensations, repairs: put_now, which encodes the message
// in Lua), so a difference there alone fails it, naming those writes.
func TestCheckAsynqWireChecksTheLuaEncoder(t *testing.T) {
	t.Parallel()
	rdb := probeRedis(t)
	err := tasks.CheckAsynqWire(context.Background(), rdb, luaTimeoutWriter{tasks.NewLuaTaskWriter(rdb)}, time.Now)
	if _, ok := errors.AsType[*tasks.WireMismatchError](err); !ok {
		t.Fatalf("got %v, want a WireMismatchError", err)
	}
	for _, c := range []string{"pending task", "pending re-dispatch", "scheduled retry"} {
		if !strings.Contains(err.Error(), c+", message encoded in Lua: msg.timeout: asynq ") {
			t.Errorf("the error does not name %s's Lua-encoded timeout:\n%v", c, err)
		}
		if strings.Contains(err.Error(), c+": ") {
			t.Errorf("the error names %s's write with the message Go encoded, which is asynq's:\n%v", c, err)
		}
	}
	requireEmpty(t, rdb)
}
