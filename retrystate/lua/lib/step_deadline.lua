-- step_deadline appends to the writes w the run's deadline while a step
-- whose effective run timeout is rt_ms (0 or false: the run's own, run_ms) is
-- current: base (the run's deadline_base: its creation, or a recovery past
-- the deadline) plus that timeout, 0 for none. The most specific run timeout
-- wins: a step may tighten or loosen it. old is the deadline now; when it
-- changes (or old is nil: always), the deadline index follows. (It captures
-- no local, as activation above.)
local function step_deadline(w, base, rt_ms, run_ms, old)
  local rt = tonumber(rt_ms) or 0
  if rt == 0 then
    rt = tonumber(run_ms) or 0
  end
  local d = 0
  if rt > 0 then
    d = (tonumber(base) or 0) + rt
  end
  if old ~= nil and d == (tonumber(old) or 0) then
    return d
  end
  local ds = string.format("%d", math.floor(d))
  w[#w + 1] = "deadline"
  w[#w + 1] = ds
  local RUN_ID, PREFIX = unpack(ARGV, 1, 2)
  if d > 0 then
    redis.call("ZADD", PREFIX .. "idx:deadlines", ds, RUN_ID)
  else
    redis.call("ZREM", PREFIX .. "idx:deadlines", RUN_ID)
  end
  return d
end
