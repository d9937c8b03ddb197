-- begin.lua: start one attempt of a step, or resume it after its worker crashed.
-- KEYS[1] the run record.
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

-- One read: the run, this step, the next step and every earlier step's checkpoint.
local p, q = sp(idx), sp(idx + 1)
local f = {"status", "current", "deadline", "iterations", "max_iterations", "input", "steps", "created_at",
  p .. "status", p .. "task", p .. "fence", p .. "fence_expires_at", p .. "next_attempt_at",
  p .. "attempt", p .. "crashes", p .. "max_crashes", p .. "name", p .. "policy", p .. "budget_base",
  p .. "resuming", p .. "retry_state", p .. "attempts_started", p .. "started_at",
  q .. "name", q .. "attempt", q .. "timeout_ms", p .. "max_iterations"}
local NF = #f
for i = 0, idx - 1 do
  local e = sp(i)
  f[#f + 1] = e .. "name"
  f[#f + 1] = e .. "output"
end
local v = redis.call("HMGET", RUN, unpack(f))
local status = v[1]
if not status then
  return {"gone"}
end
if is_terminal(status) then
  journal("delivery_ignored", "task", ARGV[4], "reason", "run " .. status)
  return {"ended", status}
end

local st_status, st_task = v[9], v[10]
if num(v[2]) ~= idx or st_task ~= ARGV[4] or (st_status ~= "pending" and st_status ~= "running") then
  local cur = num(v[2])
  local c = step_get(cur, "status", "name", "attempt", "gen", "next_attempt_at", "timeout_ms")
  if c[1] == "pending" then
    return {"stale", int(cur), c[2], int(c[3]), int(c[4]), int(c[5]), int(c[6])}
  end
  return {"stale"}
end

local name, attempt = v[17], v[14]
local crashes = num(v[15])
-- crashed: this begin resumes an attempt whose worker died, either found
-- here (the fence expired) or by the reconciler, which re-dispatched it.
local crashed = 0
if v[20] == "1" then
  crashed = 1
end
if st_status == "running" then
  local fence_expires = num(v[12])
  if v[11] ~= "" and fence_expires > NOW then
    return {"busy", int(fence_expires - NOW)}
  end
  -- The worker that held the fence stopped renewing it: a crash, which has
  -- its own budget and never consumes a retry.
  crashed = 1
  crashes = step_incr(idx, "crashes", 1)
  journal("attempt_crashed", "step", name, "attempt", attempt, "task", ARGV[4], "crashes", int(crashes))
  if crashes > num(v[16]) then
    local reason = string.format("step %q: worker crashed %d times during attempt %d (max_crashes %d)",
      name, crashes, num(attempt), num(v[16]))
    fail_run(idx, "crash_budget_exhausted", reason, "step crashed too often", retention)
    return {"failed", "crash_budget_exhausted", reason}
  end
end

local due = num(v[13])
if due > NOW then
  return {"early", int(due - NOW)}
end
local deadline = num(v[3])
if deadline > 0 and NOW >= deadline then
  local reason = string.format("run passed its deadline (%s) before step %q attempt %d", timeout_limit(idx), name,
    num(attempt))
  fail_run(idx, "run_timeout", reason, "run timed out", retention)
  return {"failed", "run_timeout", reason}
end
-- The most specific iteration ceiling wins: the step's, else the run's.
local max_iter = num(v[27])
if max_iter == 0 then
  max_iter = num(v[5])
end
if max_iter > 0 and num(v[4]) >= max_iter then
  local reason = string.format("run reached max_iterations %d before step %q attempt %d", max_iter, name, num(attempt))
  fail_run(idx, "max_iterations_exceeded", reason, "run reached its iteration ceiling", retention)
  return {"failed", "max_iterations_exceeded", reason}
end

-- The writes of a begin: the run hash once (this is the hot path).
local started_at = num(v[23])
if started_at == 0 then
  started_at = NOW
end
local w = {"iterations", int(num(v[4]) + 1), "warning", "",
  p .. "status", "running", p .. "fence", token, p .. "fence_expires_at", int(NOW + ttl),
  p .. "retry_state", "none", p .. "next_attempt_at", "0", p .. "attempt_started_at", int(NOW), p .. "resuming", "0",
  p .. "attempts_started", int(num(v[22]) + 1 - crashed), p .. "started_at", int(started_at)}
if status == "pending" then
  w[#w + 1] = "started_at"
  w[#w + 1] = int(NOW)
  set_status("pending", "running", v[8], unpack(w))
else
  w[#w + 1] = "updated_at"
  w[#w + 1] = int(NOW)
  redis.call("HSET", RUN, unpack(w))
end
if v[21] == "scheduled" then
  redis.call("ZREM", IDX.scheduled, RUN_ID)
end
redis.call("ZADD", IDX.fences, NOW + ttl, RUN_ID)
journal("attempt_started", "step", name, "attempt", attempt, "task", ARGV[4], "resumed", int(crashed))

local out = {"ok", int(attempt), int(crashes), int(crashed), v[6], v[18] or "{}",
  int(num(attempt) - num(v[19])), int(deadline), v[24] or "", int(v[25]), int(v[26])}
for i = NF + 1, #v do
  out[#out + 1] = v[i] or ""
end
return out
