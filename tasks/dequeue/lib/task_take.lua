-- task_take makes task id active under a lease until expiry (Unix s), as
-- asynq v0.26's dequeue does after taking the ID from pending (rdb.go,
-- dequeueCmd): the ID goes to the active list, the record's state becomes
-- active (pending_since goes), the lease is set. It returns the task's
-- message, or nil when the record is gone (nothing is written then). The
-- keys are asynq:{q}:active, asynq:{q}:lease and the task's record. Take
-- (dequeue/take.lua) and TakeNext (dequeue/take_next.lua) run it; it is
-- the dequeue's own (dequeue/lib), not shared with retrystate's scripts.
local function task_take(active, lease, task, id, expiry)
  local msg = redis.call("HGET", task, "msg")
  if not msg then
    return nil
  end
  redis.call("LPUSH", active, id)
  redis.call("HSET", task, "state", "active")
  redis.call("HDEL", task, "pending_since")
  redis.call("ZADD", lease, expiry, id)
  return msg
end
