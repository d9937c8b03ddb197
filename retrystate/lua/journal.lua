-- journal.lua: read the entries of a run's journal that compact_run
-- (lib/compact_run.lua) moved into its hash: a DUMP of the stream, cut into the
-- fields j0 .. j<jn - 1>. It restores them into a temporary key of the
-- run's slot, reads it and deletes it, in one atomic script: nothing is
-- left behind.
-- KEYS
--   run   the run record
--   temp  the temporary key: the run's key and ":jtmp"
-- Returns XRANGE's reply, the entries oldest first ({} when the run has
-- moved none).

local run, temp = unpack(KEYS)

local n = tonumber(redis.call("HGET", run, "jn")) or 0
if n == 0 then
  return {}
end
local f = {}
for i = 0, n - 1 do
  f[#f + 1] = "j" .. i
end
local parts = redis.call("HMGET", run, unpack(f))
for i = 1, #parts do
  if not parts[i] then
    return redis.error_reply("ERR cairn: a part of the run's moved journal is missing")
  end
end
redis.call("DEL", temp)
redis.call("RESTORE", temp, 0, table.concat(parts))
local xs = redis.call("XRANGE", temp, "-", "+")
redis.call("DEL", temp)
return xs
