-- fail.lua: record a failed attempt; schedule the next one or fail the run.
-- KEYS
--   RUN         the run record
--   retry_task  asynq:{q}:t:<the retry's task ID> (or any key of the slot when retry_id is "")
--   pending     asynq:{q}:pending
--   scheduled   asynq:{q}:scheduled
--   ack_active, ack_lease, ack_task, ack_day, ack_total, ack_completed, ack_unique
--               with ack_id: the keys of task_done (tasks/lua/task_done.lua) for the asynq
--               task whose delivery ran the attempt (Cairn's own dequeue); ack_unique
--               only when its message holds a uniqueness lock
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   token       the fence token of the attempt
--   index       the step index
--   message     the error's message
--   class       the error's class: "transient" or "permanent"
--   delay_ms    the delay before the next attempt, ms (used when one is scheduled)
--   retention   the retention of a run that ends here, ms
--   code        the error's code, "" for none
--   retry_id    the task ID the caller expects for the retry, or ""
--   retry_msg   that task's asynq message (tasks.AsynqMessage)
--   ack_id, ack_stats_expiry, ack_keep_until, ack_msg
--               absent, or task_done's arguments: the script acknowledges that task with
--               its write, unless it replies "retry" with enqueued 0 (the caller then
--               writes the retry's task), and the reply ends with "acked" (also when
--               the task was no longer active), as complete.lua's does
-- When the retry's task is the one expected, the script writes it (pending
-- or scheduled for its due time) in the same atomic write as the retry, as
-- complete.lua does for the next step: no crash or lost reply between the
-- two can leave a scheduled retry without its task.
-- A transient failure with budget left schedules the next attempt, unless it
-- would come at or after the run's deadline: then the run fails with
-- run_timeout at once rather than wait for a time it may not use.
-- Returns {"retry", next_attempt_at, attempt, timeout_ms, enqueued (0|1)} when
-- a retry was scheduled, {"done", run status, failure code} when this
-- attempt's failure was recorded before (its reply was lost; the step's
-- fence is left as "done:<token>"), {"failed", code, reason, after} when the run failed, or {"fenced", why}
-- when this attempt no longer owns the step: nothing written.

local RUN, retry_task, pending, scheduled, ack_active, ack_lease, ack_task, ack_day, ack_total, ack_completed,
  ack_unique = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, token, index, message, class, delay_ms, retention, code, retry_id, retry_msg, ack_id,
  ack_stats_expiry, ack_keep_until, ack_msg = unpack(ARGV)
-- needs: IDX, NOW, acker, breaker, fail_run, int, journal, notify, num, put_task, step_get, step_incr, step_set, task_id, timeout_limit, touch

-- acked(out): out, the delivery's task acknowledged when the caller asked.
local acked = acker(ack_active, ack_lease, ack_task, ack_day, ack_total, ack_completed, ack_unique, ack_id,
  ack_stats_expiry, ack_keep_until, ack_msg)

local idx = tonumber(index)
local delay = num(delay_ms)
-- DONE marks the step's fence once this attempt's failure is recorded.
local DONE = "done:" .. token
local rs = redis.call("HMGET", RUN, "status", "deadline", "workflow", "failure_code")
local run_status, run_deadline, run_workflow, run_failure_code = rs[1], rs[2], rs[3], rs[4]
local st = step_get(idx, "status", "fence", "name", "attempt", "budget_base", "max_attempts",
  "timeout_ms", "attempt_started_at")
local st_status, st_fence, st_name, st_attempt = st[1], st[2], st[3], st[4]
local st_budget_base, st_max_attempts, st_timeout_ms, st_attempt_started_at = st[5], st[6], st[7], st[8]
if (run_status ~= "running" and run_status ~= "compensating") or st_status ~= "running" or st_fence ~= token then
  if st_fence == DONE then
    -- This attempt's own fail, applied before: its reply was lost.
    return acked({"done", run_status, run_failure_code or ""})
  end
  if not run_status then
    return acked({"fenced", "run gone"})
  end
  if run_status ~= "running" and run_status ~= "compensating" then
    return acked({"fenced", "run " .. run_status})
  end
  return acked({"fenced", "fence lost"})
end
local attempt = num(st_attempt)
local base = num(st_budget_base)
local used = attempt - base
local max_attempts = num(st_max_attempts)
local deadline = num(run_deadline)
local due = NOW + delay

redis.call("ZREM", IDX("fences"), RUN_ID)
local st_breaker = redis.call("HGET", RUN, "s" .. index .. ".breaker")
if st_breaker and st_breaker ~= "" then
  -- Only transient failures count against the step's circuit breaker.
  local op = "failure"
  if class == "permanent" then
    op = "permanent"
  end
  breaker(op, st_breaker, RUN_ID .. ":" .. index .. ":" .. token)
end
step_set(idx, "last_error", message, "last_error_class", class, "last_error_code", code,
  "last_error_at", NOWS, "fence", DONE, "fence_expires_at", "0")
journal("attempt_failed", "step", st_name, "attempt", int(attempt), "class", class, "code", code, "error", message,
  "duration_ms", int(NOW - num(st_attempt_started_at)))

-- Reasons name the step's attempt as the journal, its task ID and the
-- step's code (StepContext.Attempt) do. Once the step was started again (a
-- recover, retry, restore or goto gave it a fresh budget), they also say
-- which attempt of the new budget it was, which is what max_attempts
-- counts.
local again = ""
if base > 0 then
  local nth = ({"first", "second", "third"})[used]
  if not nth then
    local suffix = ({"st", "nd", "rd"})[used % 10]
    if not suffix or (used % 100 >= 11 and used % 100 <= 13) then
      suffix = "th"
    end
    nth = string.format("%d%s", used, suffix)
  end
  again = string.format(" (the %s since it was started again)", nth)
end

if class == "permanent" then
  local reason = string.format("step %q failed with a permanent error on attempt %d%s: %s", st_name, attempt, again, message)
  local after, f_code, f_reason = fail_run(idx, "permanent_error", reason, "step failed with a permanent error", retention, DONE)
  return acked({"failed", f_code, f_reason, after})
end
if used >= max_attempts then
  step_set(idx, "retry_state", "exhausted")
  local reason = string.format("step %q failed after %d attempts (max_attempts %d): %s", st_name, used, max_attempts,
    message)
  if base > 0 then
    reason = string.format("step %q failed after %d attempts since it was started again, attempts %d to %d "
      .. "(max_attempts %d): %s", st_name, used, base + 1, attempt, max_attempts, message)
  end
  local after, f_code, f_reason = fail_run(idx, "retries_exhausted", reason, "step failed after multiple attempts", retention, DONE)
  return acked({"failed", f_code, f_reason, after})
end
if deadline > 0 and due >= deadline then
  local reason = string.format("step %q failed on attempt %d%s and its next attempt would start after the run's deadline (%s): %s",
    st_name, attempt, again, timeout_limit(idx), message)
  local after, f_code, f_reason = fail_run(idx, "run_timeout", reason, "run timed out", retention, DONE)
  return acked({"failed", f_code, f_reason, after})
end

local next_attempt = step_incr(idx, "attempt", "1")
local id = task_id(RUN_ID, idx, next_attempt, 0)
step_incr(idx, "retry_attempts", "1")
step_set(idx, "status", "pending", "retry_state", "scheduled", "next_attempt_at", int(due),
  "task", id, "gen", "0")
redis.call("ZADD", IDX("scheduled"), int(due), RUN_ID)
redis.call("HSET", RUN, "warning", "retry_pending")
touch()
journal("retry_scheduled", "step", st_name, "attempt", int(next_attempt), "task", id, "due_at", int(due),
  "delay_ms", int(delay))
notify("retry_scheduled", run_workflow, "step", st_name, "attempt", int(next_attempt), "due_at", int(due),
  "delay_ms", int(delay), "error", message)
if retry_id ~= "" and retry_id == id then
  put_task(retry_task, pending, scheduled, id, retry_msg, NOWS, due, NOW)
  return acked({"retry", int(due), int(next_attempt), int(st_timeout_ms), "1"})
end
return {"retry", int(due), int(next_attempt), int(st_timeout_ms), "0"}
