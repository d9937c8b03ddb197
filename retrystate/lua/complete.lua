-- complete.lua: checkpoint a step's output and advance the run.
-- KEYS
--   RUN           the run record
--   next_task     asynq:{q}:t:<the next step's task ID> (or any key of the slot when
--                 next_id is "")
--   pending       asynq:{q}:pending
--   ack_active, ack_lease, ack_task, ack_day, ack_total, ack_completed, ack_unique
--                 with ack_id: the keys of task_done (tasks/lua/task_done.lua) for the
--                 asynq task whose delivery ran the attempt (Cairn's own dequeue);
--                 ack_unique only when its message holds a uniqueness lock
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   token         the fence token of the attempt
--   index         the step index
--   output        the step's output (JSON)
--   retention     the retention of a run that ends here, ms
--   next_id       the task ID the caller expects for the next step's first dispatch, or ""
--   next_msg      that task's asynq message (tasks.AsynqMessage)
--   inline_token  inline continuation (Definition.Inline): the fence token with which
--                 this delivery begins the next step itself, or "" (see below)
--   inline_ttl    the fence TTL of that begin, ms
--   inline_worker
--                 absent, "", or the identity of the worker that begins the next step
--                 inline (begin.lua's worker)
--   ack_id, ack_stats_expiry, ack_keep_until, ack_msg
--                 absent, or task_done's arguments: the script acknowledges that task
--                 with its write when the outcome leaves the delivery nothing more to
--                 do ("next" with its task written, "succeeded", "fenced", and "done"
--                 without inline_token), and the reply ends with "acked" (also when the
--                 task was no longer active: nothing is left to acknowledge)
-- When the next step's task is the one expected, the script creates it as
-- asynq's enqueue would (tasks/lua/put_task.lua), in the same atomic write
-- as the checkpoint.
-- With inline_token, the next step is begun here instead, under that token, as
-- begin.lua would begin its first attempt (fence, iteration, journal), and
-- no task is written for it: unless the run is paused (pause.lua), the next
-- step is an await or a sleep, is behind a circuit breaker, or a begin would
-- refuse it (the run's deadline passed, its iteration ceiling reached), in
-- which case the task is written as without inline_token and begin.lua
-- decides (and parks it, on a paused run).
-- Returns {"next", index, name, attempt, timeout_ms, enqueued (0|1)} when a
-- next step is due now, {"inline", index, name, attempt, timeout_ms, policy,
-- deadline, the step after it's name ("" for none), its attempt counter and
-- its timeout_ms} when it was begun here, {"succeeded"} when this was the last step,
-- {"done", run status} when this attempt's complete was applied before (its
-- reply was lost; the step's fence is left as "done:<token>"), or {"fenced",
-- why} when this attempt no longer owns the step: nothing written.

local RUN, next_task, pending, ack_active, ack_lease, ack_task, ack_day, ack_total, ack_completed, ack_unique =
  unpack(KEYS)
local RUN_ID, PREFIX, NOWS, token, index, output, retention, next_id, next_msg, inline_token, inline_ttl,
  inline_worker, ack_id, ack_stats_expiry, ack_keep_until, ack_msg = unpack(ARGV)
-- needs: IDX, NOW, acker, activation, breaker, compact_run, expire_run, gates, int, journal, notify, num, put_task, sp, status_move, step_deadline, zero

-- acked(out): out, the delivery's task acknowledged when the caller asked.
local acked = acker(ack_active, ack_lease, ack_task, ack_day, ack_total, ack_completed, ack_unique, ack_id,
  ack_stats_expiry, ack_keep_until, ack_msg)

local idx = tonumber(index)
local p, q = "s" .. index .. ".", sp(idx + 1)
local v = redis.call("HMGET", RUN, "status", "steps", "workflow", "created_at", "idempotency_key",
  p .. "status", p .. "fence", p .. "name", p .. "attempt", p .. "attempt_started_at",
  q .. "attempt", q .. "name", q .. "timeout_ms", q .. "run_timeout_ms", "deadline_base", "run_timeout_ms",
  "deadline", "gated", p .. "breaker", "paused")
-- The slots by name: run_<field> of the run (run_timeout_ms is its own),
-- st_<field> of this step, nx_<field> of the next step.
local run_status, run_steps, run_workflow, run_created_at, run_idempotency_key = v[1], v[2], v[3], v[4], v[5]
local st_status, st_fence, st_name, st_attempt, st_attempt_started_at = v[6], v[7], v[8], v[9], v[10]
local nx_attempt, nx_name, nx_timeout_ms, nx_run_timeout_ms = v[11], v[12], v[13], v[14]
local run_deadline_base, run_timeout_ms, run_deadline, run_gated, st_breaker = v[15], v[16], v[17], v[18], v[19]
-- run_paused: the run is paused (pause.lua): its next step is not begun inline;
-- its task is written, and begin.lua parks it.
local run_paused = v[20]
if run_status ~= "running" or st_status ~= "running" or st_fence ~= token then
  if st_fence == "done:" .. token then
    -- This attempt's own complete, applied before: its reply was lost.
    -- (With inline_token, the delivery goes on with the next step.)
    if inline_token and inline_token ~= "" then
      return {"done", run_status}
    end
    return acked({"done", run_status})
  end
  if not run_status then
    return acked({"fenced", "run gone"})
  end
  if run_status ~= "running" then
    return acked({"fenced", "run " .. run_status})
  end
  return acked({"fenced", "fence lost"})
end

redis.call("ZREM", IDX("fences"), RUN_ID)
if st_breaker and st_breaker ~= "" then
  breaker("success", st_breaker, RUN_ID .. ":" .. index .. ":" .. token)
end
journal("attempt_succeeded", "step", st_name, "attempt", st_attempt,
  "duration_ms", int(NOW - num(st_attempt_started_at)))
-- (Begin left retry_state "none" and next_attempt_at "0", and only this
-- attempt, holding the fence, could have changed them since.)
local done = {p .. "status", "succeeded", p .. "output", output, p .. "finished_at", NOWS,
  p .. "fence", "done:" .. token, p .. "fence_expires_at", "0"}

local nxt = idx + 1
if nxt < num(run_steps) then
  local w, id, attempt = activation(nxt, nx_attempt)
  local deadline = step_deadline(w, run_deadline_base or run_created_at, nx_run_timeout_ms, run_timeout_ms, run_deadline)
  for i = 1, #done do
    w[#w + 1] = done[i]
  end
  if inline_token and inline_token ~= "" and not (run_paused and run_paused ~= "") then
    -- Inline continuation: begin the next step here (begin.lua's checks of
    -- a fresh attempt; anything else falls through to its task).
    local r = sp(nxt + 1)
    local x = redis.call("HMGET", RUN, q .. "kind", q .. "breaker", q .. "policy", q .. "max_iterations",
      q .. "attempts_started", q .. "started_at", "iterations", "max_iterations", r .. "name", r .. "attempt",
      r .. "timeout_ms")
    local max_iter = num(x[4])
    if max_iter == 0 then
      max_iter = num(x[8])
    end
    local iterations = num(x[7])
    if not x[1] and (not x[2] or x[2] == "") and (deadline == 0 or NOW < deadline) and
      (max_iter == 0 or iterations < max_iter) then
      local fence_expires = int(NOW + num(inline_ttl))
      local b = {q .. "status", "running", q .. "fence", inline_token, q .. "fence_expires_at", fence_expires,
        q .. "attempt_started_at", NOWS, q .. "attempts_started", int(num(x[5]) + 1), "iterations", int(iterations + 1)}
      for i = 1, #b do
        w[#w + 1] = b[i]
      end
      if zero(x[6]) then
        w[#w + 1] = q .. "started_at"
        w[#w + 1] = NOWS
      end
      redis.call("HSET", RUN, unpack(w))
      redis.call("ZADD", IDX("active"), NOWS, RUN_ID)
      redis.call("ZADD", IDX("fences"), fence_expires, RUN_ID)
      if inline_worker and inline_worker ~= "" then
        journal("attempt_started", "step", nx_name, "attempt", int(attempt), "task", id, "resumed", "0", "inline", "1",
          "worker", inline_worker)
      else
        journal("attempt_started", "step", nx_name, "attempt", int(attempt), "task", id, "resumed", "0", "inline", "1")
      end
      return {"inline", int(nxt), nx_name, int(attempt), int(nx_timeout_ms), x[3] or "{}", int(deadline), x[9] or "",
        x[10] or "0", x[11] or "0"}
    end
  end
  redis.call("HSET", RUN, unpack(w))
  redis.call("ZADD", IDX("active"), NOWS, RUN_ID)
  -- An activation gets a new attempt number, so its task ID is new to asynq.
  if next_id ~= "" and next_id == id then
    put_task(next_task, pending, nil, id, next_msg, NOWS)
    return acked({"next", int(nxt), nx_name, int(attempt), int(nx_timeout_ms), "1"})
  end
  return {"next", int(nxt), nx_name, int(attempt), int(nx_timeout_ms), "0"}
end
-- The run can only still be in the active index, and in the deadline
-- index when it has a deadline: the fence went above, and a running step
-- has no scheduled retry (begin took it out of that index).
local leave = {"active"}
if not zero(run_deadline) then
  leave[2] = "deadlines"
end
status_move(leave, "running", "succeeded", run_created_at, unpack(done))
journal("run_succeeded")
notify("run_succeeded", run_workflow)
if run_gated == "1" then
  -- The run frees its ordering key's and its workflow's slots: the next
  -- runs in their lines start, their tasks written here.
  gates().release(RUN_ID, false)
end
local idem = false -- no idempotency key: expire_run has nothing more to read
if run_idempotency_key and run_idempotency_key ~= "" then
  idem = nil
end
compact_run()
expire_run(retention, idem)
return acked({"succeeded"})
