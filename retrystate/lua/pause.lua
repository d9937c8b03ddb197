-- pause.lua: an operator's pause or resume of a run.
--   pause:  mark the run paused (its field paused "1", with paused_at and
--           paused_by; in idx:paused by creation). No new attempt begins:
--           begin.lua, given the current dispatch of a pending step (or the
--           wake-up of a waiting one) of a paused run, parks it (paused
--           "parked": the step keeps its task ID and due time) and the delivery
--           is acknowledged. An attempt in flight finishes and is checkpointed;
--           the task of the step after it is parked by its begin.
--   resume: clear the mark. When a dispatch was parked, or the current step
--           waits for a task asynq does not hold, write that task again, due at
--           the step's due time (next_attempt_at; now when passed or none):
--           under a new dispatch (gen + 1, so a new task ID) when asynq still
--           holds the old ID (the parked delivery not yet acknowledged), as
--           asynq keeps an ID taken while its task exists in any state. A task
--           asynq holds pending or scheduled will be delivered: nothing is
--           written then (a signal completed the parked await, and wrote the
--           next step's task after the parking).
-- Pausing a paused run, and resuming one that is not paused, changes nothing.
-- KEYS
--   RUN        the run record
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   action     "pause" or "resume"
--   actor      who acts
-- Returns {"paused"}; {"resumed", task ID written or "", its due time (ms, 0:
-- now)}; {"noop", "already paused" | "not paused"}; {"ended", status} for a
-- terminal run (nothing written); or {"gone"}.

local RUN = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, action, actor = unpack(ARGV)
-- needs: IDX, NOW, int, is_terminal, journal, notify, num, put_now, step_get, step_incr, step_set, task_id, task_state,
--   touch

local rs = redis.call("HMGET", RUN, "status", "current", "workflow", "paused", "created_at")
local run_status, run_current, run_workflow, run_paused, run_created_at = rs[1], rs[2], rs[3], rs[4], rs[5]
if not run_status then
  return {"gone"}
end
if is_terminal(run_status) then
  return {"ended", run_status}
end
local paused = run_paused and run_paused ~= ""

if action == "pause" then
  if paused then
    return {"noop", "already paused"}
  end
  redis.call("HSET", RUN, "paused", "1", "paused_at", NOWS, "paused_by", actor)
  redis.call("ZADD", IDX("paused"), run_created_at or NOWS, RUN_ID)
  touch()
  journal("paused", "actor", actor)
  notify("run_paused", run_workflow, "actor", actor)
  return {"paused"}
end

if not paused then
  return {"noop", "not paused"}
end
redis.call("HDEL", RUN, "paused", "paused_at", "paused_by")
redis.call("ZREM", IDX("paused"), RUN_ID)
touch()
local idx = num(run_current)
local st = step_get(idx, "status", "task", "name", "attempt", "gen", "next_attempt_at", "timeout_ms")
local st_status, st_task, st_name, st_attempt, st_gen, st_due, st_timeout_ms = st[1], st[2], st[3], st[4], st[5],
  st[6], st[7]
-- QUEUE is the queue's name, from the prefix cairn:{<queue>}:.
local QUEUE = string.sub(PREFIX, 8, -3)
local id, due = "", 0
-- (A step with no task waits in a gate's line: its admission writes it.)
if (st_status == "pending" or st_status == "waiting") and st_task and st_task ~= "" then
  local state = task_state(QUEUE, st_task)
  if state ~= "pending" and state ~= "scheduled" and (run_paused == "parked" or not state) then
    id = st_task
    local gen = st_gen or "0"
    if state then
      gen = int(step_incr(idx, "gen", "1"))
      id = task_id(RUN_ID, idx, st_attempt, gen)
      step_set(idx, "task", id)
    end
    due = num(st_due)
    if due <= NOW then
      due = 0
    end
    put_now(QUEUE, NOWS, RUN_ID, run_workflow, idx, st_name, st_attempt, gen, id, st_timeout_ms, st_due)
  end
end
if id ~= "" and due > 0 then
  journal("resumed", "actor", actor, "step", st_name, "attempt", st_attempt, "task", id, "due_at", int(due))
elseif id ~= "" then
  journal("resumed", "actor", actor, "step", st_name, "attempt", st_attempt, "task", id)
else
  journal("resumed", "actor", actor)
end
notify("run_resumed", run_workflow, "actor", actor)
return {"resumed", id, int(due)}
