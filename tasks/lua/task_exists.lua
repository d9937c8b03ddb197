-- task_exists tells whether asynq holds a record of task id of queue,
-- asynq:{<queue>}:t:<id>, in any state: its ID is taken.
local function task_exists(queue, id)
  return redis.call("EXISTS", "asynq:{" .. queue .. "}:t:" .. id) == 1
end
