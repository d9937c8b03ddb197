-- redispatch.lua: the reconciler's repair of an attempt whose worker died.
-- The attempt's fence expired (nobody renewed it), so its worker is gone: a
-- crash, which consumes the step's crash budget and never its retry budget.
-- The attempt gets a new dispatch (the next gen), so the old task, should
-- asynq deliver it again after its lease, is a stale duplicate.
-- KEYS[1] the run record (the current step comes from it).
-- ARGV[1..3]: run ID, key prefix, now (common.lua)
-- ARGV[4] max automatic repairs of a run
-- ARGV[5] retention of a run that ends here, ms
-- Returns {"redispatched", index, name, attempt, gen, timeout_ms, crashes, workflow},
-- {"failed", code, reason} when the crash budget is spent,
-- {"attention", reason} when the run was repaired too often, or
-- {"noop", why} when the attempt is alive or gone (the index is fixed).

local rs = redis.call("HMGET", RUN, "status", "current", "needs_attention", "workflow")
if not rs[1] or is_terminal(rs[1]) then
  redis.call("ZREM", IDX.fences, RUN_ID)
  return {"noop", "run " .. (rs[1] or "gone")}
end
local idx = num(rs[2])
local st = step_get(idx, "status", "fence_expires_at", "crashes", "max_crashes", "name", "attempt",
  "timeout_ms", "task")
if st[1] ~= "running" then
  redis.call("ZREM", IDX.fences, RUN_ID)
  return {"noop", "step " .. (st[1] or "gone")}
end
local expires = num(st[2])
if expires > NOW then
  redis.call("ZADD", IDX.fences, st[2], RUN_ID)
  return {"noop", "fence alive"}
end
redis.call("ZREM", IDX.fences, RUN_ID)
if rs[3] == "1" then
  return {"noop", "needs attention"}
end

local name, attempt = st[5], num(st[6])
local crashes = step_incr(idx, "crashes", "1")
journal("attempt_crashed", "step", name, "attempt", int(attempt), "task", st[8], "crashes", int(crashes),
  "detected_by", "reconciler")
if crashes > num(st[4]) then
  local reason = string.format("step %q: worker crashed %d times during attempt %d (max_crashes %d)",
    name, crashes, attempt, num(st[4]))
  fail_run(idx, "crash_budget_exhausted", reason, "step crashed too often", ARGV[5])
  return {"failed", "crash_budget_exhausted", reason}
end
local gen = step_incr(idx, "gen", "1")
local id = task_id(idx, attempt, gen)
step_set(idx, "status", "pending", "fence", "", "fence_expires_at", "0", "task", id, "resuming", "1")
touch()
local ok, why = auto_repair(ARGV[4], "crashed attempt")
if not ok then
  return {"attention", why}
end
journal("repair", "kind", "crashed_attempt", "step", name, "attempt", int(attempt), "task", id)
notify("run_recovered", rs[4], "by", "reconciler", "kind", "crashed_attempt", "step", name, "attempt", int(attempt),
  "crashes", int(crashes))
return {"redispatched", int(idx), name, int(attempt), int(gen), int(st[7]), int(crashes), rs[4]}
