-- begin.lua: start one attempt of a step, or resume it after its worker crashed.
-- KEYS: the run-level layout of common.lua; KEYS[2] is the delivered task's step.
-- ARGV[1..3]: run ID, key prefix, now (common.lua)
-- ARGV[4] task ID of this delivery
-- ARGV[5] fence token, unique to this delivery
-- ARGV[6] fence TTL, ms
-- ARGV[7] step index of the task
-- ARGV[8] retention of a run that ends here, ms
-- Returns one of:
--   {"gone"}                  no such run (never created, or expired): acknowledge
--   {"ended", status}         the run is terminal: acknowledge
--   {"stale", ...}            the task is not the step's current dispatch, or the step is done:
--                             acknowledge. When the run's current step is waiting for its task,
--                             its index, name, attempt, gen, due time and timeout follow, so the
--                             caller can make sure that task exists.
--   {"busy", wait_ms}         another delivery of this dispatch holds a live fence
--   {"early", wait_ms}        the attempt is not due yet
--   {"failed", code, reason}  the run failed here: deadline passed, crash budget or iteration
--                             ceiling exhausted
--   {"ok", attempt, crashes, crashed (0|1), input, policy, attempts used in the budget, deadline,
--    the next step's name ("" for none), its attempt counter and its timeout (ms),
--    then name and output of each earlier step}

local idx = tonumber(ARGV[7])
local token, ttl, retention = ARGV[5], num(ARGV[6]), ARGV[8]
local rs = redis.call("HMGET", KEYS[1], "status", "current", "deadline", "iterations", "max_iterations", "input",
  "steps")
local status = rs[1]
if not status then
  return {"gone"}
end
if is_terminal(status) then
  journal("delivery_ignored", "task", ARGV[4], "reason", "run " .. status)
  return {"ended", status}
end

local st = redis.call("HMGET", KEYS[2], "status", "task", "fence", "fence_expires_at", "next_attempt_at",
  "attempt", "crashes", "max_crashes", "name", "policy", "budget_base", "resuming", "retry_state",
  "attempts_started", "started_at")
if num(rs[2]) ~= idx or st[2] ~= ARGV[4] or (st[1] ~= "pending" and st[1] ~= "running") then
  local cur = num(rs[2])
  local c = redis.call("HMGET", step_key(cur), "status", "name", "attempt", "gen", "next_attempt_at", "timeout_ms")
  if c[1] == "pending" then
    return {"stale", int(cur), c[2], int(c[3]), int(c[4]), int(c[5]), int(c[6])}
  end
  return {"stale"}
end

local name, attempt = st[9], st[6]
local crashes = num(st[7])
-- crashed: this begin resumes an attempt whose worker died, either found
-- here (the fence expired) or by the reconciler, which re-dispatched it.
local crashed = 0
if st[12] == "1" then
  crashed = 1
end
if st[1] == "running" then
  local fence_expires = num(st[4])
  if st[3] ~= "" and fence_expires > NOW then
    return {"busy", int(fence_expires - NOW)}
  end
  -- The worker that held the fence stopped renewing it: a crash, which has
  -- its own budget and never consumes a retry.
  crashed = 1
  crashes = redis.call("HINCRBY", KEYS[2], "crashes", 1)
  journal("attempt_crashed", "step", name, "attempt", attempt, "task", ARGV[4], "crashes", int(crashes))
  if crashes > num(st[8]) then
    local reason = string.format("step %q: worker crashed %d times during attempt %d (max_crashes %d)",
      name, crashes, num(attempt), num(st[8]))
    fail_run(KEYS[2], "crash_budget_exhausted", reason, "step crashed too often", retention)
    return {"failed", "crash_budget_exhausted", reason}
  end
end

local due = num(st[5])
if due > NOW then
  return {"early", int(due - NOW)}
end
local deadline = num(rs[3])
if deadline > 0 and NOW >= deadline then
  local reason = string.format("run passed its deadline before step %q attempt %d", name, num(attempt))
  fail_run(KEYS[2], "run_timeout", reason, "run timed out", retention)
  return {"failed", "run_timeout", reason}
end
local max_iter = num(rs[5])
if max_iter > 0 and num(rs[4]) >= max_iter then
  local reason = string.format("run reached max_iterations %d before step %q attempt %d", max_iter, name, num(attempt))
  fail_run(KEYS[2], "max_iterations_exceeded", reason, "run reached its iteration ceiling", retention)
  return {"failed", "max_iterations_exceeded", reason}
end

-- The writes of a begin, each hash written once (this is the hot path).
if status == "pending" then
  set_status("pending", "running")
  redis.call("HSET", KEYS[1], "started_at", int(NOW))
end
redis.call("HSET", KEYS[1], "iterations", int(num(rs[4]) + 1), "warning", "", "updated_at", int(NOW))
if st[13] == "scheduled" then
  redis.call("ZREM", KEYS[6], RUN_ID)
end
redis.call("ZADD", KEYS[15], NOW + ttl, RUN_ID)
local started_at = num(st[15])
if started_at == 0 then
  started_at = NOW
end
redis.call("HSET", KEYS[2], "status", "running", "fence", token, "fence_expires_at", int(NOW + ttl),
  "retry_state", "none", "next_attempt_at", "0", "attempt_started_at", int(NOW), "resuming", "0",
  "attempts_started", int(num(st[14]) + 1 - crashed), "started_at", int(started_at))
journal("attempt_started", "step", name, "attempt", attempt, "task", ARGV[4], "resumed", int(crashed))

local nx = {"", "0", "0"}
if idx + 1 < num(rs[7]) then
  nx = redis.call("HMGET", step_key(idx + 1), "name", "attempt", "timeout_ms")
end
local out = {"ok", int(attempt), int(crashes), int(crashed), rs[6], st[10] or "{}",
  int(num(attempt) - num(st[11])), int(deadline), nx[1] or "", int(nx[2]), int(nx[3])}
for i = 0, idx - 1 do
  local o = redis.call("HMGET", step_key(i), "name", "output")
  out[#out + 1] = o[1] or ""
  out[#out + 1] = o[2] or ""
end
return out
