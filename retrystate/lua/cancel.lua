-- cancel.lua: cancel a run: no further attempts of any step.
-- KEYS
--   RUN         the run record (the run's current step is found from it)
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   actor       who cancels
--   retention   the retention, ms
--   compensate  "1": cancel and compensate: the compensations of the run's
--               succeeded steps run, last first (lib/fail_run.lua's sagas), and the run
--               ends compensated, with code "cancelled"; a failed run (which cannot
--               be cancelled otherwise) keeps its failure. A run with nothing to
--               compensate is cancelled as without it.
-- A failed run that still holds its ordering key (on_failure: block) can be
-- cancelled too: that gives up the run and frees the key. A gated run frees
-- its slots, or leaves the line it waits in; the runs that lets through
-- start (their tasks written here). A compensating run can be cancelled: its
-- compensations stop.
-- Returns {"cancelled", task ID of the current step ("" for a run that was
-- waiting in a line), that step's status before}, {"compensating", the same
-- two} when the run compensates now (its first compensation's task is
-- written here), {"already", status} when the run was cancelled (or, with
-- compensate, set compensating) before, {"ended", status} for another terminal
-- run, {"refused", reason}, or {"gone"}.

local RUN = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, actor, retention, compensate = unpack(ARGV)
-- needs: COMP_BASE, IDX, journal, compact_run, expire_run, fail_run, free_probe, gates, is_terminal, notify, num, set_status, sp, step_get, step_set, zero

compensate = compensate == "1"
local rs = redis.call("HMGET", RUN, "status", "current", "workflow", "gated", "hold_k", "failure_code", "steps")
local run_status, run_current, run_workflow, run_gated, run_hold_k = rs[1], rs[2], rs[3], rs[4], rs[5]
if not run_status then
  return {"gone"}
end
if run_status == "cancelled" or (compensate and run_status == "compensating") then
  return {"already", run_status}
end
local cur = num(run_current)
if compensate and (run_status == "failed" or not is_terminal(run_status)) then
  if cur >= COMP_BASE then
    return {"refused", "the run stopped at a compensation that failed; recover the run to run it again"}
  end
  -- Is there anything to compensate?
  local any = false
  for i = 0, num(rs[7]) - 1 do
    local s = step_get(i, "status", "comp")
    if s[1] == "succeeded" and s[2] == "1" then
      any = true
      break
    end
  end
  if any then
    free_probe(cur)
    local st = step_get(cur, "status", "task", "name", "attempt")
    local code, reason = "cancelled", "cancelled by " .. actor
    local w = {}
    if run_status == "failed" then
      -- The failed run is live again while its compensations run.
      code, reason = rs[6] or "", redis.call("HGET", RUN, "failure_reason") or ""
      redis.call("ZREM", IDX("attention"), RUN_ID)
      redis.call("PERSIST", RUN)
      redis.call("PERSIST", JOURNAL)
      w = {"needs_attention", "0", "finished_at", "0"}
    else
      local p = sp(cur)
      w = {p .. "status", "cancelled", p .. "retry_state", "none", p .. "next_attempt_at", "0", p .. "fence", "",
        p .. "fence_expires_at", "0", p .. "finished_at", NOWS}
    end
    if run_gated == "1" and not zero(redis.call("HGET", RUN, "waiting")) then
      -- A run waiting in a gate's line leaves it: its compensations run
      -- outside the gates.
      gates().release(RUN_ID, false)
    end
    journal("run_cancelled", "step", st[3], "attempt", st[4], "actor", actor, "compensate", "1")
    notify("run_cancelled", run_workflow, "step", st[3], "actor", actor, "compensate", "1")
    fail_run("saga").start("compensated", 0, cur, cur, "", code, reason, retention, w)
    return {"compensating", st[2] or "", st[1] or ""}
  end
end
if is_terminal(run_status) and not (run_status == "failed" and run_hold_k == "1") then
  return {"ended", run_status}
end
local st = step_get(cur, "status", "task", "name", "attempt")
local st_status, st_task, st_name, st_attempt = st[1], st[2], st[3], st[4]
free_probe(cur)
set_status(run_status, "cancelled", nil, "failure_code", "cancelled", "failure_reason", "cancelled by " .. actor)
if run_status == "failed" then
  -- The run failed before: its step keeps its failed status and record.
  redis.call("ZREM", IDX("attention"), RUN_ID)
  redis.call("HSET", RUN, "needs_attention", "0")
else
  step_set(cur, "status", "cancelled", "retry_state", "none", "next_attempt_at", "0",
    "fence", "", "fence_expires_at", "0", "finished_at", NOWS)
end
if run_status == "compensating" then
  redis.call("HDEL", RUN, "comp_end", "comp_step", "comp_hi", "comp_group", "comp_code", "comp_reason", "comp_lo")
end
if run_gated == "1" then
  gates().release(RUN_ID, false)
end
journal("run_cancelled", "step", st_name, "attempt", st_attempt, "actor", actor)
notify("run_cancelled", run_workflow, "step", st_name, "actor", actor)
compact_run()
expire_run(retention)
return {"cancelled", st_task or "", st_status or ""}
