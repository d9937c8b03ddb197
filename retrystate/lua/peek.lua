-- peek.lua: read a run's status and its current step's dispatch (read-only).
-- KEYS[1] cairn:{q}:run:<id>
-- Returns {} for an unknown run, else {status, needs_attention, updated_at,
-- current index, step name, step status, attempt, gen, task, next_attempt_at,
-- fence_expires_at, timeout_ms}.

local rs = redis.call("HMGET", KEYS[1], "status", "needs_attention", "updated_at", "current")
if not rs[1] then
  return {}
end
local p = "s" .. (rs[4] or "0") .. "."
local st = redis.call("HMGET", KEYS[1], p .. "name", p .. "status", p .. "attempt", p .. "gen", p .. "task",
  p .. "next_attempt_at", p .. "fence_expires_at", p .. "timeout_ms")
return {rs[1], rs[2], rs[3], rs[4], st[1] or "", st[2] or "", st[3] or "0", st[4] or "0", st[5] or "", st[6] or "0",
  st[7] or "0", st[8] or "0"}
