package retrystate

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// putTaskScript runs the helper put_task alone: the code by which the
// state scripts write asynq's record of a task (complete.lua inlines its
// pending branch; TestCompleteInlinesPutTask keeps the two the same).
var putTaskScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(luaHelpers().assemble("put_task", `local task_key, pending_key, scheduled_key = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, id, msg, due_ms = unpack(ARGV)
-- needs: put_task
put_task(task_key, pending_key, scheduled_key, id, msg, due_ms)
return 1
`))
})

// TaskWriter writes asynq's record of one task as the state scripts write
// the tasks that continue a run (lua/lib/put_task.lua). It exists for
// tasks.CheckAsynqWire, which compares its record with the one asynq's own
// client writes; Cairn's engine never calls it.
type TaskWriter struct {
	rdb redis.Scripter
}

// NewTaskWriter returns a TaskWriter on rdb.
func NewTaskWriter(rdb redis.Scripter) TaskWriter { return TaskWriter{rdb: rdb} }

// WriteTask writes task id of queue with message msg (tasks.AsynqMessage):
// pending when due is zero or not after now, else scheduled for due rounded
// up to the whole second.
func (w TaskWriter) WriteTask(ctx context.Context, queue, id string, msg []byte, due, now time.Time) error {
	k := newKeys(queue)
	dueMs := int64(0)
	if !due.IsZero() {
		dueMs = due.UnixMilli()
	}
	return putTaskScript().Run(ctx, w.rdb,
		[]string{k.asynqTask(id), k.asynqPending(), k.asynqScheduled()},
		"", k.prefix, strconv.FormatInt(now.UnixMilli(), 10), id, msg, strconv.FormatInt(dueMs, 10)).Err()
}
