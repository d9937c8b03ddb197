-- repair.lua: re-create the task of a run's current step, which the caller
-- found missing in asynq (lost after a state write, or deleted), archived
-- (asynq gave up delivering it, and its ID stays taken), or stalled (asynq
-- moved it to active for a worker that never received it: its lease is not
-- being extended, and the step was never begun).
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
if not rs[1] or is_terminal(rs[1]) then
  return {"noop", "run " .. (rs[1] or "gone")}
end
if rs[3] == "1" then
  return {"noop", "needs attention"}
end
local idx = num(rs[2])
local st = step_get(idx, "status", "task", "name", "attempt", "gen", "next_attempt_at", "timeout_ms")
if st[1] ~= "pending" or st[2] ~= ARGV[4] then
  return {"noop", "state moved on"}
end
local kind = "task_missing"
if num(st[6]) > 0 then
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
local gen, id = num(st[5]), st[2]
if ARGV[5] ~= "missing" then
  gen = step_incr(idx, "gen", "1")
  id = task_id(idx, st[4], gen)
  step_set(idx, "task", id)
end
touch()
journal("repair", "kind", kind, "step", st[3], "attempt", st[4], "task", id)
notify("run_recovered", rs[4], "by", "reconciler", "kind", kind, "step", st[3], "attempt", st[4])
return {"repair", int(idx), st[3], int(st[4]), int(gen), int(st[6]), int(st[7]), kind, rs[4]}
