package tasks

import (
	"context"
	"embed"
	"io/fs"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Lua functions by which Cairn's state scripts write and read asynq's
// task records, in asynq's own format (asynqwire.go): lua/<name>.lua
// defines the local function <name>, using nothing but its arguments and
// Redis's Lua (no local of the script around it), so that the scripts of
// retrystate include them as they are (retrystate/lua/README.md):
//
//   - task_id(rid, idx, attempt, gen): a step attempt's task ID, as ID;
//   - put_task(task_key, pending_key, scheduled_key, id, msg, now, due_ms,
//     now_ms): writes task id with the message msg that Go encoded
//     (Step.AsynqMessage), pending or scheduled;
//   - put_now(queue, now, rid, workflow, idx, name, attempt, gen, id,
//     timeout_ms, due_ms): writes a step attempt's task, its message
//     encoded in Lua;
//   - task_state(queue, id), task_exists(queue, id): asynq's record of a
//     task;
//   - task_run(queue, id, now): a scheduled or retried task moved to
//     pending, as asynq's Inspector.RunTask does, and out of the timers
//     index (retry now);
//   - task_timer(queue, id, drop): the task's due time in the timers index
//     (an entry left there by a task delivered early: asynq's RunTask);
//   - task_done(active, lease, task, day, total, completed, unique, id,
//     stats_expiry, keep_until, msg): asynq's acknowledgement of a task
//     whose handler succeeded (Dequeuer.Done, and complete.lua with the
//     checkpoint of the step the task ran: DoneArgs).
//
// CheckAsynqWire checks what put_task and put_now write against asynq's
// own client at every worker's start (LuaTaskWriter runs them).
//
//go:embed lua/*.lua
var luaFS embed.FS

// Lua returns the Lua functions of asynq's task records, one file each,
// lua/<name>.lua at its root (see above).
func Lua() fs.FS {
	sub, err := fs.Sub(luaFS, "lua")
	if err != nil { // embedded at build time: an error is a build bug
		panic("tasks: " + err.Error())
	}
	return sub
}

// luaFunc returns the source of the Lua function name (lua/<name>.lua).
func luaFunc(name string) string {
	b, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil { // embedded at build time: an error is a build bug
		panic("tasks: " + err.Error())
	}
	return string(b)
}

// The scripts of LuaTaskWriter: put_task and put_now alone, called with
// their arguments in order, by name.
var (
	putTaskScript = sync.OnceValue(func() *redis.Script {
		return redis.NewScript(luaFunc("put_task") + `
local task_key, pending_key, scheduled_key = unpack(KEYS)
local id, msg, now, due_ms = unpack(ARGV)
put_task(task_key, pending_key, scheduled_key, id, msg, now, tonumber(due_ms))
return 1
`)
	})
	putNowScript = sync.OnceValue(func() *redis.Script {
		return redis.NewScript(luaFunc("put_now") + `
local queue, now, rid, workflow, idx, name, attempt, gen, id, timeout_ms, due_ms = unpack(ARGV)
put_now(queue, now, rid, workflow, tonumber(idx), name, attempt, gen, id, timeout_ms, due_ms)
return 1
`)
	})
)

// LuaTaskWriter writes asynq's records of tasks with the Lua functions the
// state scripts write them with (put_task, put_now): for CheckAsynqWire,
// which compares what they write with what asynq's own client writes.
// Cairn's engine never calls it.
type LuaTaskWriter struct {
	rdb redis.Scripter
}

// NewLuaTaskWriter returns a LuaTaskWriter on rdb.
func NewLuaTaskWriter(rdb redis.Scripter) LuaTaskWriter { return LuaTaskWriter{rdb: rdb} }

// WriteTask writes task id of queue with message msg (Step.AsynqMessage),
// as put_task does: pending when due is zero or not after now, else
// scheduled for due rounded up to the whole second.
func (w LuaTaskWriter) WriteTask(ctx context.Context, queue, id string, msg []byte, due, now time.Time) error {
	task, pending, scheduled := asynqKeys(queue, id)
	return putTaskScript().Run(ctx, w.rdb, []string{task, pending, scheduled}, id, msg, luaMs(now),
		luaMs(due)).Err()
}

// WriteStepTask writes the task of attempt s of a step whose timeout is
// stepTimeout as put_now does, encoding its message in Lua: pending when
// due is zero or not after now, else scheduled for due rounded up to the
// whole second.
func (w LuaTaskWriter) WriteStepTask(ctx context.Context, queue string, s Step, stepTimeout time.Duration,
	due, now time.Time) error {
	task, _, _ := asynqKeys(queue, s.ID())
	return putNowScript().Run(ctx, w.rdb, []string{task}, queue, luaMs(now), s.RunID,
		s.Workflow, s.Index, s.Name, s.Attempt, s.Gen, s.ID(), stepTimeout.Milliseconds(), luaMs(due)).Err()
}

// luaMs is t in Unix ms as the state scripts get it, a decimal string; "0"
// for the zero time.
func luaMs(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}
