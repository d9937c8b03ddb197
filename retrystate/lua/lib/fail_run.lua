-- needs: COMP_BASE, IDX, activation, compact_run, expire_run, gates, int, journal, notify, num, put_now, set_status, sp, status_move, step_deadline, step_get, step_set
-- fail_run ends the run as failed, needing attention, because of step idx;
-- or, for a run with compensations or step groups (sagas = "1"), or when
-- idx is a compensation's, starts what the failure calls for. fence is what
-- the step's fence becomes (nil: none; fail.lua leaves its done:<token>
-- mark). Returns what follows the failure, for the caller's reply: "" (the
-- run failed), "compensating" (its last compensation's task is written),
-- "compensated" (nothing to compensate), "continued" (an optional group
-- with nothing to undo was rolled back; the next step's task is written) or
-- "succeeded" (that group ended the run); then the run's failure code and
-- reason, which are code and reason but for a compensation's failure (the
-- run fails with compensation_failed). (The sagas' own calls pass w, the
-- failed step's fields already made, and plain: no saga.)
--
-- The sagas' helpers live inside it, made only on a saga's path: begin.lua
-- includes fail_run on every call, and every local function of a script is
-- a closure made on each call. fail_run("saga") returns them, for
-- compdone.lua and cancel.lua:
--   .next(i, retention_ms): the compensation of step i succeeded: start the
--     next one (the last succeeded step below i, down to comp_lo, with a
--     compensation), or end the saga (comp_end);
--   .start(ending, lo, step, hi, group, code, reason, retention_ms, w): make
--     the run compensating (comp_end ending, comp_lo lo, comp_step step,
--     comp_hi hi, comp_group group, comp_code code, comp_reason reason,
--     written with the fields w) and start its last compensation.
-- Both return the reply: {"next", index, name, attempt, timeout_ms, "1"} (a
-- compensation, or the step after a rolled-back optional group: its task is
-- written here), {"compensated", code}, {"succeeded"} (an optional group was the
-- run's end) or {"failed", code, reason, ""} (a required group was rolled
-- back and the run failed).
local function fail_run(idx, code, reason, message, retention_ms, fence, w, plain)
  local p = sp(tonumber(idx) or 0)
  if not w and idx ~= "saga" then
    w = {p .. "status", "failed", p .. "fence", fence or "", p .. "fence_expires_at", "0", p .. "finished_at", NOWS,
      p .. "next_attempt_at", "0"}
    if redis.call("HGET", RUN, p .. "retry_state") == "scheduled" then
      w[#w + 1] = p .. "retry_state"
      w[#w + 1] = "none"
    end
  end
  if idx == "saga" or (not plain and (idx >= COMP_BASE or redis.call("HGET", RUN, "sagas") == "1")) then
    -- QUEUE is the queue's name, from the prefix cairn:{<queue>}:, read
    -- here: fail_run captures no PREFIX (begin.lua creates it on every call).
    local _, PREFIX = unpack(ARGV, 1, 2)
    local QUEUE = string.sub(PREFIX, 8, -3)
    -- saga_end ends a saga whose compensations are all done (comp_end).
    local function saga_end(ret)
      local r = redis.call("HMGET", RUN, "comp_end", "comp_step", "comp_hi", "comp_group", "comp_code",
        "comp_reason", "status", "workflow", "steps", "comp_lo", "gated")
      local ending, failed, hi, group, c_code, c_reason = r[1], num(r[2]), num(r[3]), r[4] or "", r[5] or "",
        r[6] or ""
      local status, workflow, steps, lo, gated = r[7], r[8], num(r[9]), num(r[10]), r[11] == "1"
      redis.call("HDEL", RUN, "comp_end", "comp_step", "comp_hi", "comp_group", "comp_code", "comp_reason",
        "comp_lo")
      if ending == "compensated" then
        status_move(nil, status, "compensated", nil, "current", int(failed), "needs_attention", "0")
        journal("run_compensated", "code", c_code, "reason", c_reason)
        notify("run_compensated", workflow, "code", c_code, "reason", c_reason)
        if gated then
          gates().release(RUN_ID, false)
        end
        expire_run(ret)
        return {"compensated", c_code}
      end
      if ending == "failed" then
        redis.call("HSET", RUN, "current", int(failed))
        fail_run(failed, c_code, c_reason, "step failed; its group was rolled back", ret, nil, {}, true)
        return {"failed", c_code, c_reason, ""}
      end
      -- continue: the optional group's steps are rolled back, and the run
      -- goes on after it.
      local rw = {"failure_code", "", "failure_reason", "", "warning", ""}
      for i = lo, hi do
        step_set(i, "status", "rolled_back")
      end
      local fname = step_get(failed, "name")[1]
      journal("group_rolled_back", "group", group, "step", fname, "code", c_code, "reason", c_reason)
      notify("group_rolled_back", workflow, "group", group, "step", fname, "code", c_code, "reason", c_reason)
      local nxt = hi + 1
      if nxt >= steps then
        rw[#rw + 1] = "current"
        rw[#rw + 1] = int(hi)
        status_move(nil, status, "succeeded", nil, unpack(rw))
        journal("run_succeeded")
        notify("run_succeeded", workflow)
        if gated then
          gates().release(RUN_ID, false)
        end
        compact_run()
        expire_run(ret)
        return {"succeeded"}
      end
      set_status(status, "running", nil, unpack(rw))
      local s = step_get(nxt, "attempt", "name", "timeout_ms", "run_timeout_ms")
      local d = redis.call("HMGET", RUN, "deadline_base", "run_timeout_ms", "created_at")
      local aw, id, attempt = activation(nxt, s[1])
      step_deadline(aw, d[1] or d[3], s[4], d[2], nil)
      redis.call("HSET", RUN, unpack(aw))
      put_now(QUEUE, NOWS, RUN_ID, workflow, nxt, s[2], attempt, 0, id, s[3])
      return {"next", int(nxt), s[2], int(attempt), int(num(s[3])), "1"}
    end
    -- saga_next starts the compensation of the run's last succeeded step
    -- below step index below (down to comp_lo), its task written here, or,
    -- when none is left, ends the saga.
    local function saga_next(below, ret)
      local r = redis.call("HMGET", RUN, "comp_lo", "workflow")
      for j = below - 1, num(r[1]), -1 do
        local s = step_get(j, "status", "comp", "name")
        if s[1] == "succeeded" and s[2] == "1" then
          local c = COMP_BASE + j
          local cs = step_get(c, "attempt", "name", "timeout_ms")
          local aw, id, attempt = activation(c, cs[1])
          redis.call("HSET", RUN, unpack(aw))
          redis.call("ZADD", IDX("active"), NOWS, RUN_ID)
          journal("compensation_started", "step", s[3], "attempt", int(attempt), "task", id)
          put_now(QUEUE, NOWS, RUN_ID, r[2], c, cs[2], attempt, 0, id, cs[3])
          return {"next", int(c), cs[2], int(attempt), int(num(cs[3])), "1"}
        end
      end
      return saga_end(ret)
    end
    local function saga_start(ending, lo, step, hi, group, c_code, c_reason, ret, sw)
      local r = redis.call("HMGET", RUN, "status", "workflow")
      local f = {"comp_end", ending, "comp_lo", int(lo), "comp_step", int(step), "comp_hi", int(hi),
        "comp_group", group, "comp_code", c_code, "comp_reason", c_reason, "failure_code", c_code,
        "failure_reason", c_reason, "deadline", "0", "warning", ""}
      for i = 1, #f do
        sw[#sw + 1] = f[i]
      end
      set_status(r[1], "compensating", nil, unpack(sw))
      -- No deadline, retry, fence or wait of the step that failed is left.
      local leave = {"deadlines", "scheduled", "fences", "waiting:signal", "waiting:timer"}
      for i = 1, #leave do
        redis.call("ZREM", IDX(leave[i]), RUN_ID)
      end
      local name = step_get(step, "name")[1]
      journal("run_compensating", "step", name, "code", c_code, "reason", c_reason, "group", group)
      notify("run_compensating", r[2], "step", name, "code", c_code, "reason", c_reason, "group", group)
      return saga_next(step, ret)
    end
    if idx == "saga" then
      return {next = saga_next, start = saga_start}
    end
    if idx >= COMP_BASE then
      -- A compensation failed for good: the run fails, needing attention;
      -- an operator's recover or retry runs the compensation again (the
      -- comp_ fields stay for it).
      local r = redis.call("HMGET", RUN, "comp_code", "comp_reason")
      local sname = step_get(idx - COMP_BASE, "name")[1]
      journal("compensation_failed", "step", sname, "code", code, "reason", reason)
      local why = string.format("compensation of step %q failed (%s); the run had failed (%s: %s)", sname, reason,
        r[1] or "", r[2] or "")
      return fail_run(idx, "compensation_failed", why, "a compensation failed", retention_ms, nil, w, true)
    end
    local g = step_get(idx, "group", "group_opt")
    local group, optional = g[1] or "", g[2] == "1"
    local lo, hi = idx, idx
    if group ~= "" then
      while lo > 0 and step_get(lo - 1, "group")[1] == group do
        lo = lo - 1
      end
      local steps = num(redis.call("HGET", RUN, "steps"))
      while hi + 1 < steps and step_get(hi + 1, "group")[1] == group do
        hi = hi + 1
      end
    end
    local ending = nil
    if group ~= "" and optional then
      ending = "continue"
    elseif redis.call("HGET", RUN, "on_failure") == "compensate" then
      ending, lo = "compensated", 0
    elseif group ~= "" then
      ending = "failed"
    end
    if ending then
      local rep = saga_start(ending, lo, idx, hi, group, code, reason, retention_ms, w)
      if rep[1] == "next" then
        if num(rep[2]) >= COMP_BASE then
          return "compensating", code, reason
        end
        return "continued", code, reason
      elseif rep[1] == "failed" then
        return "", code, reason
      end
      return rep[1], code, reason
    end
  end
  local r = redis.call("HMGET", RUN, "status", "workflow")
  local run_status, run_workflow = r[1], r[2]
  local s = step_get(idx, "name", "attempt", "optional")
  local st_name, st_attempt, st_optional = s[1], s[2], s[3]
  local f = {"failure_code", code, "failure_reason", reason, "needs_attention", "1"}
  for i = 1, #f do
    w[#w + 1] = f[i]
  end
  set_status(run_status, "failed", nil, unpack(w))
  redis.call("ZADD", IDX("attention"), NOWS, RUN_ID)
  -- A gated run frees its slots, but keeps its ordering key's when its
  -- workflow says on_failure: block: the key's next runs wait until this
  -- one is recovered to success, skipped through or cancelled, and it is
  -- kept (no retention) until then.
  local block = false
  if redis.call("HGET", RUN, "gated") == "1" then
    local g = redis.call("HMGET", RUN, "ord_block", "hold_k")
    block = g[1] == "1" and g[2] == "1"
    gates().release(RUN_ID, block)
  end
  journal("run_failed", "step", st_name, "attempt", st_attempt, "code", code, "reason", reason, "message", message)
  notify("step_failed", run_workflow, "step", st_name, "attempt", st_attempt, "optional", st_optional or "0",
    "code", code, "reason", reason)
  notify("run_failed", run_workflow, "step", st_name, "attempt", st_attempt, "code", code, "reason", reason,
    "message", message)
  if not block then
    expire_run(retention_ms)
  end
  return "", code, reason
end
