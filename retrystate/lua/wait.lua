-- wait.lua: an await or a sleep step (signals and durable timers), which has
-- no body and holds no worker slot while it waits.
--   start: the step's task was delivered (begin.lua answered "wait"). An
--          await whose signal is in the run's mailbox consumes it and
--          succeeds with its payload; a sleep whose time has come succeeds;
--          otherwise the step becomes "waiting" until its wake-up time (the
--          await's timeout, the sleep's end): it gets a new dispatch (the
--          next gen), scheduled then, and enters the scheduled index (so
--          the reconciler re-creates a lost wake-up) and
--          idx:waiting:<signal|timer>.
--   wake:  the wake-up task was delivered (begin.lua answered "wake"): a
--          sleep succeeds (never before its time); an await timed out, and
--          the run fails with code signal_timeout, needing attention.
-- A step that succeeds here activates the next step, due now, whose task
-- the caller enqueues (the reconciler re-creates it if that is lost).
-- KEYS
--   RUN          the run record
--   wake_task    asynq:{q}:t:<the wake-up's task ID> (or any key of the slot when wake_id is "")
--   pending      asynq:{q}:pending
--   scheduled    asynq:{q}:scheduled
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   action       "start" or "wake"
--   index        the step index
--   task         the task ID of this delivery
--   retention    the retention of a run that ends here, ms
--   until_ms     start of a sleep_until step: the time to sleep until, ms ("" otherwise)
--   until_error  start of a sleep_until step: why that time could not be computed ("" when it
--                could); the step then fails with a permanent error
--   wake_id      the wake-up's task ID as the caller predicts it, or ""
--   wake_msg     that task's asynq message (tasks.AsynqMessage)
-- Returns
--   {"waiting", reason, until, index, name, attempt, gen, timeout_ms, enqueued (0|1)}: the step waits
--     (reason "signal" or "timer") until then; that dispatch is its wake-up
--   {"next", index, name, attempt, timeout_ms, "0"}: the step succeeded; enqueue the next step's task
--   {"succeeded"}: the step succeeded and was the last: the run succeeded
--   {"failed", code, reason, after}: the run failed (signal_timeout, permanent_error)
--   {"early", wait_ms}: a wake-up delivered before its time
--   {"noop", why}: the state moved on (the run ended, another delivery did this): nothing written

local RUN, wake_task, pending, scheduled = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, action, index, task, retention, until_ms, until_error, wake_id, wake_msg =
  unpack(ARGV)
-- needs: IDX, MBOX, NOW, compact_run, expire_run, fail_run, int, is_terminal, journal, notify, num, put_task, set_status, sp, step_get, step_set, task_id, touch, unwait, wait_done

local idx = tonumber(index)
local rs = redis.call("HMGET", RUN, "status", "current", "workflow")
local run_status, run_current, run_workflow = rs[1], rs[2], rs[3]
if not run_status then
  return {"noop", "run gone"}
end
if is_terminal(run_status) then
  return {"noop", "run " .. run_status}
end
local st = step_get(idx, "status", "task", "kind", "signal", "wait_ms", "name", "attempt", "gen", "next_attempt_at",
  "timeout_ms", "started_at")
local st_status, st_task, st_kind, st_signal, st_wait_ms = st[1], st[2], st[3], st[4], st[5]
local st_name, st_attempt, st_gen, st_next_attempt_at, st_timeout_ms, st_started_at = st[6], st[7], st[8], st[9],
  st[10], st[11]
if run_current ~= index or st_task ~= task or not st_kind or st_kind == "" then
  return {"noop", "state moved on"}
end
local reason = "timer"
if st_kind == "await" then
  reason = "signal"
end

-- ends ends the step with output: the next step's dispatch, or the run
-- succeeded.
local function ends(output)
  local nx_idx, nx_name, nx_attempt, nx_timeout = wait_done(idx, output)
  if nx_idx then
    return {"next", nx_idx, nx_name, nx_attempt, nx_timeout, "0"}
  end
  compact_run()
  expire_run(retention)
  return {"succeeded"}
end

if action == "wake" then
  if st_status ~= "waiting" then
    return {"noop", "step " .. (st_status or "gone")}
  end
  local due = num(st_next_attempt_at)
  if due > NOW then
    return {"early", int(due - NOW)}
  end
  unwait(reason)
  if reason == "timer" then
    journal("timer_fired", "step", st_name, "until", int(due), "task", task)
    return ends("null")
  end
  local msg = string.format("no signal %q within %dms", st_signal, num(st_wait_ms))
  if num(st_wait_ms) % 1000 == 0 then
    msg = string.format("no signal %q within %ds", st_signal, num(st_wait_ms) / 1000)
  end
  journal("await_timed_out", "step", st_name, "signal", st_signal, "until", int(due))
  step_set(idx, "last_error", msg, "last_error_class", "permanent", "last_error_code", "signal_timeout",
    "last_error_at", NOWS)
  local why = string.format("step %q: %s (its await timeout)", st_name, msg)
  local after, f_code, f_reason = fail_run(idx, "signal_timeout", why, "step timed out waiting for a signal", retention)
  return {"failed", f_code, f_reason, after}
end

-- start
if st_status ~= "pending" then
  return {"noop", "step " .. (st_status or "gone")}
end
-- A pending step is in no waiting index; an operator's recover of a run
-- left needing attention while this step waited may have left it there.
unwait(reason)
local w = {}
if not st_started_at or st_started_at == "0" then
  w = {sp(idx) .. "started_at", NOWS}
end
if run_status == "pending" then
  w[#w + 1] = "started_at"
  w[#w + 1] = NOWS
  set_status("pending", "running", nil, unpack(w))
elseif #w > 0 then
  redis.call("HSET", RUN, unpack(w))
end

if until_error ~= "" then
  local why = string.format("step %q: cannot tell when to sleep until: %s", st_name, until_error)
  step_set(idx, "last_error", until_error, "last_error_class", "permanent", "last_error_code", "", "last_error_at", NOWS)
  local after, f_code, f_reason = fail_run(idx, "permanent_error", why, "step failed with a permanent error", retention)
  return {"failed", f_code, f_reason, after}
end

local due = NOW + num(st_wait_ms)
if st_kind == "sleep_until" then
  due = num(until_ms)
end
if reason == "signal" then
  -- The oldest signal of this name in the mailbox, if any, is consumed now.
  local pending = redis.call("XRANGE", MBOX, "-", "+")
  for i = 1, #pending do
    local e = pending[i]
    local f = e[2]
    local s_name, s_id, s_payload = nil, "", "null"
    for j = 1, #f, 2 do
      if f[j] == "name" then
        s_name = f[j + 1]
      elseif f[j] == "id" then
        s_id = f[j + 1]
      elseif f[j] == "payload" then
        s_payload = f[j + 1]
      end
    end
    if s_name == st_signal then
      redis.call("XDEL", MBOX, e[1])
      journal("signal_consumed", "step", st_name, "signal", st_signal, "id", s_id)
      return ends(s_payload)
    end
  end
elseif due <= NOW then
  -- Its time has come already: it fires at once.
  journal("timer_set", "step", st_name, "until", int(due), "task", task)
  journal("timer_fired", "step", st_name, "until", int(due), "task", task)
  return ends("null")
end

local gen = num(st_gen) + 1
local id = task_id(RUN_ID, idx, st_attempt, gen)
step_set(idx, "status", "waiting", "next_attempt_at", int(due), "task", id, "gen", int(gen))
redis.call("ZADD", IDX("scheduled"), int(due), RUN_ID)
redis.call("ZADD", IDX("waiting:" .. reason), NOWS, RUN_ID)
touch()
if reason == "signal" then
  journal("await_started", "step", st_name, "signal", st_signal, "until", int(due), "task", id)
  notify("run_waiting", run_workflow, "reason", reason, "step", st_name, "signal", st_signal, "until", int(due))
else
  journal("timer_set", "step", st_name, "until", int(due), "task", id)
  notify("run_waiting", run_workflow, "reason", reason, "step", st_name, "until", int(due))
end
local enqueued = "0"
if wake_id ~= "" and wake_id == id then
  put_task(wake_task, pending, scheduled, id, wake_msg, NOWS, due, NOW)
  enqueued = "1"
end
return {"waiting", reason, int(due), int(idx), st_name, int(st_attempt), int(gen), int(st_timeout_ms), enqueued}
