-- needs: IDX, journal, NOW, num, set_status
-- reopen makes a failed, cancelled or succeeded run (status) live again for
-- an operator (recover, retry, skip, restore): pending if it never started,
-- else running (or to, when given: a compensation's recover makes the run
-- compensating); no failure, attention or expiry; a fresh iteration count
-- and auto-recovery count; not paused; and, when its deadline has passed, a deadline
-- that starts afresh from now (activate sets the deadline of the step the
-- run resumes at). Returns the new status.
local function reopen(status, to)
  local r = redis.call("HMGET", RUN, "started_at", "deadline", "idempotency_key", "idem_key")
  local run_started_at, run_deadline, run_idempotency_key, run_idem_key = r[1], r[2], r[3], r[4]
  if not to then
    to = "running"
    if num(run_started_at) == 0 then
      to = "pending"
    end
  end
  set_status(status, to, nil, "needs_attention", "0", "failure_code", "", "failure_reason", "", "attention_reason", "",
    "finished_at", "0", "auto_recoveries", "0", "iterations", "0", "warning", "")
  redis.call("ZREM", IDX("attention"), RUN_ID)
  -- An operator's reopen of a run that was paused when it ended resumes it (pause.lua).
  redis.call("HDEL", RUN, "paused", "paused_at", "paused_by")
  redis.call("ZREM", IDX("paused"), RUN_ID)
  redis.call("PERSIST", RUN)
  redis.call("PERSIST", JOURNAL)
  if run_idem_key and run_idem_key ~= "" then
    redis.call("PERSIST", PREFIX .. run_idem_key)
  elseif run_idempotency_key and run_idempotency_key ~= "" then
    redis.call("PERSIST", PREFIX .. "idem:" .. run_idempotency_key) -- a run from before keys were scoped by owner
  end
  local deadline = num(run_deadline)
  if deadline > 0 and deadline <= NOW then
    redis.call("HSET", RUN, "deadline_base", NOWS)
  end
  return to
end
