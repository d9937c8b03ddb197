-- read.lua: read a run record and all its step records at one instant, so a
-- reader never sees a run that contradicts its steps (read-only).
-- KEYS[1] cairn:{q}:run:<id>
-- ARGV[1] run ID
-- ARGV[2] the queue's key prefix, cairn:{q}:
-- Returns {} for an unknown run, else {run fields, step 0 fields, ...}, each
-- a flat field/value list as HGETALL returns it.

local run = redis.call("HGETALL", KEYS[1])
if #run == 0 then
  return {}
end
local out = {run}
local n = tonumber(redis.call("HGET", KEYS[1], "steps")) or 0
for i = 0, n - 1 do
  out[#out + 1] = redis.call("HGETALL", ARGV[2] .. "run:" .. ARGV[1] .. ":s:" .. i)
end
return out
