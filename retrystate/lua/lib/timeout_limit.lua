-- needs: num, step_get
-- timeout_limit describes the run timeout in force while step idx is
-- current, for failure reasons: "run_timeout 1500ms".
local function timeout_limit(idx)
  local st_run_timeout_ms = step_get(idx, "run_timeout_ms")[1]
  local ms = num(st_run_timeout_ms)
  if ms == 0 then
    ms = num(redis.call("HGET", RUN, "run_timeout_ms"))
  end
  if ms % 1000 == 0 then
    return string.format("run_timeout %ds", ms / 1000)
  end
  return string.format("run_timeout %dms", ms)
end
