-- IDX.<name> is the key of index cairn:{q}:idx:<name> (all, active,
-- scheduled, attention, fences, deadlines, status:<status>), built when first
-- used.
local IDX = setmetatable({}, {__index = function(t, name)
  local k = PREFIX .. "idx:" .. name
  rawset(t, name, k)
  return k
end})
