-- cancel.lua: cancel a run: no further attempts of any step.
-- KEYS[1] the run record (the run's current step is found from it).
-- ARGV[1..3]: run ID, key prefix, now (common.lua)
-- ARGV[4] actor (who cancels)
-- ARGV[5] retention, ms
-- Returns {"cancelled", task ID of the current step, that step's status before},
-- {"already"} when the run was cancelled before, {"ended", status} for another
-- terminal run, or {"gone"}.

local rs = redis.call("HMGET", RUN, "status", "current", "workflow")
local run_status, run_current, run_workflow = rs[1], rs[2], rs[3]
if not run_status then
  return {"gone"}
end
if run_status == "cancelled" then
  return {"already"}
end
if is_terminal(run_status) then
  return {"ended", run_status}
end
local cur = num(run_current)
local st = step_get(cur, "status", "task", "name", "attempt")
local st_status, st_task, st_name, st_attempt = st[1], st[2], st[3], st[4]
set_status(run_status, "cancelled", nil, "failure_code", "cancelled", "failure_reason", "cancelled by " .. ARGV[4])
step_set(cur, "status", "cancelled", "retry_state", "none", "next_attempt_at", "0",
  "fence", "", "fence_expires_at", "0", "finished_at", NOWS)
journal("run_cancelled", "step", st_name, "attempt", st_attempt, "actor", ARGV[4])
notify("run_cancelled", run_workflow, "step", st_name, "actor", ARGV[4])
expire_run(ARGV[5])
return {"cancelled", st_task or "", st_status or ""}
