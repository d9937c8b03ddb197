-- unlock.lua: release or extend a lock only if the caller still holds it.
-- KEYS[1] the lock key
-- ARGV[1] the holder's token
-- ARGV[2] new TTL in ms to extend, or 0 to release
-- Returns 1 when done, 0 when the lock is held by someone else or expired.

if redis.call("GET", KEYS[1]) ~= ARGV[1] then
  return 0
end
if tonumber(ARGV[2]) > 0 then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
else
  redis.call("DEL", KEYS[1])
end
return 1
