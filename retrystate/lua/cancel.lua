-- cancel.lua: cancel a run: no further attempts of any step.
-- KEYS[1] the run record (the run's current step is found from it).
-- ARGV[1..3]: run ID, key prefix, now (common.lua)
-- ARGV[4] actor (who cancels)
-- ARGV[5] retention, ms
-- A failed run that still holds its ordering key (on_failure: block) can be
-- cancelled too: that gives up the run and frees the key. A gated run frees
-- its slots, or leaves the line it waits in; the runs that lets through
-- start (their tasks written here).
-- Returns {"cancelled", task ID of the current step ("" for a run that was
-- waiting in a line), that step's status before},
-- {"already"} when the run was cancelled before, {"ended", status} for another
-- terminal run, or {"gone"}.

local rs = redis.call("HMGET", RUN, "status", "current", "workflow", "gated", "hold_k")
local run_status, run_current, run_workflow, run_gated, run_hold_k = rs[1], rs[2], rs[3], rs[4], rs[5]
if not run_status then
  return {"gone"}
end
if run_status == "cancelled" then
  return {"already"}
end
if is_terminal(run_status) and not (run_status == "failed" and run_hold_k == "1") then
  return {"ended", run_status}
end
local cur = num(run_current)
local st = step_get(cur, "status", "task", "name", "attempt")
local st_status, st_task, st_name, st_attempt = st[1], st[2], st[3], st[4]
set_status(run_status, "cancelled", nil, "failure_code", "cancelled", "failure_reason", "cancelled by " .. ARGV[4])
if run_status == "failed" then
  -- The run failed before: its step keeps its failed status and record.
  redis.call("ZREM", IDX.attention, RUN_ID)
  redis.call("HSET", RUN, "needs_attention", "0")
else
  step_set(cur, "status", "cancelled", "retry_state", "none", "next_attempt_at", "0",
    "fence", "", "fence_expires_at", "0", "finished_at", NOWS)
end
if run_gated == "1" then
  gate("release", RUN_ID, false)
end
journal("run_cancelled", "step", st_name, "attempt", st_attempt, "actor", ARGV[4])
notify("run_cancelled", run_workflow, "step", st_name, "actor", ARGV[4])
expire_run(ARGV[5])
return {"cancelled", st_task or "", st_status or ""}
