-- complete.lua: checkpoint a step's output and advance the run.
-- KEYS: the run-level layout of common.lua; KEYS[2] is the completed step.
-- ARGV[1..3]: run ID, key prefix, now (common.lua)
-- ARGV[4] fence token of the attempt
-- ARGV[5] step index
-- ARGV[6] output (JSON)
-- ARGV[7] retention of a run that ends here, ms
-- ARGV[8] task ID the caller expects for the next step's first dispatch, or ""
-- ARGV[9] that task's asynq message (tasks.AsynqMessage)
-- KEYS[17] asynq:{q}:t:<that task ID> (or any key of the slot when ARGV[8] is "")
-- KEYS[18] asynq:{q}:pending
-- When the next step's task is the one expected, the script creates it as
-- asynq's enqueue would (see tasks/asynqwire.go), in the same atomic write
-- as the checkpoint.
-- Returns {"next", index, name, attempt, timeout_ms, enqueued (0|1)} when a
-- next step is due now, {"succeeded"} when this was the last step, or
-- {"fenced", why} when this attempt no longer owns the step (run ended, fence
-- taken over): nothing written.

local idx = tonumber(ARGV[5])
local rs = redis.call("HMGET", KEYS[1], "status", "steps", "workflow")
if not rs[1] then
  return {"fenced", "run gone"}
end
if rs[1] ~= "running" then
  return {"fenced", "run " .. rs[1]}
end
local st = redis.call("HMGET", KEYS[2], "status", "fence", "name", "attempt", "attempt_started_at")
if st[1] ~= "running" or st[2] ~= ARGV[4] then
  return {"fenced", "fence lost"}
end

redis.call("ZREM", KEYS[15], RUN_ID)
redis.call("HSET", KEYS[2], "status", "succeeded", "output", ARGV[6], "finished_at", int(NOW),
  "fence", "", "fence_expires_at", "0", "retry_state", "none", "next_attempt_at", "0")
journal("attempt_succeeded", "step", st[3], "attempt", st[4], "duration_ms", int(NOW - num(st[5])))

local nxt = idx + 1
if nxt < num(rs[2]) then
  local _, id, attempt, name, timeout = activate(nxt)
  -- An activation gets a new attempt number, so its task ID is new to asynq.
  if ARGV[8] ~= "" and ARGV[8] == id then
    redis.call("HSET", KEYS[17], "msg", ARGV[9], "state", "pending", "pending_since", int(NOW) .. "000000")
    redis.call("LPUSH", KEYS[18], id)
    return {"next", int(nxt), name, int(attempt), int(timeout), "1"}
  end
  return {"next", int(nxt), name, int(attempt), int(timeout), "0"}
end
set_status("running", "succeeded")
journal("run_succeeded")
notify("run_succeeded", rs[3])
expire_run(ARGV[7])
return {"succeeded"}
