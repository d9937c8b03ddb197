-- int returns n, a number or a numeric string (nil and false are 0),
-- rounded down, as a decimal string. Every number written to Redis or
-- returned goes through it: given a Lua number, redis.call formats it with
-- "%.17g" (and Lua's own tostring with "%.14g"), multi-precision
-- conversions that cost more than the command they feed; "%d" is an
-- integer conversion. (Times are Unix ms: 13 digits, exact in a double.)
local function int(n)
  return string.format("%d", math.floor(tonumber(n) or 0))
end
