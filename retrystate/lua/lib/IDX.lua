-- IDX returns the key of index cairn:{q}:idx:<name> (all, active,
-- scheduled, attention, fences, deadlines, status:<status>,
-- waiting:<reason>), mirroring keys.go. (A function: a table that built
-- its keys on first use cost each call 3,000 instructions to make and
-- 2,400 more for each name it built, against some 700 for each call.)
local function IDX(name)
  return PREFIX .. "idx:" .. name
end
