-- operate.lua: an operator's recover, retry or skip of a run.
--   recover: resume a failed run (or one left needing attention) at its first
--            step that has not succeeded, with a fresh budget for that step.
--   retry:   the same, for the named step, which must be that step.
--   skip:    mark the named step, which must be that step and optional, as
--            skipped, and continue with the next step.
-- Completed steps are never re-run. The run's keys lose their expiry, its
-- deadline (if passed) and iteration count start afresh.
-- A step rolled back with its optional group counts as done; a compensated
-- step (its required group was rolled back) as not done, so a recover runs
-- the group again from its first step. A run that failed because a
-- compensation failed for good (compensation_failed; lib/fail_run.lua's sagas)
-- is recovered, or retried by the compensation's name ("compensate:<step>"),
-- by running that compensation again with a fresh budget: the run is
-- compensating again, with its failure; a compensation cannot be skipped.
-- KEYS
--   RUN        the run record
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   action     "recover", "retry" or "skip"
--   step_name  the step's name ("" for recover)
--   actor      who acts
--   retention  the retention of a run that ends here (skip of the last step), ms
-- Returns {"dispatch", index, name, attempt, timeout_ms, workflow} (enqueue it),
-- {"succeeded"} (skip of the last step ended the run), {"waiting", reason,
-- position} when the run is gated and waits in a line for a slot it gave up
-- (it starts when admitted), {"refused", reason}, or {"gone"}.

local RUN = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, action, step_name, actor, retention = unpack(ARGV)
-- needs: COMP_BASE, IDX, NOW, activate, activation, compact_run, expire_run, gates, int, is_terminal, journal, notify, num, reopen, set_status, step_get, step_set

local rs = redis.call("HMGET", RUN, "status", "needs_attention", "steps", "workflow", "current", "failure_code")
local status, run_needs_attention, run_steps, run_workflow = rs[1], rs[2], rs[3], rs[4]
if not status then
  return {"gone"}
end
if not (status == "failed" or (not is_terminal(status) and run_needs_attention == "1")) then
  return {"refused", string.format("run is %s; only a failed run or one needing attention can be %s", status,
    action == "recover" and "recovered" or (action == "retry" and "retried" or "skipped"))}
end
local cur = num(rs[5])
if cur >= COMP_BASE then
  -- A compensation failed for good (or, compensating, was repaired too
  -- often): run it again.
  local c = step_get(cur, "name", "status", "attempt", "fence_expires_at")
  if action == "skip" then
    return {"refused", string.format("%q is a compensation, which cannot be skipped; retry it (or recover the run)",
      c[1])}
  end
  if action == "retry" and step_name ~= c[1] then
    return {"refused", string.format("the run stopped at its compensation %q; only that can be retried", c[1])}
  end
  if c[2] == "running" and num(c[4]) > NOW then
    return {"refused", string.format("%q is running", c[1])}
  end
  local r = redis.call("HMGET", RUN, "comp_code", "comp_reason")
  reopen(status, "compensating")
  redis.call("HSET", RUN, "failure_code", r[1] or "", "failure_reason", r[2] or "")
  step_set(cur, "crashes", "0", "last_error", "", "last_error_class", "", "last_error_code", "", "resuming", "0")
  journal("run_recovered", "action", action, "step", c[1], "actor", actor)
  notify("run_recovered", run_workflow, "action", action, "step", c[1], "actor", actor)
  local w, _, attempt = activation(cur, c[3])
  redis.call("HSET", RUN, unpack(w))
  redis.call("ZADD", IDX("active"), NOWS, RUN_ID)
  if redis.call("HGET", RUN, "gated") == "1" then
    local ok, reason, pos = gates().admit(RUN_ID)
    if not ok then
      return {"waiting", reason, pos}
    end
  end
  return {"dispatch", int(cur), c[1], int(attempt), int(step_get(cur, "timeout_ms")[1]), run_workflow}
end
local n = num(run_steps)
local first = -1
for i = 0, n - 1 do
  local s_status = step_get(i, "status")[1]
  if s_status ~= "succeeded" and s_status ~= "skipped" and s_status ~= "rolled_back" then
    first = i
    break
  end
end
if first < 0 then
  return {"refused", "every step has already succeeded or been skipped"}
end
local target = first
local st = step_get(target, "name", "status", "optional", "fence_expires_at")
local st_name, st_status, st_optional, st_fence_expires_at = st[1], st[2], st[3], st[4]
if action ~= "recover" then
  if st_name ~= step_name then
    local found = false
    for i = 0, n - 1 do
      local s = step_get(i, "name", "status")
      local s_name, s_status = s[1], s[2]
      if s_name == step_name then
        return {"refused", string.format("step %q is %s; only the step the run stopped at (%q) can be %s",
          step_name, s_status, st_name, action == "retry" and "retried" or "skipped")}
      end
    end
    return {"refused", string.format("the run has no step %q", step_name)}
  end
  if action == "skip" and st_optional ~= "1" then
    return {"refused", string.format("step %q is not optional; only optional steps can be skipped", step_name)}
  end
end
if st_status == "running" and num(st_fence_expires_at) > NOW then
  return {"refused", string.format("step %q is running", st_name)}
end

local to = reopen(status)
if step_get(target, "resuming")[1] == "snoozed" then
  -- A step that failed (run timeout, cancel) while snoozed: its next begin
  -- starts an attempt, not the snoozed one's next visit.
  step_set(target, "resuming", "0")
end
journal("run_recovered", "action", action, "step", st_name, "actor", actor)
notify("run_recovered", run_workflow, "action", action, "step", st_name, "actor", actor)

if action == "skip" then
  step_set(target, "status", "skipped", "finished_at", NOWS, "retry_state", "none", "next_attempt_at", "0",
    "fence", "", "fence_expires_at", "0")
  journal("step_skipped", "step", st_name, "actor", actor)
  target = target + 1
  if target >= n then
    set_status(to, "succeeded")
    journal("run_succeeded")
    notify("run_succeeded", run_workflow)
    if redis.call("HGET", RUN, "gated") == "1" then
      gates().release(RUN_ID, false)
    end
    compact_run()
    expire_run(retention)
    return {"succeeded"}
  end
else
  step_set(target, "crashes", "0", "last_error", "", "last_error_class", "", "last_error_code", "")
end
local _, attempt, name, timeout = activate(target)
if redis.call("HGET", RUN, "gated") == "1" then
  -- A run that gave up a slot when it failed takes its place in the line
  -- again (by its start order) and starts when it is admitted.
  local ok, reason, pos = gates().admit(RUN_ID)
  if not ok then
    return {"waiting", reason, pos}
  end
end
return {"dispatch", int(target), name, int(attempt), int(timeout), run_workflow}
