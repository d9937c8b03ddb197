-- task_timer returns the due time (Unix ms, a number) at which Cairn's
-- timers index cairn:{q}:timers holds task id of queue, nil when it holds
-- none; with drop, it also takes the entry out. An entry leaves the index
-- when a promoter moves its task (promote.lua) or task_run runs it: a task
-- delivered while its entry is still there, a second or more before its
-- time, was moved by neither, nor by a forwarder (which moves a task at its
-- whole second, never early), but by asynq's Inspector.RunTask (asynqmon's
-- "Run").
local function task_timer(queue, id, drop)
  local timers = "cairn:{" .. queue .. "}:timers"
  local due = redis.call("ZSCORE", timers, id)
  if drop and due then
    redis.call("ZREM", timers, id)
  end
  return due and tonumber(due)
end
