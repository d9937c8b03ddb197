-- peek.lua: read a run's status and its current step's dispatch (read-only).
-- KEYS
--   run  cairn:{q}:run:<id>, the run record
-- Returns {} for an unknown run, else {status, needs_attention, updated_at,
-- current index, step name, step status, attempt, gen, task, next_attempt_at,
-- fence_expires_at, timeout_ms}.

local run = unpack(KEYS)

local rs = redis.call("HMGET", run, "status", "needs_attention", "updated_at", "current")
local run_status, run_needs_attention, run_updated_at, run_current = rs[1], rs[2], rs[3], rs[4]
if not run_status then
  return {}
end
local p = "s" .. (run_current or "0") .. "."
local st = redis.call("HMGET", run, p .. "name", p .. "status", p .. "attempt", p .. "gen", p .. "task",
  p .. "next_attempt_at", p .. "fence_expires_at", p .. "timeout_ms")
local st_name, st_status, st_attempt, st_gen, st_task = st[1], st[2], st[3], st[4], st[5]
local st_next_attempt_at, st_fence_expires_at, st_timeout_ms = st[6], st[7], st[8]
return {run_status, run_needs_attention, run_updated_at, run_current, st_name or "", st_status or "",
  st_attempt or "0", st_gen or "0", st_task or "", st_next_attempt_at or "0", st_fence_expires_at or "0",
  st_timeout_ms or "0"}
