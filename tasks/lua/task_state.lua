-- task_state returns asynq's state of task id of queue ("pending",
-- "scheduled", "active", "archived", ...), from its record
-- asynq:{<queue>}:t:<id>; nil when asynq holds none (or a record without
-- a state, which asynq never writes).
local function task_state(queue, id)
  return redis.call("HGET", "asynq:{" .. queue .. "}:t:" .. id, "state")
end
