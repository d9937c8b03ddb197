-- snooze.lua: the step body asked to run again later (workflow.Snooze): the
-- same attempt runs again after a delay, spending neither its retry budget
-- nor an attempt number (so its idempotency key stays); begin counts each
-- visit against max_iterations, as it counts every begin.
-- KEYS
--   RUN        the run record
--   next_task  asynq:{q}:t:<the next visit's task ID> (or any key of the slot when next_id is "")
--   pending    asynq:{q}:pending
--   scheduled  asynq:{q}:scheduled
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   token      the fence token of the attempt
--   index      the step index
--   delay_ms   the delay before the next visit, ms (0: due now)
--   next_id    the task ID the caller expects for the next visit, or ""
--   next_msg   that task's asynq message (tasks.AsynqMessage)
--   retention  the retention of a run that ends here, ms
-- The step goes back to pending under a new dispatch (the next gen: the old
-- task's ID stays taken while it exists) with next_attempt_at = now + delay,
-- retry_state "scheduled" and the run in idx:scheduled, so begin answers
-- "early" before its time and the reconciler re-creates a lost task for its
-- due time, as for a retry; resuming "snoozed" tells begin the next visit
-- is not a new attempt. When the task is the one expected it is written
-- here, scheduled for its due time.
-- A visit that would come at or after the run's deadline fails the run with
-- run_timeout at once.
-- Returns {"snoozed", index, name, attempt, gen, due_ms, timeout_ms, enqueued (0|1)},
-- {"done", run status} when this attempt's snooze was applied before (its
-- reply was lost; the step's fence is left as "done:<token>"),
-- {"failed", code, reason, after} when the run failed, or {"fenced", why} when this
-- attempt no longer owns the step: nothing written.

local RUN, next_task, pending, scheduled = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, token, index, delay_ms, next_id, next_msg, retention = unpack(ARGV)
-- needs: IDX, NOW, breaker, fail_run, int, journal, num, put_task, step_get, step_incr, step_set, task_id, timeout_limit, touch

local idx = tonumber(index)
local delay = num(delay_ms)
local DONE = "done:" .. token
local rs = redis.call("HMGET", RUN, "status", "deadline", "workflow")
local run_status, run_deadline, run_workflow = rs[1], rs[2], rs[3]
local st = step_get(idx, "status", "fence", "name", "attempt", "timeout_ms", "attempt_started_at")
local st_status, st_fence, st_name, st_attempt, st_timeout_ms, st_attempt_started_at =
  st[1], st[2], st[3], st[4], st[5], st[6]
if (run_status ~= "running" and run_status ~= "compensating") or st_status ~= "running" or st_fence ~= token then
  if st_fence == DONE then
    return {"done", run_status}
  end
  if not run_status then
    return {"fenced", "run gone"}
  end
  if run_status ~= "running" and run_status ~= "compensating" then
    return {"fenced", "run " .. run_status}
  end
  return {"fenced", "fence lost"}
end
if delay < 0 then
  delay = 0
end
local due = NOW + delay
local deadline = num(run_deadline)

redis.call("ZREM", IDX("fences"), RUN_ID)
-- The body ran without an error: for the step's circuit breaker, the
-- dependency answered (a probe that snoozes closes the breaker).
local st_breaker = redis.call("HGET", RUN, "s" .. index .. ".breaker")
if st_breaker and st_breaker ~= "" then
  breaker("success", st_breaker, RUN_ID .. ":" .. index .. ":" .. token)
end
if deadline > 0 and due >= deadline then
  local reason = string.format("step %q snoozed for %dms, past the run's deadline (%s)", st_name, delay,
    timeout_limit(idx))
  local after, f_code, f_reason = fail_run(idx, "run_timeout", reason, "run timed out", retention, DONE)
  return {"failed", f_code, f_reason, after}
end
local gen = step_incr(idx, "gen", "1")
local id = task_id(RUN_ID, idx, st_attempt, gen)
local snoozes = step_incr(idx, "snoozes", "1")
step_set(idx, "status", "pending", "fence", DONE, "fence_expires_at", "0", "task", id,
  "resuming", "snoozed", "retry_state", "scheduled", "next_attempt_at", int(due))
redis.call("ZADD", IDX("scheduled"), int(due), RUN_ID)
touch()
journal("step_snoozed", "step", st_name, "attempt", st_attempt, "task", id, "delay_ms", int(delay),
  "due_at", int(due), "snoozes", int(snoozes), "duration_ms", int(NOW - num(st_attempt_started_at)))
local enqueued = "0"
if next_id ~= "" and next_id == id then
  put_task(next_task, pending, scheduled, id, next_msg, NOWS, due, NOW)
  enqueued = "1"
end
return {"snoozed", int(idx), st_name, int(st_attempt), int(gen), int(due), int(st_timeout_ms), enqueued}
