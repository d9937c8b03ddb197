-- needs: NOW, int, num
-- put_task writes asynq's record of task id, whose message is msg
-- (tasks.AsynqMessage), as asynq's own enqueue or schedule would (see
-- tasks/asynqwire.go): pending on pending_key when due_ms is not after now,
-- else scheduled on scheduled_key for due_ms rounded up to the whole second
-- (asynq keeps whole seconds; the engine waits out the rest). A state script
-- writes the task that continues the run with the state change itself, so
-- no crash or lost reply can fall between the two.
local function put_task(task_key, pending_key, scheduled_key, id, msg, due_ms)
  local due = num(due_ms)
  if due <= NOW then
    redis.call("HSET", task_key, "msg", msg, "state", "pending", "pending_since", NOWS .. "000000")
    redis.call("LPUSH", pending_key, id)
  else
    redis.call("HSET", task_key, "msg", msg, "state", "scheduled")
    redis.call("ZADD", scheduled_key, int((due + 999) / 1000), id)
  end
end
