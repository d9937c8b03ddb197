-- redispatch.lua: the reconciler's repair of an attempt whose worker died.
-- The attempt's fence expired (nobody renewed it), so its worker is gone: a
-- crash, which consumes the step's crash budget and never its retry budget.
-- The attempt gets a new dispatch (the next gen), so the old task, should
-- asynq deliver it again after its lease, is a stale duplicate.
-- KEYS
--   RUN        the run record (the current step comes from it)
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   max_auto   the most automatic repairs of a run
--   retention  the retention of a run that ends here, ms
-- Returns {"redispatched", index, name, attempt, gen, timeout_ms, crashes, workflow},
-- {"failed", code, reason, after} when the crash budget is spent,
-- {"attention", reason} when the run was repaired too often, or
-- {"noop", why} when the attempt is alive or gone (the index is fixed).

local RUN = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, max_auto, retention = unpack(ARGV)
-- needs: IDX, NOW, auto_repair, breaker, fail_run, int, is_terminal, journal, notify, num, step_get, step_incr, step_set, task_id, touch

local rs = redis.call("HMGET", RUN, "status", "current", "needs_attention", "workflow")
local run_status, run_current, run_needs_attention, run_workflow = rs[1], rs[2], rs[3], rs[4]
if not run_status or is_terminal(run_status) then
  redis.call("ZREM", IDX("fences"), RUN_ID)
  return {"noop", "run " .. (run_status or "gone")}
end
local idx = num(run_current)
local st = step_get(idx, "status", "fence_expires_at", "crashes", "max_crashes", "name", "attempt",
  "timeout_ms", "task", "fence", "breaker")
-- (st_crashes is unused: step_incr below counts this crash and returns the total.)
local st_status, st_fence_expires_at, st_crashes, st_max_crashes = st[1], st[2], st[3], st[4]
local st_name, st_attempt, st_timeout_ms, st_task = st[5], st[6], st[7], st[8]
if st_status ~= "running" then
  redis.call("ZREM", IDX("fences"), RUN_ID)
  return {"noop", "step " .. (st_status or "gone")}
end
local expires = num(st_fence_expires_at)
if expires > NOW then
  redis.call("ZADD", IDX("fences"), st_fence_expires_at, RUN_ID)
  return {"noop", "fence alive"}
end
redis.call("ZREM", IDX("fences"), RUN_ID)
if run_needs_attention == "1" then
  return {"noop", "needs attention"}
end

local attempt = num(st_attempt)
local crashes = step_incr(idx, "crashes", "1")
if st[10] and st[10] ~= "" then
  -- The dead attempt may have been its breaker's probe: free the slot for
  -- the resumed attempt (lib/breaker.lua).
  breaker("crashed", st[10], RUN_ID .. ":" .. int(idx) .. ":" .. (st[9] or ""))
end
journal("attempt_crashed", "step", st_name, "attempt", int(attempt), "task", st_task, "crashes", int(crashes),
  "detected_by", "reconciler")
if crashes > num(st_max_crashes) then
  local reason = string.format("step %q: worker crashed %d times during attempt %d (max_crashes %d)",
    st_name, crashes, attempt, num(st_max_crashes))
  local after, f_code, f_reason = fail_run(idx, "crash_budget_exhausted", reason, "step crashed too often", retention)
  return {"failed", f_code, f_reason, after}
end
local gen = step_incr(idx, "gen", "1")
local id = task_id(RUN_ID, idx, attempt, gen)
step_set(idx, "status", "pending", "fence", "", "fence_expires_at", "0", "task", id, "resuming", "1")
touch()
local ok, why = auto_repair(max_auto, "crashed attempt")
if not ok then
  return {"attention", why}
end
journal("repair", "kind", "crashed_attempt", "step", st_name, "attempt", int(attempt), "task", id)
notify("run_recovered", run_workflow, "by", "reconciler", "kind", "crashed_attempt", "step", st_name,
  "attempt", int(attempt), "crashes", int(crashes))
return {"redispatched", int(idx), st_name, int(attempt), int(gen), int(st_timeout_ms), int(crashes), run_workflow}
