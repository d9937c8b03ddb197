-- cancel.lua: cancel a run: no further attempts of any step.
-- KEYS[1] the run record (the run's current step is found from it).
-- ARGV[1..3]: run ID, key prefix, now (common.lua)
-- ARGV[4] actor (who cancels)
-- ARGV[5] retention, ms
-- Returns {"cancelled", task ID of the current step, that step's status before},
-- {"already"} when the run was cancelled before, {"ended", status} for another
-- terminal run, or {"gone"}.

local rs = redis.call("HMGET", RUN, "status", "current", "workflow")
if not rs[1] then
  return {"gone"}
end
if rs[1] == "cancelled" then
  return {"already"}
end
if is_terminal(rs[1]) then
  return {"ended", rs[1]}
end
local cur = num(rs[2])
local st = step_get(cur, "status", "task", "name", "attempt")
set_status(rs[1], "cancelled", nil, "failure_code", "cancelled", "failure_reason", "cancelled by " .. ARGV[4])
step_set(cur, "status", "cancelled", "retry_state", "none", "next_attempt_at", "0",
  "fence", "", "fence_expires_at", "0", "finished_at", NOWS)
journal("run_cancelled", "step", st[3], "attempt", st[4], "actor", ARGV[4])
notify("run_cancelled", rs[3], "step", st[3], "actor", ARGV[4])
expire_run(ARGV[5])
return {"cancelled", st[2] or "", st[1] or ""}
