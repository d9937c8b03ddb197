-- needs: IDX, activation, step_deadline, step_get
-- activate makes step idx the run's current step (see activation) and writes
-- it, with the run's deadline under that step's run timeout. Returns the
-- task ID, the attempt number, the step's name and its timeout (ms).
local function activate(idx)
  local s = step_get(idx, "attempt", "name", "timeout_ms", "run_timeout_ms")
  local st_attempt, st_name, st_timeout_ms, st_run_timeout_ms = s[1], s[2], s[3], s[4]
  local r = redis.call("HMGET", RUN, "deadline_base", "run_timeout_ms", "created_at")
  local run_deadline_base, run_timeout_ms, run_created_at = r[1], r[2], r[3]
  local w, id, attempt = activation(idx, st_attempt)
  step_deadline(w, run_deadline_base or run_created_at, st_run_timeout_ms, run_timeout_ms, nil)
  redis.call("HSET", RUN, unpack(w))
  redis.call("ZADD", IDX("active"), NOWS, RUN_ID)
  return id, attempt, st_name, st_timeout_ms
end
