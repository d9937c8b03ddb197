-- needs: breaker, int, step_get
-- free_probe gives up the breaker probe slot that the running attempt of
-- step idx may hold, when that attempt stops without an answer from the
-- dependency: handed back (release.lua), or its run cancelled or timed out.
-- (begin.lua and redispatch.lua do the same for a crashed one.)
local function free_probe(idx)
  local s = step_get(idx, "status", "breaker", "fence")
  if s[1] == "running" and s[2] and s[2] ~= "" then
    breaker("crashed", s[2], RUN_ID .. ":" .. int(idx) .. ":" .. (s[3] or ""))
  end
end
