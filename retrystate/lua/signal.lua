-- signal.lua: deliver a signal (a named message with a JSON payload) to a
-- run.
--   When the run's current step is an await of this signal and waits, the
--   step succeeds with the payload as its output and the next step becomes
--   current, due now (the caller enqueues its task; the reconciler
--   re-creates it if that is lost), in this one script.
--   Otherwise, when the current or a later step awaits this signal, it is
--   kept in the run's mailbox (at most max_pending signals), and the
--   await consumes it when it is reached (wait.lua).
-- A signal with an ID the run received before is a no-op. A signal to an
-- unknown or finished run, that no step of the run awaits any more, or that
-- would overflow the mailbox, is refused: nothing written.
-- KEYS
--   RUN          the run record
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   name         the signal's name
--   payload      its payload (JSON)
--   signal_id    its ID ("" for none)
--   retention    the retention of a run that ends here, ms
--   max_pending  the most pending signals the mailbox holds
-- Returns
--   {"delivered", step, wake-up task, index, name, attempt, timeout_ms, workflow}: the waiting step
--     succeeded; enqueue the next step's dispatch (and the wake-up task may go)
--   {"succeeded", step, wake-up task}: the waiting step succeeded and was the last: the run succeeded
--   {"queued", pending}: kept in the mailbox, which now holds pending signals
--   {"duplicate"}: a signal with this ID was received before; nothing written
--   {"refused", reason}: no step of the run awaits this signal from its current step on
--   {"full", max}: the mailbox holds max pending signals already
--   {"ended", status}: the run has finished
--   {"gone"}: no such run

local RUN = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, name, payload, signal_id, retention, max_pending = unpack(ARGV)
-- needs: COMP_BASE, MBOX, compact_run, expire_run, int, is_terminal, journal, num, sp, step_get, unwait, wait_done

local rs = redis.call("HMGET", RUN, "status", "current", "steps", "workflow")
local run_status, run_current, run_steps, run_workflow = rs[1], rs[2], rs[3], rs[4]
if not run_status then
  return {"gone"}
end
if is_terminal(run_status) then
  return {"ended", run_status}
end
local seen = "sig:" .. signal_id
if signal_id ~= "" and redis.call("HEXISTS", RUN, seen) == 1 then
  return {"duplicate"}
end
local cur = num(run_current)
local st = step_get(cur, "status", "kind", "signal", "name", "task")
local st_status, st_kind, st_signal, st_name, st_task = st[1], st[2], st[3], st[4], st[5]
if st_status == "waiting" and st_kind == "await" and st_signal == name then
  if signal_id ~= "" then
    redis.call("HSET", RUN, seen, NOWS)
  end
  unwait("signal")
  journal("signal_received", "step", st_name, "signal", name, "id", signal_id)
  local nx_idx, nx_name, nx_attempt, nx_timeout = wait_done(cur, payload)
  if not nx_idx then
    compact_run()
    expire_run(retention)
    return {"succeeded", st_name, st_task}
  end
  return {"delivered", st_name, st_task, nx_idx, nx_name, nx_attempt, nx_timeout, run_workflow}
end

-- Kept for a later await: only if the current or a later step awaits it.
-- (A compensating run goes on only after an optional group's rollback, at
-- the step after the group: lib/fail_run.lua's sagas.)
local from = cur
if cur >= COMP_BASE then
  local c = redis.call("HMGET", RUN, "comp_end", "comp_hi")
  if c[1] ~= "continue" then
    return {"refused", string.format("the run is %s: no step of it awaits signal %q any more", run_status, name)}
  end
  from = num(c[2]) + 1
end
local f = {}
for i = from, num(run_steps) - 1 do
  f[#f + 1] = sp(i) .. "signal"
end
local awaited = false
if #f > 0 then
  local sigs = redis.call("HMGET", RUN, unpack(f))
  for i = 1, #sigs do
    if sigs[i] == name then
      awaited = true
      break
    end
  end
end
if not awaited then
  return {"refused", string.format("no step of the run awaits signal %q from step %q on", name, st_name or "")}
end
local pending = redis.call("XLEN", MBOX)
if pending >= num(max_pending) then
  return {"full", int(max_pending)}
end
redis.call("XADD", MBOX, "*", "name", name, "id", signal_id, "payload", payload, "at", NOWS)
-- A restored run's mailbox may still carry the expiry of its earlier end.
redis.call("PERSIST", MBOX)
if signal_id ~= "" then
  redis.call("HSET", RUN, seen, NOWS)
end
journal("signal_received", "signal", name, "id", signal_id, "queued", "1")
return {"queued", int(pending + 1)}
