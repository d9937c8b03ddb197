-- release.lua: hand back an attempt that its worker stopped because it could
-- not renew the attempt's fence before it expired (Redis unreachable from
-- the worker). The worker is alive and gave the attempt up, so this is not
-- a crash, and the step did not fail: no budget is spent. The attempt gets a
-- new dispatch (the next gen), due now, whose task is written here; it
-- resumes the same attempt (same attempt number and idempotency key).
-- KEYS
--   RUN        the run record
--   next_task  asynq:{q}:t:<the new dispatch's task ID> (or any key of the slot when next_id is "")
--   pending    asynq:{q}:pending
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   token      the fence token of the attempt
--   index      the step index
--   next_id    the task ID the caller expects for the new dispatch, or ""
--   next_msg   that task's asynq message (tasks.AsynqMessage)
-- Returns {"released", index, name, attempt, gen, timeout_ms, enqueued (0|1)}, or
-- {"fenced", why} when the attempt no longer owns the step: nothing written.

local RUN, next_task, pending = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, token, index, next_id, next_msg = unpack(ARGV)
-- needs: IDX, free_probe, int, journal, notify, put_task, step_get, step_incr, step_set, task_id, touch

local idx = tonumber(index)
local rs = redis.call("HMGET", RUN, "status", "workflow")
local run_status, run_workflow = rs[1], rs[2]
if not run_status then
  return {"fenced", "run gone"}
end
if run_status ~= "running" and run_status ~= "compensating" then
  return {"fenced", "run " .. run_status}
end
local st = step_get(idx, "status", "fence", "name", "attempt", "timeout_ms")
local st_status, st_fence, st_name, st_attempt, st_timeout_ms = st[1], st[2], st[3], st[4], st[5]
if st_status ~= "running" or st_fence ~= token then
  return {"fenced", "fence lost"}
end
free_probe(idx) -- the resumed attempt may probe the step's breaker at once
local gen = step_incr(idx, "gen", "1")
local id = task_id(RUN_ID, idx, st_attempt, gen)
step_set(idx, "status", "pending", "fence", "", "fence_expires_at", "0", "task", id, "resuming", "interrupted")
redis.call("ZREM", IDX("fences"), RUN_ID)
touch()
journal("attempt_interrupted", "step", st_name, "attempt", st_attempt, "task", id,
  "reason", "its worker could not renew the attempt's fence (Redis unreachable) and stopped it")
notify("run_recovered", run_workflow, "by", "worker", "kind", "interrupted_attempt", "step", st_name,
  "attempt", st_attempt)
local enqueued = "0"
if next_id ~= "" and next_id == id then
  put_task(next_task, pending, nil, id, next_msg, NOWS)
  enqueued = "1"
end
return {"released", int(idx), st_name, int(st_attempt), int(gen), int(st_timeout_ms), enqueued}
