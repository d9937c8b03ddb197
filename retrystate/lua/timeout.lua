-- timeout.lua: fail a run that passed its deadline (the reconciler's repair;
-- Begin and Fail also enforce the deadline when an attempt starts or fails).
-- KEYS[1] the run record.
-- ARGV[1..3]: run ID, key prefix, now (common.lua)
-- ARGV[4] retention, ms
-- Returns {"failed", task ID of the current step, its status before, reason}
-- or {"noop", why}.

local rs = redis.call("HMGET", RUN, "status", "current", "deadline")
if not rs[1] or is_terminal(rs[1]) then
  redis.call("ZREM", IDX.deadlines, RUN_ID)
  return {"noop", "run " .. (rs[1] or "gone")}
end
local deadline = num(rs[3])
if deadline <= 0 then
  redis.call("ZREM", IDX.deadlines, RUN_ID)
  return {"noop", "no deadline"}
end
if deadline > NOW then
  redis.call("ZADD", IDX.deadlines, rs[3], RUN_ID)
  return {"noop", "not due"}
end
local cur = num(rs[2])
local st = step_get(cur, "status", "task", "name", "attempt")
local reason = string.format("run passed its deadline (%s) during step %q (attempt %d)", timeout_limit(cur), st[3],
  num(st[4]))
journal("repair", "kind", "deadline", "step", st[3], "attempt", st[4])
fail_run(cur, "run_timeout", reason, "run timed out", ARGV[4])
return {"failed", st[2] or "", st[1] or "", reason}
