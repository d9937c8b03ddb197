-- restore.lua: an administrator's restore of a finished run from the
-- checkpoint before one of its steps.
--   The steps before from_step keep their outputs; each must have succeeded
--   or been skipped. from_step and every later step are reset to pending,
--   with no output, no last error and a fresh retry and crash budget (their
--   attempt counters go on, so every new attempt gets a new task ID). The run
--   becomes running (pending if it never started) with from_step due now.
-- Only a finished run (succeeded, failed, cancelled or compensated) can be restored; a
-- pending or running run is refused (recover, retry and skip steer those).
-- As in operate.lua, the run's keys lose their expiry and its deadline (if
-- passed) and iteration count start afresh. The restore is journaled as
-- run_recovered (action "restore") with its actor, notified, and recorded in
-- the queue's audit stream in the same atomic write.
-- KEYS
--   RUN           the run record
--   audit         the queue's audit stream, cairn:{q}:audit
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   from_step     the name of the first step to run again
--   actor         who restores
--   audit_maxlen  the approximate maximum length of the audit stream
-- Returns {"dispatch", index, name, attempt, timeout_ms, workflow} (enqueue it),
-- {"waiting", reason, position} when the run is gated and waits in a line for a
-- slot it gave up (it starts when admitted), {"refused", reason}, or {"gone"}.

local RUN, audit = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, from_step, actor, audit_maxlen = unpack(ARGV)
-- needs: COMP_BASE, activate, gates, int, is_terminal, journal, notify, num, rehydrate, reopen, step_get, step_set

local rs = redis.call("HMGET", RUN, "status", "steps", "workflow", "owner")
local status, run_steps, run_workflow, run_owner = rs[1], rs[2], rs[3], rs[4]
if not status then
  return {"gone"}
end
if not is_terminal(status) then
  return {"refused", string.format(
    "run is %s; only a finished run (succeeded, failed, cancelled or compensated) can be restored", status)}
end
if not run_steps then
  -- A compact run (lib/compact_run.lua) gets its fields back first.
  rehydrate()
  run_steps = redis.call("HGET", RUN, "steps")
end
local n = num(run_steps)
local from = -1
for i = 0, n - 1 do
  local s_name = step_get(i, "name")[1]
  if s_name == from_step then
    from = i
    break
  end
end
if from < 0 then
  return {"refused", string.format("the run has no step %q", from_step)}
end
for i = 0, from - 1 do
  local s = step_get(i, "name", "status")
  local s_name, s_status = s[1], s[2]
  if s_status ~= "succeeded" and s_status ~= "skipped" and s_status ~= "rolled_back" then
    return {"refused", string.format("step %q before %q is %s; a run can only be restored from a step whose earlier steps all succeeded or were skipped",
      s_name, from_step, s_status)}
  end
end
-- A saga's state goes (a compensated run, or one whose compensation failed),
-- and so do the records of the compensations of the steps reset below.
redis.call("HDEL", RUN, "comp_end", "comp_step", "comp_hi", "comp_group", "comp_code", "comp_reason", "comp_lo")
for i = from, n - 1 do
  if step_get(i, "comp")[1] == "1" then
    step_set(COMP_BASE + i, "status", "pending", "output", "", "retry_state", "none", "next_attempt_at", "0",
      "crashes", "0", "task", "", "fence", "", "fence_expires_at", "0", "resuming", "0", "last_error", "",
      "last_error_class", "", "last_error_code", "", "started_at", "0", "finished_at", "0")
  end
end

-- Reset from_step and the steps after it.
for i = from, n - 1 do
  step_set(i, "status", "pending", "output", "", "retry_attempts", "0", "retry_state", "none",
    "next_attempt_at", "0", "crashes", "0", "gen", "0", "task", "", "fence", "", "fence_expires_at", "0",
    "resuming", "0", "last_error", "", "last_error_class", "", "last_error_code", "", "last_error_at", "0",
    "started_at", "0", "finished_at", "0")
end

reopen(status)
journal("run_recovered", "action", "restore", "step", from_step, "actor", actor, "from_status", status)
notify("run_recovered", run_workflow, "action", "restore", "step", from_step, "actor", actor)
redis.call("XADD", audit, "MAXLEN", "~", audit_maxlen, "*", "at", NOWS, "actor", actor, "action", "restore",
  "run", RUN_ID, "workflow", run_workflow, "owner", run_owner or "", "step", from_step,
  "detail", "restored a " .. status .. " run")

local _, attempt, name, timeout = activate(from)
if redis.call("HGET", RUN, "gated") == "1" then
  -- A run that gave up a slot when it failed takes its place in the line
  -- again (by its start order) and starts when it is admitted.
  local ok, reason, pos = gates().admit(RUN_ID)
  if not ok then
    return {"waiting", reason, pos}
  end
end
return {"dispatch", int(from), name, int(attempt), int(timeout), run_workflow}
