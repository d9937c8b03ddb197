-- compdone.lua: checkpoint a compensation's output and go on with the saga:
-- complete.lua's part for a compensation's step record (sagas, lib/fail_run.lua).
-- KEYS
--   RUN           the run record
--   next_task     asynq:{q}:t:<the next step's task ID> (or any key of the slot when
--                 next_id is "")
--   pending       asynq:{q}:pending
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   token         the fence token of the attempt
--   index         the step index
--   output        the step's output (JSON)
--   retention     the retention of a run that ends here, ms
--   next_id       the task ID the caller expects for the next step's first dispatch, or ""
--   next_msg      that task's asynq message (tasks.AsynqMessage)
--   inline_token  inline continuation (Definition.Inline): the fence token with which
--                 this delivery begins the next step itself, or ""
--   inline_ttl    the fence TTL of that begin, ms
-- (The KEYS and ARGV of complete.lua, as Store.Complete sends them: but for
-- token, index, output and retention they are not used; the next task is
-- written here, its message encoded in Lua.)
-- Returns {"next", index, name, attempt, timeout_ms, "1"} (the next
-- compensation, or the step after a rolled-back optional group: its task
-- is written here), {"compensated", failure code}, {"succeeded"} (an optional group was
-- the run's end), {"failed", code, reason, ""} (a required group was rolled
-- back and the run fails), {"done", run status} when this attempt's
-- complete was applied before, or {"fenced", why}: nothing written.

local RUN, next_task, pending = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, token, index, output, retention, next_id, next_msg, inline_token, inline_ttl =
  unpack(ARGV)
-- needs: COMP_BASE, IDX, NOW, breaker, fail_run, int, journal, num, sp, step_set

local idx = tonumber(index)
local i = idx - COMP_BASE
local v = redis.call("HMGET", RUN, "status", sp(idx) .. "status", sp(idx) .. "fence", sp(idx) .. "attempt",
  sp(idx) .. "attempt_started_at", sp(idx) .. "breaker", sp(i) .. "name", sp(idx) .. "name")
local run_status, st_status, st_fence, st_attempt, st_attempt_started_at, st_breaker = v[1], v[2], v[3], v[4], v[5], v[6]
local step_name, st_name = v[7], v[8]
if run_status ~= "compensating" or st_status ~= "running" or st_fence ~= token then
  if st_fence == "done:" .. token then
    return {"done", run_status}
  end
  if not run_status then
    return {"fenced", "run gone"}
  end
  if run_status ~= "compensating" then
    return {"fenced", "run " .. run_status}
  end
  return {"fenced", "fence lost"}
end
redis.call("ZREM", IDX("fences"), RUN_ID)
if st_breaker and st_breaker ~= "" then
  breaker("success", st_breaker, RUN_ID .. ":" .. index .. ":" .. token)
end
local duration = int(NOW - num(st_attempt_started_at))
journal("attempt_succeeded", "step", st_name, "attempt", st_attempt, "duration_ms", duration)
step_set(idx, "status", "succeeded", "output", output, "finished_at", NOWS, "fence", "done:" .. token,
  "fence_expires_at", "0")
step_set(i, "status", "compensated")
journal("compensation_succeeded", "step", step_name, "attempt", st_attempt, "duration_ms", duration)
return fail_run("saga").next(i, retention)
