-- needs: sp
local function step_set(idx, ...)
  local p, a = sp(idx), {...}
  for i = 1, #a, 2 do
    a[i] = p .. a[i]
  end
  return redis.call("HSET", RUN, unpack(a))
end
