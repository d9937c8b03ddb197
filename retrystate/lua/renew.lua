-- renew.lua: extend the fence of a running attempt (heartbeat).
-- KEYS
--   run     cairn:{q}:run:<id>, the run record
--   fences  cairn:{q}:idx:fences, running attempts by fence expiry
-- ARGV
--   token   the fence token
--   now     now, Unix ms
--   ttl     the fence's TTL, ms
--   run_id  the run ID
--   index   the step index
-- Returns 1 when renewed, 0 when the attempt lost its fence, -1 when the run
-- is no longer running (cancelled, failed or gone; a compensating run runs
-- its compensations).

local run, fences = unpack(KEYS)
local token, now, ttl, run_id, index = unpack(ARGV)

local p = "s" .. index .. "."
local v = redis.call("HMGET", run, "status", p .. "status", p .. "fence")
local run_status, st_status, st_fence = v[1], v[2], v[3]
if run_status ~= "running" and run_status ~= "compensating" then
  return -1
end
if st_status ~= "running" or st_fence ~= token then
  return 0
end
local expires = string.format("%d", tonumber(now) + tonumber(ttl))
redis.call("HSET", run, p .. "fence_expires_at", expires)
redis.call("ZADD", fences, expires, run_id)
return 1
