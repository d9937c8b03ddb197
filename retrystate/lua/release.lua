-- release.lua: hand back an attempt that its worker stopped because it could
-- not renew the attempt's fence before it expired (Redis unreachable from
-- the worker). The worker is alive and gave the attempt up, so this is not
-- a crash, and the step did not fail: no budget is spent. The attempt gets a
-- new dispatch (the next gen), due now, whose task is written here; it
-- resumes the same attempt (same attempt number and idempotency key).
-- KEYS[1] the run record
-- KEYS[2] asynq:{q}:t:<the new dispatch's task ID> (or any key of the slot when ARGV[6] is "")
-- KEYS[3] asynq:{q}:pending
-- ARGV[1..3]: run ID, key prefix, now (lua/README.md)
-- ARGV[4] fence token of the attempt
-- ARGV[5] step index
-- ARGV[6] task ID the caller expects for the new dispatch, or ""
-- ARGV[7] that task's asynq message (tasks.AsynqMessage)
-- Returns {"released", index, name, attempt, gen, timeout_ms, enqueued (0|1)}, or
-- {"fenced", why} when the attempt no longer owns the step: nothing written.

local RUN = KEYS[1]
local RUN_ID, PREFIX, NOWS = ARGV[1], ARGV[2], ARGV[3]
-- needs: IDX, free_probe, int, journal, notify, put_task, step_get, step_incr, step_set, task_id, touch

local idx = tonumber(ARGV[5])
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
if st_status ~= "running" or st_fence ~= ARGV[4] then
  return {"fenced", "fence lost"}
end
free_probe(idx) -- the resumed attempt may probe the step's breaker at once
local gen = step_incr(idx, "gen", "1")
local id = task_id(idx, st_attempt, gen)
step_set(idx, "status", "pending", "fence", "", "fence_expires_at", "0", "task", id, "resuming", "interrupted")
redis.call("ZREM", IDX.fences, RUN_ID)
touch()
journal("attempt_interrupted", "step", st_name, "attempt", st_attempt, "task", id,
  "reason", "its worker could not renew the attempt's fence (Redis unreachable) and stopped it")
notify("run_recovered", run_workflow, "by", "worker", "kind", "interrupted_attempt", "step", st_name,
  "attempt", st_attempt)
local enqueued = "0"
if ARGV[6] ~= "" and ARGV[6] == id then
  put_task(KEYS[2], KEYS[3], nil, id, ARGV[7], "0")
  enqueued = "1"
end
return {"released", int(idx), st_name, int(st_attempt), int(gen), int(st_timeout_ms), enqueued}
