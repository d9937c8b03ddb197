-- needs: sp
local function step_incr(idx, field, by)
  return redis.call("HINCRBY", RUN, sp(idx) .. field, by)
end
