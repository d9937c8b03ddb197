-- complete.lua: checkpoint a step's output and advance the run.
-- KEYS[1] the run record
-- KEYS[2] asynq:{q}:t:<the next step's task ID> (or any key of the slot when ARGV[8] is "")
-- KEYS[3] asynq:{q}:pending
-- ARGV[1..3]: run ID, key prefix, now (common.lua)
-- ARGV[4] fence token of the attempt
-- ARGV[5] step index
-- ARGV[6] output (JSON)
-- ARGV[7] retention of a run that ends here, ms
-- ARGV[8] task ID the caller expects for the next step's first dispatch, or ""
-- ARGV[9] that task's asynq message (tasks.AsynqMessage)
-- When the next step's task is the one expected, the script creates it as
-- asynq's enqueue would (see tasks/asynqwire.go), in the same atomic write
-- as the checkpoint.
-- Returns {"next", index, name, attempt, timeout_ms, enqueued (0|1)} when a
-- next step is due now, {"succeeded"} when this was the last step,
-- {"done", run status} when this attempt's complete was applied before (its
-- reply was lost; the step's fence is left as "done:<token>"), or {"fenced",
-- why} when this attempt no longer owns the step: nothing written.

local idx = tonumber(ARGV[5])
local p, q = "s" .. ARGV[5] .. ".", sp(idx + 1)
local v = redis.call("HMGET", RUN, "status", "steps", "workflow", "created_at", "idempotency_key",
  p .. "status", p .. "fence", p .. "name", p .. "attempt", p .. "attempt_started_at",
  q .. "attempt", q .. "name", q .. "timeout_ms", q .. "run_timeout_ms", "deadline_base", "run_timeout_ms",
  "deadline")
if v[1] ~= "running" or v[6] ~= "running" or v[7] ~= ARGV[4] then
  if v[7] == "done:" .. ARGV[4] then
    -- This attempt's own complete, applied before: its reply was lost.
    return {"done", v[1]}
  end
  if not v[1] then
    return {"fenced", "run gone"}
  end
  if v[1] ~= "running" then
    return {"fenced", "run " .. v[1]}
  end
  return {"fenced", "fence lost"}
end

redis.call("ZREM", IDX.fences, RUN_ID)
journal("attempt_succeeded", "step", v[8], "attempt", v[9], "duration_ms", int(NOW - num(v[10])))
-- (Begin left retry_state "none" and next_attempt_at "0", and only this
-- attempt, holding the fence, could have changed them since.)
local done = {p .. "status", "succeeded", p .. "output", ARGV[6], p .. "finished_at", NOWS,
  p .. "fence", "done:" .. ARGV[4], p .. "fence_expires_at", "0"}

local nxt = idx + 1
if nxt < num(v[2]) then
  local w, id, attempt = activation(nxt, v[11])
  step_deadline(w, v[15] or v[4], v[14], v[16], v[17])
  for i = 1, #done do
    w[#w + 1] = done[i]
  end
  redis.call("HSET", RUN, unpack(w))
  redis.call("ZADD", IDX.active, NOWS, RUN_ID)
  -- An activation gets a new attempt number, so its task ID is new to asynq.
  if ARGV[8] ~= "" and ARGV[8] == id then
    -- As put_task (common.lua) writes a task due now, inline: this is the
    -- hot path, and a helper would be a closure made on every call.
    redis.call("HSET", KEYS[2], "msg", ARGV[9], "state", "pending", "pending_since", NOWS .. "000000")
    redis.call("LPUSH", KEYS[3], id)
    return {"next", int(nxt), v[12], int(attempt), int(v[13]), "1"}
  end
  return {"next", int(nxt), v[12], int(attempt), int(v[13]), "0"}
end
-- The run can only still be in the active index, and in the deadline
-- index when it has a deadline: the fence went above, and a running step
-- has no scheduled retry (begin took it out of that index).
local leave = {"active"}
if not zero(v[17]) then
  leave[2] = "deadlines"
end
status_move(leave, "running", "succeeded", v[4], unpack(done))
journal("run_succeeded")
notify("run_succeeded", v[3])
local idem = false -- no idempotency key: expire_run has nothing more to read
if v[5] and v[5] ~= "" then
  idem = nil
end
expire_run(ARGV[7], idem)
return {"succeeded"}
