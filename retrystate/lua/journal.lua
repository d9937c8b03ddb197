-- journal.lua: read the entries of a run's journal that compact_run
-- (lib/compact_run.lua) moved into its hash: a DUMP of the stream, cut into the
-- fields j0 .. j<jn - 1>. It restores them into a temporary key of the
-- run's slot, reads it and deletes it, in one atomic script: nothing is
-- left behind.
-- KEYS[1] the run record
-- KEYS[2] the temporary key: the run's key and ":jtmp"
-- Returns XRANGE's reply, the entries oldest first ({} when the run has
-- moved none).

local n = tonumber(redis.call("HGET", KEYS[1], "jn")) or 0
if n == 0 then
  return {}
end
local f = {}
for i = 0, n - 1 do
  f[#f + 1] = "j" .. i
end
local parts = redis.call("HMGET", KEYS[1], unpack(f))
for i = 1, #parts do
  if not parts[i] then
    return redis.error_reply("ERR cairn: a part of the run's moved journal is missing")
  end
end
redis.call("DEL", KEYS[2])
redis.call("RESTORE", KEYS[2], 0, table.concat(parts))
local xs = redis.call("XRANGE", KEYS[2], "-", "+")
redis.call("DEL", KEYS[2])
return xs
