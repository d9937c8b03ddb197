-- needs: sp
-- step_get reads fields of step idx; step_set writes field/value pairs of
-- step idx; step_incr increments one of its fields.
local function step_get(idx, ...)
  local p, f = sp(idx), {...}
  for i = 1, #f do
    f[i] = p .. f[i]
  end
  return redis.call("HMGET", RUN, unpack(f))
end
