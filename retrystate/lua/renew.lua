-- renew.lua: extend the fence of a running attempt (heartbeat).
-- KEYS[1] cairn:{q}:run:<id>          run record
-- KEYS[2] cairn:{q}:idx:fences        running attempts by fence expiry
-- ARGV[1] fence token
-- ARGV[2] now, Unix ms
-- ARGV[3] fence TTL, ms
-- ARGV[4] run ID
-- ARGV[5] step index
-- Returns 1 when renewed, 0 when the attempt lost its fence, -1 when the run
-- is no longer running (cancelled, failed or gone; a compensating run runs
-- its compensations).

local p = "s" .. ARGV[5] .. "."
local v = redis.call("HMGET", KEYS[1], "status", p .. "status", p .. "fence")
local run_status, st_status, st_fence = v[1], v[2], v[3]
if run_status ~= "running" and run_status ~= "compensating" then
  return -1
end
if st_status ~= "running" or st_fence ~= ARGV[1] then
  return 0
end
local expires = string.format("%d", tonumber(ARGV[2]) + tonumber(ARGV[3]))
redis.call("HSET", KEYS[1], p .. "fence_expires_at", expires)
redis.call("ZADD", KEYS[2], expires, ARGV[4])
return 1
