-- timeout.lua: fail a run that passed its deadline (the reconciler's repair;
-- Begin and Fail also enforce the deadline when an attempt starts or fails).
-- KEYS
--   RUN        the run record
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   retention  the retention, ms
-- Returns {"failed", task ID of the current step, its status before, reason, after}
-- or {"noop", why}.

local RUN = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, retention = unpack(ARGV)
-- needs: IDX, NOW, fail_run, free_probe, is_terminal, journal, num, step_get, timeout_limit

local rs = redis.call("HMGET", RUN, "status", "current", "deadline")
local run_status, run_current, run_deadline = rs[1], rs[2], rs[3]
if not run_status or is_terminal(run_status) then
  redis.call("ZREM", IDX("deadlines"), RUN_ID)
  return {"noop", "run " .. (run_status or "gone")}
end
local deadline = num(run_deadline)
if deadline <= 0 then
  redis.call("ZREM", IDX("deadlines"), RUN_ID)
  return {"noop", "no deadline"}
end
if deadline > NOW then
  redis.call("ZADD", IDX("deadlines"), run_deadline, RUN_ID)
  return {"noop", "not due"}
end
local cur = num(run_current)
local st = step_get(cur, "status", "task", "name", "attempt")
local st_status, st_task, st_name, st_attempt = st[1], st[2], st[3], st[4]
local reason = string.format("run passed its deadline (%s) during step %q (attempt %d)", timeout_limit(cur), st_name,
  num(st_attempt))
journal("repair", "kind", "deadline", "step", st_name, "attempt", st_attempt)
free_probe(cur)
local after = fail_run(cur, "run_timeout", reason, "run timed out", retention)
return {"failed", st_task or "", st_status or "", reason, after}
