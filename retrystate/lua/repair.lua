-- repair.lua: re-create the task of a run's current step, which the caller
-- found missing in asynq (lost after a state write, or deleted), archived
-- (asynq gave up delivering it, and its ID stays taken), or stalled (asynq
-- moved it to active for a worker that never received it: its lease is not
-- being extended, and the step was never begun), or the wake-up task of a
-- waiting await or sleep; or, with "check", find out first whether the task
-- is in trouble (the reconciler's pass, one call per run, pipelined).
-- KEYS
--   RUN        the run record
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   task       the task ID the caller found missing, archived or stalled ("" with "check")
--   trouble    "missing", "archived", "stalled" or "check"
--   max_auto   the most automatic repairs of a run
--   grace_ms   ("check") the grace, ms: a pending or waiting step written less
--              than this long ago is left to the engine, which may be about to
--              enqueue its task
-- "check" reads the run's current step and, when it is pending or waiting
-- and out of its grace, its task in asynq's record asynq:{q}:t:<task> (in
-- the queue's slot): a missing task is repaired as "missing", an archived
-- one as "archived"; any other state is a task that will be delivered.
-- An archived or stalled task keeps its ID in asynq, so the step gets a new
-- dispatch (the next gen); should asynq deliver the old task later, it is a
-- stale duplicate. None of these is an attempt or a crash: no budget is
-- spent. Each repair is journaled and notified (run_recovered, by
-- reconciler), and writes the dispatch's task (when asynq has none under its
-- ID), for its due time, as asynq's enqueue or schedule would (put_now).
-- Returns {"repair", index, name, attempt, gen, next_attempt_at, timeout_ms, kind, workflow}:
-- the repaired dispatch, whose task exists; {"attention", reason} when the
-- run was repaired too often; {"noop", why} when the state moved on since the
-- caller looked, the run is paused (pause.lua: a parked dispatch has no task
-- on purpose), or ("check") nothing is in trouble. "check" also returns
-- {"recheck", at}: the step was written within the grace, look again at
-- that time (ms); {"crashed"}: the step is running under an expired fence
-- (for redispatch.lua, unless the caller holds such repairs back).

local RUN = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, task, trouble, max_auto, grace_ms = unpack(ARGV)
-- needs: NOW, auto_repair, int, is_terminal, journal, notify, num, put_now, step_get, step_incr, step_set, task_exists, task_id, task_state, touch

local check = trouble == "check"
local rs = redis.call("HMGET", RUN, "status", "current", "needs_attention", "workflow", "updated_at", "paused")
local run_status, run_current, run_needs_attention, run_workflow = rs[1], rs[2], rs[3], rs[4]
local run_paused = rs[6]
if not run_status or is_terminal(run_status) then
  return {"noop", "run " .. (run_status or "gone")}
end
if run_needs_attention == "1" then
  return {"noop", "needs attention"}
end
if run_paused and run_paused ~= "" then
  -- A paused run's parked dispatch has no task on purpose: its resume
  -- (pause.lua) writes it, and any task it lacks.
  return {"noop", "paused"}
end
local idx = num(run_current)
local st = step_get(idx, "status", "task", "name", "attempt", "gen", "next_attempt_at", "timeout_ms",
  "fence_expires_at")
local st_status, st_task, st_name, st_attempt = st[1], st[2], st[3], st[4]
local st_gen, st_next_attempt_at, st_timeout_ms = st[5], st[6], st[7]
-- QUEUE is the queue's name, from the prefix cairn:{<queue>}:.
local QUEUE = string.sub(PREFIX, 8, -3)
if check then
  task = st_task
  if not st_task or st_task == "" then
    return {"noop", "no task"}
  end
  if st_status == "running" then
    if num(st[8]) > NOW then
      return {"noop", "fence alive"}
    end
    return {"crashed"}
  end
  if st_status ~= "pending" and st_status ~= "waiting" then
    return {"noop", "step " .. (st_status or "gone")}
  end
  local grace = num(grace_ms)
  if num(rs[5]) > NOW - grace then
    return {"recheck", int(num(rs[5]) + grace)}
  end
  local state = task_state(QUEUE, st_task)
  if state == "archived" then
    trouble = "archived"
  elseif state then
    return {"noop", "task " .. state}
  else
    trouble = "missing"
  end
end
-- A waiting step (an await or a sleep) is repaired as a pending one: its
-- task is its wake-up, due at next_attempt_at.
if (st_status ~= "pending" and st_status ~= "waiting") or st_task ~= task then
  return {"noop", "state moved on"}
end
local kind = "task_missing"
if st_status == "waiting" then
  kind = "wake_task_missing"
elseif num(st_next_attempt_at) > 0 then
  kind = "retry_task_missing"
end
if trouble == "archived" then
  kind = "task_archived"
elseif trouble == "stalled" then
  kind = "stalled_delivery"
end
local ok, why = auto_repair(max_auto, kind)
if not ok then
  return {"attention", why}
end
-- (The reply passes on the step's numbers as the hash holds them: decimal
-- integers, int() of what a script wrote.)
local gen, id = st_gen or "0", st_task
if trouble ~= "missing" then
  gen = int(step_incr(idx, "gen", "1"))
  id = task_id(RUN_ID, idx, st_attempt, gen)
  step_set(idx, "task", id)
end
touch()
journal("repair", "kind", kind, "step", st_name, "attempt", st_attempt, "task", id)
notify("run_recovered", run_workflow, "by", "reconciler", "kind", kind, "step", st_name, "attempt", st_attempt)
-- ("check" found the missing task missing a moment ago, in this script.)
if (check and trouble == "missing") or not task_exists(QUEUE, id) then
  put_now(QUEUE, NOWS, RUN_ID, run_workflow, idx, st_name, st_attempt, gen, id, st_timeout_ms, st_next_attempt_at)
end
return {"repair", run_current or "0", st_name, st_attempt or "0", gen, st_next_attempt_at or "0",
  st_timeout_ms or "0", kind, run_workflow}
