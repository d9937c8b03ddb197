-- repair.lua: re-create the task of a run's current step, which the caller
-- found missing in asynq (lost after a state write, or deleted), archived
-- (asynq gave up delivering it, and its ID stays taken), or stalled (asynq
-- moved it to active for a worker that never received it: its lease is not
-- being extended, and the step was never begun), or the wake-up task of a
-- waiting await or sleep.
-- KEYS[1] the run record.
-- ARGV[1..3]: run ID, key prefix, now (common.lua)
-- ARGV[4] the task ID the caller found missing, archived or stalled
-- ARGV[5] "missing", "archived" or "stalled"
-- ARGV[6] max automatic repairs of a run
-- An archived or stalled task keeps its ID in asynq, so the step gets a new
-- dispatch (the next gen); should asynq deliver the old task later, it is a
-- stale duplicate. None of these is an attempt or a crash: no budget is
-- spent. Each repair is journaled and notified (run_recovered, by reconciler).
-- Returns {"repair", index, name, attempt, gen, next_attempt_at, timeout_ms, kind, workflow}:
-- enqueue that dispatch; {"attention", reason} when the run was repaired too
-- often; {"noop", why} when the state moved on since the caller looked.

local rs = redis.call("HMGET", RUN, "status", "current", "needs_attention", "workflow")
local run_status, run_current, run_needs_attention, run_workflow = rs[1], rs[2], rs[3], rs[4]
if not run_status or is_terminal(run_status) then
  return {"noop", "run " .. (run_status or "gone")}
end
if run_needs_attention == "1" then
  return {"noop", "needs attention"}
end
local idx = num(run_current)
local st = step_get(idx, "status", "task", "name", "attempt", "gen", "next_attempt_at", "timeout_ms")
local st_status, st_task, st_name, st_attempt = st[1], st[2], st[3], st[4]
local st_gen, st_next_attempt_at, st_timeout_ms = st[5], st[6], st[7]
-- A waiting step (an await or a sleep) is repaired as a pending one: its
-- task is its wake-up, due at next_attempt_at.
if (st_status ~= "pending" and st_status ~= "waiting") or st_task ~= ARGV[4] then
  return {"noop", "state moved on"}
end
local kind = "task_missing"
if st_status == "waiting" then
  kind = "wake_task_missing"
elseif num(st_next_attempt_at) > 0 then
  kind = "retry_task_missing"
end
if ARGV[5] == "archived" then
  kind = "task_archived"
elseif ARGV[5] == "stalled" then
  kind = "stalled_delivery"
end
local ok, why = auto_repair(ARGV[6], kind)
if not ok then
  return {"attention", why}
end
local gen, id = num(st_gen), st_task
if ARGV[5] ~= "missing" then
  gen = step_incr(idx, "gen", "1")
  id = task_id(idx, st_attempt, gen)
  step_set(idx, "task", id)
end
touch()
journal("repair", "kind", kind, "step", st_name, "attempt", st_attempt, "task", id)
notify("run_recovered", run_workflow, "by", "reconciler", "kind", kind, "step", st_name, "attempt", st_attempt)
return {"repair", int(idx), st_name, int(st_attempt), int(gen), int(st_next_attempt_at), int(st_timeout_ms), kind,
  run_workflow}
