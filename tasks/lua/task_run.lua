-- task_run moves task id of queue from asynq's scheduled or retry set to
-- its pending list, as asynq's Inspector.RunTask (asynqmon's "Run") and
-- Cairn's promoter (promote.lua) do: state pending, pending_since now (Unix
-- ms as a decimal string) in ns; and takes it out of Cairn's timers index
-- cairn:{q}:timers, so that no promoter looks for it again. A task in
-- another state is left as it is. It returns the state the task was in
-- ("scheduled", "retry", "pending", "active", ...), nil when asynq holds no
-- record of it.
local function task_run(queue, id, now)
  local key = "asynq:{" .. queue .. "}:t:" .. id
  local state = redis.call("HGET", key, "state")
  if state == "scheduled" or state == "retry" then
    redis.call("ZREM", "asynq:{" .. queue .. "}:" .. state, id)
    redis.call("LPUSH", "asynq:{" .. queue .. "}:pending", id)
    redis.call("HSET", key, "state", "pending", "pending_since", now .. "000000")
    redis.call("ZREM", "cairn:{" .. queue .. "}:timers", id)
  end
  return state
end
