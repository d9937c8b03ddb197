-- unlock.lua: release or extend a lock only if the caller still holds it.
-- KEYS
--   lock   the lock's key
-- ARGV
--   token  the holder's token
--   ttl    the new TTL in ms to extend, or 0 to release
-- Returns 1 when done, 0 when the lock is held by someone else or expired.

local lock = unpack(KEYS)
local token, ttl = unpack(ARGV)

if redis.call("GET", lock) ~= token then
  return 0
end
if tonumber(ttl) > 0 then
  redis.call("PEXPIRE", lock, ttl)
else
  redis.call("DEL", lock)
end
return 1
