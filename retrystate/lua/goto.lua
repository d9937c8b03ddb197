-- goto.lua: the step body asked to continue at a named step (workflow.Goto):
-- an earlier step, or this one. The checkpoints from the target to this step
-- are superseded: each is journaled (step_superseded, with its output) and
-- its step goes back to pending; the target becomes current with a new
-- attempt number and a fresh retry budget (activation), due now, as
-- complete.lua activates the next step. Begin counts each visit against
-- max_iterations, as it counts every begin.
-- KEYS
--   RUN          the run record
--   next_task    asynq:{q}:t:<the target's task ID> (or any key of the slot when next_id is "")
--   pending      asynq:{q}:pending
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   token        the fence token of the attempt
--   index        the step index
--   target_name  the target step's name
--   next_id      the task ID the caller expects for the target's dispatch, or ""
--   next_msg     that task's asynq message (tasks.AsynqMessage)
--   retention    the retention of a run that ends here, ms
-- A target that is not this step or an earlier one of the run (unknown, or
-- later) fails the run with invalid_goto.
-- Returns {"goto", index, name, attempt, timeout_ms, enqueued (0|1)},
-- {"done", run status} when this attempt's goto was applied before (its
-- reply was lost; the step's fence is left as "done:<token>"),
-- {"failed", code, reason, after} when the run failed, or {"fenced", why} when this
-- attempt no longer owns the step: nothing written.

local RUN, next_task, pending = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, token, index, target_name, next_id, next_msg, retention = unpack(ARGV)
-- needs: IDX, NOW, activate, breaker, fail_run, int, journal, num, put_task, sp, step_get, step_set, touch

local idx = tonumber(index)
local DONE = "done:" .. token
local rs = redis.call("HMGET", RUN, "status", "workflow")
local run_status, run_workflow = rs[1], rs[2]
local st = step_get(idx, "status", "fence", "name", "attempt", "attempt_started_at", "output")
local st_status, st_fence, st_name, st_attempt, st_attempt_started_at = st[1], st[2], st[3], st[4], st[5]
if run_status ~= "running" or st_status ~= "running" or st_fence ~= token then
  if st_fence == DONE then
    return {"done", run_status}
  end
  if not run_status then
    return {"fenced", "run gone"}
  end
  if run_status ~= "running" then
    return {"fenced", "run " .. run_status}
  end
  return {"fenced", "fence lost"}
end

-- The target: the last step of that name at or before this one.
local f = {}
for i = 0, idx do
  f[#f + 1] = sp(i) .. "name"
end
local names = redis.call("HMGET", RUN, unpack(f))
local target = nil
for i = idx, 0, -1 do
  if names[i + 1] == target_name then
    target = i
    break
  end
end
redis.call("ZREM", IDX("fences"), RUN_ID)
-- The body ran without an error: for the step's circuit breaker, the
-- dependency answered (a probe that jumps closes the breaker).
local st_breaker = redis.call("HGET", RUN, "s" .. index .. ".breaker")
if st_breaker and st_breaker ~= "" then
  breaker("success", st_breaker, RUN_ID .. ":" .. index .. ":" .. token)
end
if not target then
  local reason = string.format("step %q: goto %q: no such step at or before it", st_name, target_name)
  journal("attempt_failed", "step", st_name, "attempt", st_attempt, "class", "permanent", "code", "invalid_goto",
    "error", reason, "duration_ms", int(NOW - num(st_attempt_started_at)))
  local after, f_code, f_reason = fail_run(idx, "invalid_goto", reason, "step asked to go to an unknown or later step", retention, DONE)
  return {"failed", f_code, f_reason, after}
end

journal("step_goto", "step", st_name, "attempt", st_attempt, "from", st_name, "to", target_name,
  "duration_ms", int(NOW - num(st_attempt_started_at)))
-- The superseded checkpoints, kept in the journal; this step's fence keeps
-- the done:<token> mark.
for i = target, idx do
  local p = sp(i)
  if i < idx then
    local s = redis.call("HMGET", RUN, p .. "attempt", p .. "output", p .. "status")
    journal("step_superseded", "step", names[i + 1], "attempt", s[1] or "0", "status", s[3] or "", "output",
      s[2] or "", "by", st_name)
  end
  redis.call("HSET", RUN, p .. "status", "pending", p .. "output", "", p .. "finished_at", "0")
end
step_set(idx, "fence", DONE, "fence_expires_at", "0")
redis.call("HINCRBY", RUN, "gotos", "1")
local id, attempt, name, timeout_ms = activate(target)
if target == idx then
  -- (activation reset the fence of a step activated before.)
  step_set(idx, "fence", DONE)
end
touch()
local enqueued = "0"
if next_id ~= "" and next_id == id then
  put_task(next_task, pending, nil, id, next_msg, NOWS)
  enqueued = "1"
end
return {"goto", int(target), name, int(attempt), int(timeout_ms), enqueued}
