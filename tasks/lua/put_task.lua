-- put_task writes asynq's record of task id, whose message is msg
-- (tasks.Step.AsynqMessage, encoded in Go), as asynq's own enqueue or
-- schedule would (tasks/asynqwire.go): pending on pending_key, or, when
-- due_ms (Unix ms, a number) is given and after now, scheduled on
-- scheduled_key for due_ms rounded up to the whole second (asynq keeps
-- whole seconds), and in Cairn's timers index cairn:{q}:timers for due_ms
-- itself, from which a worker's promoter moves it to pending at its
-- millisecond (tasks/timers.go: PromoteDue; asynq's forwarder, at the
-- second, is the fallback). now is Unix ms as a
-- decimal string (written as is), now_ms the same as a number when the
-- caller has it (converting now costs more than the rest of the call). The keys are the task's record asynq:{q}:t:<id>,
-- asynq:{q}:pending and asynq:{q}:scheduled (nil for a task due now). A
-- state script writes the task that continues the run with the state
-- change itself, so no crash or lost reply can fall between the two.
-- tasks.CheckAsynqWire compares what it writes with what asynq's own
-- client writes at every worker's start.
local function put_task(task_key, pending_key, scheduled_key, id, msg, now, due_ms, now_ms)
  if due_ms and due_ms > (now_ms or tonumber(now)) then
    redis.call("HSET", task_key, "msg", msg, "state", "scheduled")
    redis.call("ZADD", scheduled_key, string.format("%d", math.floor((due_ms + 999) / 1000)), id)
    -- asynq:{q}:scheduled -> cairn:{q}:timers
    redis.call("ZADD", "cairn" .. string.sub(scheduled_key, 6, -10) .. "timers", string.format("%d", due_ms), id)
    return
  end
  redis.call("HSET", task_key, "msg", msg, "state", "pending", "pending_since", now .. "000000")
  redis.call("LPUSH", pending_key, id)
end
