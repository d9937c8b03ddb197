-- release.lua: hand back an attempt that its worker stopped because it could
-- not renew the attempt's fence before it expired (Redis unreachable from
-- the worker). The worker is alive and gave the attempt up, so this is not
-- a crash, and the step did not fail: no budget is spent. The attempt gets a
-- new dispatch (the next gen), due now, whose task is written here; it
-- resumes the same attempt (same attempt number and idempotency key).
-- KEYS[1] the run record
-- KEYS[2] asynq:{q}:t:<the new dispatch's task ID> (or any key of the slot when ARGV[6] is "")
-- KEYS[3] asynq:{q}:pending
-- ARGV[1..3]: run ID, key prefix, now (common.lua)
-- ARGV[4] fence token of the attempt
-- ARGV[5] step index
-- ARGV[6] task ID the caller expects for the new dispatch, or ""
-- ARGV[7] that task's asynq message (tasks.AsynqMessage)
-- Returns {"released", index, name, attempt, gen, timeout_ms, enqueued (0|1)}, or
-- {"fenced", why} when the attempt no longer owns the step: nothing written.

local idx = tonumber(ARGV[5])
local rs = redis.call("HMGET", RUN, "status", "workflow")
if not rs[1] then
  return {"fenced", "run gone"}
end
if rs[1] ~= "running" then
  return {"fenced", "run " .. rs[1]}
end
local st = step_get(idx, "status", "fence", "name", "attempt", "timeout_ms")
if st[1] ~= "running" or st[2] ~= ARGV[4] then
  return {"fenced", "fence lost"}
end
local gen = step_incr(idx, "gen", "1")
local id = task_id(idx, st[4], gen)
step_set(idx, "status", "pending", "fence", "", "fence_expires_at", "0", "task", id, "resuming", "interrupted")
redis.call("ZREM", IDX.fences, RUN_ID)
touch()
journal("attempt_interrupted", "step", st[3], "attempt", st[4], "task", id,
  "reason", "its worker could not renew the attempt's fence (Redis unreachable) and stopped it")
notify("run_recovered", rs[2], "by", "worker", "kind", "interrupted_attempt", "step", st[3], "attempt", st[4])
local enqueued = "0"
if ARGV[6] ~= "" and ARGV[6] == id then
  put_task(KEYS[2], KEYS[3], nil, id, ARGV[7], "0")
  enqueued = "1"
end
return {"released", int(idx), st[3], int(st[4]), int(gen), int(st[5]), enqueued}
