-- needs: task_id
-- activation returns the field/value pairs that make step idx, whose
-- attempt counter is attempt_before, the run's current step, due now, with a
-- new attempt number and a fresh retry budget; the caller writes them (with
-- its own) and records activity on the run (ZADD IDX("active")). Returns the
-- pairs, the task ID (task_id's) and the new attempt number.
-- Like step_deadline below, it captures no local of the script around it
-- (but the helper task_id)
-- (it reads the run-level arguments itself, lua/README.md): a closure's
-- creation cost grows with what it
-- captures, and complete.lua, and begin.lua through saga(), include both.
local function activation(idx, attempt_before)
  local RUN_ID, _, NOWS = unpack(ARGV, 1, 3)
  local attempt = math.floor(tonumber(attempt_before) or 0) + 1
  local id = task_id(RUN_ID, idx, attempt)
  local p = string.format("s%d.", idx)
  local w = {p .. "attempt", string.format("%d", attempt), p .. "status", "pending", p .. "task", id,
    "current", string.format("%d", idx), "updated_at", NOWS}
  if attempt > 1 then
    -- A step that never had an attempt still has the values create gave
    -- it (a skip leaves them too); only a step activated before needs
    -- them reset.
    local r = {p .. "budget_base", string.format("%d", attempt - 1), p .. "retry_attempts", "0",
      p .. "retry_state", "none", p .. "next_attempt_at", "0", p .. "gen", "0", p .. "fence", "",
      p .. "fence_expires_at", "0"}
    for i = 1, #r do
      w[#w + 1] = r[i]
    end
  end
  return w, id, attempt
end
