-- renew.lua: extend the fence of a running attempt (heartbeat).
-- KEYS[1] cairn:{q}:run:<id>          run record
-- KEYS[2] cairn:{q}:run:<id>:s:<idx>  the running step
-- KEYS[3] cairn:{q}:idx:fences        running attempts by fence expiry
-- ARGV[1] fence token
-- ARGV[2] now, Unix ms
-- ARGV[3] fence TTL, ms
-- ARGV[4] run ID
-- Returns 1 when renewed, 0 when the attempt lost its fence, -1 when the run
-- is no longer running (cancelled, failed or gone).

if redis.call("HGET", KEYS[1], "status") ~= "running" then
  return -1
end
local st = redis.call("HMGET", KEYS[2], "status", "fence")
if st[1] ~= "running" or st[2] ~= ARGV[1] then
  return 0
end
local expires = tonumber(ARGV[2]) + tonumber(ARGV[3])
redis.call("HSET", KEYS[2], "fence_expires_at", string.format("%d", expires))
redis.call("ZADD", KEYS[3], expires, ARGV[4])
return 1
