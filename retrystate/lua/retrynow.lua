-- retrynow.lua: make the scheduled retry of a run's current step due now,
-- for an operator (Store.RetryNow: "retry now"), or for asynq's
-- Inspector.RunTask (asynqmon's "Run"), found when begin answered "early"
-- to the task it ran. No second attempt is made: the step's one task is
-- moved, not copied, and begin's fence still admits one attempt at a time.
-- KEYS
--   RUN        the run record
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   step_name  the step whose retry is due now (an operator's call; "" with task)
--   task       "" for an operator's call. Else the ID of a task delivered
--              before its due time (begin answered "early"): the retry is
--              made due only when that task is the step's scheduled retry
--              and asynq's RunTask moved it (Cairn's timers index still
--              holds it a second or more ahead: lib task_timer), else noop
--   actor      who acts, as journaled
-- An operator's call moves the retry's task from asynq's scheduled (or
-- retry) set to its pending list (task_run), or leaves it where it is when
-- it is pending already, or missing (the reconciler writes it, due now);
-- it refuses when a delivery holds it (active: it was delivered early and
-- waits). Both write the step's next_attempt_at and its run's place in the
-- scheduled index as now, and journal retry_now (step, attempt, actor, the
-- due time it had, via: "operator" or "asynq_run_task").
-- Returns {"due", index, name, attempt, due_at (the due time it had, ms),
-- task state before (asynq's; "" for none)}, {"noop", why} (task given: not
-- asynq's RunTask), {"refused", reason} (a paused run's too: pause.lua), or
-- {"gone"}.

local RUN = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, step_name, task, actor = unpack(ARGV)
-- needs: IDX, NOW, int, is_terminal, journal, num, step_get, step_set, task_run, task_state, task_timer, touch

local rs = redis.call("HMGET", RUN, "status", "current", "waiting", "warning", "paused")
local run_status, run_current, run_waiting, run_warning, run_paused = rs[1], rs[2], rs[3], rs[4], rs[5]
if not run_status then
  return {"gone"}
end
local delivery = task ~= ""
local function no(reason)
  if delivery then
    return {"noop", reason}
  end
  return {"refused", reason}
end
if is_terminal(run_status) then
  return no(string.format("run is %s; only a step waiting out a retry's backoff can be retried now", run_status))
end
if run_paused and run_paused ~= "" then
  -- A paused run begins nothing (pause.lua): its retry, made due now, would
  -- only be parked. An early delivery is begin's to park.
  return no("run is paused; resume it first (its retry then runs at its due time, or retry now after the resume)")
end
local cur = num(run_current)
local st = step_get(cur, "name", "status", "retry_state", "next_attempt_at", "task", "attempt", "resuming")
local st_name, st_status, st_retry_state, st_due, st_task, st_attempt = st[1], st[2], st[3], num(st[4]), st[5], st[6]
-- A snooze (resuming "snoozed") and a circuit breaker's deferral (the run's
-- warning "breaker_open") keep retry_state as a retry's: they are not one.
local other = st[7] == "snoozed" and "snoozed: its body asked to run again then" or
  (run_warning == "breaker_open" and "deferred by its open circuit breaker")
if delivery then
  if st_task ~= task then
    return no("not the current step's task")
  end
elseif st_name ~= step_name then
  return no(string.format("step %q is not waiting out a retry's backoff; the run is at step %q", step_name,
    st_name or ""))
end
if st_status ~= "pending" or st_retry_state ~= "scheduled" or other or (run_waiting and run_waiting ~= "") then
  local what = st_status or "gone"
  if st_status == "pending" then
    what = other or "pending without a scheduled retry"
  end
  return no(string.format("step %q is %s, not waiting out a retry's backoff", st_name or "", what))
end
if st_due <= NOW then
  return no(string.format("the retry of step %q is due already", st_name))
end

-- QUEUE is the queue's name, from the prefix cairn:{<queue>}:.
local QUEUE = string.sub(PREFIX, 8, -3)
local state, via
if delivery then
  -- A promoter takes a task's entry out when it moves it, a forwarder
  -- moves a task at its whole second (never early): an entry still there
  -- a second or more ahead is RunTask's doing.
  local timer = task_timer(QUEUE, task)
  if not timer or timer < NOW + 1000 then
    return no("delivered early, not by asynq's RunTask")
  end
  state = task_state(QUEUE, task)
  if state ~= "active" then
    return no("the task is " .. (state or "gone"))
  end
  task_timer(QUEUE, task, true)
  via = "asynq_run_task"
else
  state = task_state(QUEUE, st_task)
  if state == "active" then
    return no(string.format("a delivery of step %q's task holds it (it came early and waits); try again in a few seconds",
      st_name))
  end
  task_run(QUEUE, st_task, NOWS)
  via = "operator"
end
step_set(cur, "next_attempt_at", NOWS)
redis.call("ZADD", IDX("scheduled"), NOWS, RUN_ID)
touch()
journal("retry_now", "step", st_name, "attempt", st_attempt, "actor", actor, "due_at", int(st_due), "via", via)
return {"due", int(cur), st_name, st_attempt, int(st_due), state or ""}
