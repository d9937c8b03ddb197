-- begin.lua: start one attempt of a step, or resume it after its worker crashed.
-- KEYS
--   RUN        the run record
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   task       the task ID of this delivery
--   token      the fence token, unique to this delivery
--   fence_ttl  the fence's TTL, ms
--   index      the step index of the task (a canonical decimal, as the run's field current)
--   retention  the retention of a run that ends here, ms
--   worker     the identity of the worker that begins the attempt (host:pid:random), recorded
--              in the journal's attempt_started; absent or "": none
--   trace      "1" when the caller traces (OpenTelemetry): the "ok" reply carries the
--              trace context stored with the run (create.lua's trace); absent: it is not read
-- Returns one of:
--   {"gone"}                  no such run (never created, or expired): acknowledge
--   {"ended", status}         the run is terminal: acknowledge
--   {"stale", ...}            the task is not the step's current dispatch, or the step is done:
--                             acknowledge. When the run's current step is waiting for its task,
--                             its index, name, attempt, gen, due time and timeout follow, so the
--                             caller can make sure that task exists.
--   {"busy", wait_ms}         another delivery of this dispatch holds a live fence
--   {"early", wait_ms}        the attempt is not due yet
--   {"failed", code, reason, after}  the run failed here: deadline passed, crash budget or iteration
--                             ceiling exhausted; after says what follows (lib/fail_run.lua)
--   {"deferred", until, index, name, attempt, gen, timeout_ms}  the step's circuit breaker is
--                             open (or another attempt probes it): the attempt waits until
--                             then under that new dispatch (the caller enqueues it), spending
--                             no budget
--   {"wait", kind}            the step is an await or a sleep (kind "await", "sleep" or
--                             "sleep_until"): it has no body; the caller starts its wait (wait.lua)
--   {"wake", kind}            the wake-up of a waiting step (its timer or its await's timeout),
--                             due now: the caller runs wait.lua's wake
--                             (with trace, "wait" and "wake" also carry the run's trace)
--   {"paused"}                the run is paused (pause.lua): this dispatch of its pending step,
--                             or wake-up of its waiting step, is parked (the run's paused
--                             "parked"; the step keeps its task ID and due time, and resume
--                             writes its task again): acknowledge
-- A begin with the token of the attempt's live fence is this delivery asking
-- again after its first begin's reply was lost (Redis timed out, froze or
-- restarted): it gets "ok" again, with the fence's expiry renewed and nothing
-- counted twice.
--   {"ok", attempt, crashes, crashed (0|1), input, policy, attempts used in the budget, deadline,
--    the next step's name ("" for none), its attempt counter and its timeout (ms), the run's
--    trace context (only with trace: "" for none), then name and output of each earlier step}
--   {"comp", ...}             the same for a compensation's attempt (sagas, lib/fail_run.lua), but
--                             for the next step's three: the run's failure code and reason,
--                             and ""; the earlier steps end with the one it compensates

local RUN = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, task, token, fence_ttl, index, retention, worker, trace = unpack(ARGV)
-- needs: COMP_BASE, IDX, journal, NOW, breaker, fail_run, int, is_terminal, notify, num, set_status, sp, step_get, step_incr, task_id, timeout_limit, zero

local idx = tonumber(index)
local ttl = num(fence_ttl)

-- One read: the run, this step, the next step and every earlier step's checkpoint.
-- (index is canonical decimal, as the run's "current" field is.)
local p, q = "s" .. index .. ".", sp(idx + 1)
local f = {"status", "current", "deadline", "iterations", "max_iterations", "input",
  p .. "status", p .. "task", p .. "fence", p .. "fence_expires_at", p .. "next_attempt_at",
  p .. "attempt", p .. "name", p .. "policy", p .. "budget_base",
  p .. "resuming", p .. "retry_state", p .. "attempts_started", p .. "started_at",
  q .. "name", q .. "attempt", q .. "timeout_ms", p .. "max_iterations", "warning", p .. "kind",
  p .. "breaker", "paused"}
if trace == "1" then
  f[#f + 1] = "trace"
end
local NF = #f
-- A compensation (sagas, lib/fail_run.lua) reads the checkpoints up to the step
-- it compensates, that step's included.
local last = idx - 1
if idx >= COMP_BASE then
  last = idx - COMP_BASE
end
for i = 0, last do
  local e = sp(i)
  f[#f + 1] = e .. "name"
  f[#f + 1] = e .. "output"
end
local v = redis.call("HMGET", RUN, unpack(f))
-- The slots of f by name: run_<field> of the run, st_<field> of this step,
-- nx_<field> of the next step; the earlier steps' follow from v[NF + 1].
local run_status, run_current, run_deadline, run_iterations, run_max_iterations, run_input =
  v[1], v[2], v[3], v[4], v[5], v[6]
local st_status, st_task, st_fence, st_fence_expires_at, st_next_attempt_at =
  v[7], v[8], v[9], v[10], v[11]
local st_attempt, st_name, st_policy, st_budget_base = v[12], v[13], v[14], v[15]
local st_resuming, st_retry_state, st_attempts_started, st_started_at = v[16], v[17], v[18], v[19]
local nx_name, nx_attempt, nx_timeout_ms, st_max_iterations, run_warning = v[20], v[21], v[22], v[23], v[24]
-- st_kind is false for a step with a body (create.lua writes kind only for awaits and sleeps).
local st_kind, st_breaker = v[25], v[26]
-- run_paused: false or "" (not paused), "1" (paused), "parked" (paused, a dispatch parked).
local run_paused = v[27]
if not run_status then
  return {"gone"}
end
if is_terminal(run_status) then
  journal("delivery_ignored", "task", task, "reason", "run " .. run_status)
  -- A finished run's journal may have moved into its hash (compact_run,
  -- lib/compact_run.lua): the entry starts a stream, which expires with the run.
  local ttl = redis.call("PTTL", RUN)
  if ttl > 0 then
    redis.call("PEXPIRE", JOURNAL, ttl)
  end
  return {"ended", run_status}
end

if run_current ~= index or st_task ~= task or (st_status ~= "pending" and st_status ~= "running") then
  if st_status == "waiting" and st_task == task and run_current == index then
    if run_paused and run_paused ~= "" then
      -- A paused run: the wake-up waits for the resume, which writes it again.
      if run_paused ~= "parked" then
        redis.call("HSET", RUN, "paused", "parked")
      end
      journal("dispatch_parked", "step", st_name, "attempt", st_attempt, "task", task)
      return {"paused"}
    end
    -- The wake-up task of a waiting step: never before its time.
    local due = num(st_next_attempt_at)
    if due > NOW then
      return {"early", int(due - NOW)}
    end
    if trace == "1" then
      return {"wake", st_kind or "", v[NF] or ""}
    end
    return {"wake", st_kind or ""}
  end
  local cur = num(run_current)
  local c = step_get(cur, "status", "name", "attempt", "gen", "next_attempt_at", "timeout_ms")
  local c_status, c_name, c_attempt, c_gen, c_next_attempt_at, c_timeout_ms = c[1], c[2], c[3], c[4], c[5], c[6]
  -- (A run waiting in a gate's line has no task until it is admitted; a
  -- paused run's may be parked, which its resume writes.)
  if (c_status == "pending" or c_status == "waiting") and not (run_paused and run_paused ~= "") and
    zero(redis.call("HGET", RUN, "waiting")) then
    return {"stale", int(cur), c_name, int(c_attempt), int(c_gen), int(c_next_attempt_at), int(c_timeout_ms)}
  end
  return {"stale"}
end
if st_status == "pending" and run_paused and run_paused ~= "" then
  -- A paused run begins nothing: the dispatch is parked, with its due time
  -- (next_attempt_at), for the resume (pause.lua) to write again.
  if run_paused ~= "parked" then
    redis.call("HSET", RUN, "paused", "parked")
  end
  journal("dispatch_parked", "step", st_name, "attempt", st_attempt, "task", task)
  return {"paused"}
end
if st_kind and st_kind ~= "" then
  -- An await or a sleep has no body: the caller starts its wait.
  if trace == "1" then
    return {"wait", st_kind, v[NF] or ""}
  end
  return {"wait", st_kind}
end

local crashes = nil -- read when the attempt resumes after a crash
-- crashed: this begin resumes an attempt whose worker died, either found
-- here (the fence expired) or by the reconciler, which re-dispatched it.
-- resume: this begin resumes an attempt rather than starts one: after a
-- crash, after its worker handed it back (release.lua), or after the body
-- snoozed (snooze.lua).
local crashed, resume = 0, 0
if st_resuming == "1" then
  crashed, resume = 1, 1
elseif st_resuming == "interrupted" or st_resuming == "snoozed" then
  resume = 1
end
-- again: this delivery's own begin was applied before (see the header).
local again = st_status == "running" and st_fence == token
if st_status == "running" and not again then
  local fence_expires = num(st_fence_expires_at)
  if st_fence ~= "" and fence_expires > NOW then
    return {"busy", int(fence_expires - NOW)}
  end
  -- The worker that held the fence stopped renewing it: a crash, which has
  -- its own budget and never consumes a retry.
  crashed, resume = 1, 1
  crashes = step_incr(idx, "crashes", "1")
  if st_breaker and st_breaker ~= "" then
    -- A probe that died frees the breaker's probe slot (this attempt may
    -- take it below).
    breaker("crashed", st_breaker, RUN_ID .. ":" .. index .. ":" .. st_fence)
  end
  local max_crashes = num(redis.call("HGET", RUN, p .. "max_crashes"))
  journal("attempt_crashed", "step", st_name, "attempt", st_attempt, "task", task, "crashes", int(crashes))
  if crashes > max_crashes then
    local reason = string.format("step %q: worker crashed %d times during attempt %d (max_crashes %d)",
      st_name, crashes, num(st_attempt), max_crashes)
    local after, f_code, f_reason = fail_run(idx, "crash_budget_exhausted", reason, "step crashed too often", retention)
    return {"failed", f_code, f_reason, after}
  end
end

local resumed = "0"
if crashed == 1 then
  resumed = "1"
elseif resume == 1 then
  resumed = st_resuming -- "interrupted" or "snoozed"
end
if again then
  local fence_expires = int(NOW + ttl)
  redis.call("HSET", RUN, p .. "fence_expires_at", fence_expires)
  redis.call("ZADD", IDX("fences"), fence_expires, RUN_ID)
else
  -- "0" (the common case) needs no number conversion.
  local due = st_next_attempt_at ~= "0" and num(st_next_attempt_at) or 0
  if due > NOW then
    return {"early", int(due - NOW)}
  end
  local deadline = run_deadline ~= "0" and num(run_deadline) or 0
  if deadline > 0 and NOW >= deadline then
    local reason = string.format("run passed its deadline (%s) before step %q attempt %d", timeout_limit(idx), st_name,
      num(st_attempt))
    local after, f_code, f_reason = fail_run(idx, "run_timeout", reason, "run timed out", retention)
    return {"failed", f_code, f_reason, after}
  end
  -- The most specific iteration ceiling wins: the step's, else the run's.
  local max_iter = st_max_iterations ~= "0" and num(st_max_iterations) or 0
  if max_iter == 0 and run_max_iterations ~= "0" and idx < COMP_BASE then
    -- (A compensation has no ceiling of its own and is not held to the
    -- run's: it undoes what the run did.)
    max_iter = num(run_max_iterations)
  end
  local iterations = num(run_iterations)
  if max_iter > 0 and iterations >= max_iter then
    local reason = string.format("run reached max_iterations %d before step %q attempt %d", max_iter, st_name,
      num(st_attempt))
    local after, f_code, f_reason = fail_run(idx, "max_iterations_exceeded", reason, "run reached its iteration ceiling", retention)
    return {"failed", f_code, f_reason, after}
  end

  if st_breaker and st_breaker ~= "" then
    -- The step's circuit breaker (lib/breaker.lua) may defer the attempt: it
    -- starts again when the breaker lets it, under a new dispatch, using
    -- neither its retry nor its crash budget.
    local timeout_ms = redis.call("HGET", RUN, p .. "timeout_ms")
    local until_ms = breaker("admit", st_breaker, RUN_ID .. ":" .. index .. ":" .. token, timeout_ms)
    if until_ms then
      local bname = string.match(st_breaker, "^(.*)|%d+|%d+|%d+|%d+$")
      if deadline > 0 and until_ms >= deadline then
        local reason = string.format("circuit breaker %q is open until after the run's deadline (%s); step %q attempt %d",
          bname, timeout_limit(idx), st_name, num(st_attempt))
        local after, f_code, f_reason = fail_run(idx, "run_timeout", reason, "run timed out", retention)
        return {"failed", f_code, f_reason, after}
      end
      local gen = step_incr(idx, "gen", "1")
      local id = task_id(RUN_ID, idx, num(st_attempt), gen)
      local w = {p .. "status", "pending", p .. "task", id, p .. "next_attempt_at", int(until_ms),
        p .. "fence", "", p .. "fence_expires_at", "0", "warning", "breaker_open", "updated_at", NOWS}
      if crashed == 1 then
        w[#w + 1] = p .. "resuming"
        w[#w + 1] = "1"
      end
      redis.call("HSET", RUN, unpack(w))
      redis.call("ZREM", IDX("fences"), RUN_ID)
      redis.call("ZADD", IDX("scheduled"), int(until_ms), RUN_ID)
      redis.call("ZADD", IDX("active"), NOWS, RUN_ID)
      journal("attempt_deferred", "step", st_name, "attempt", st_attempt, "breaker", bname, "until", int(until_ms))
      return {"deferred", int(until_ms), int(idx), st_name, st_attempt, int(gen), int(timeout_ms)}
    end
  end
  -- The writes of a begin: the run hash once (this is the hot path), only
  -- the fields that change.
  local fence_expires = int(NOW + ttl)
  local w = {"iterations", int(iterations + 1), "updated_at", NOWS,
    p .. "status", "running", p .. "fence", token, p .. "fence_expires_at", fence_expires,
    p .. "attempt_started_at", NOWS, p .. "attempts_started", int(num(st_attempts_started) + 1 - resume)}
  if st_retry_state ~= "none" then
    w[#w + 1] = p .. "retry_state"
    w[#w + 1] = "none"
  end
  if st_next_attempt_at ~= "0" then
    w[#w + 1] = p .. "next_attempt_at"
    w[#w + 1] = "0"
  end
  if resume == 1 and st_resuming and st_resuming ~= "0" then
    w[#w + 1] = p .. "resuming"
    w[#w + 1] = "0"
  end
  if not st_started_at or st_started_at == "0" then
    w[#w + 1] = p .. "started_at"
    w[#w + 1] = NOWS
  end
  if run_warning and run_warning ~= "" then
    w[#w + 1] = "warning"
    w[#w + 1] = ""
  end
  if run_status == "pending" then
    w[#w + 1] = "started_at"
    w[#w + 1] = NOWS
    set_status("pending", "running", nil, unpack(w))
  else
    redis.call("HSET", RUN, unpack(w))
  end
  if st_retry_state == "scheduled" then
    redis.call("ZREM", IDX("scheduled"), RUN_ID)
  end
  redis.call("ZADD", IDX("fences"), fence_expires, RUN_ID)
  if worker and worker ~= "" then
    journal("attempt_started", "step", st_name, "attempt", st_attempt, "task", task, "resumed", resumed, "worker", worker)
  else
    journal("attempt_started", "step", st_name, "attempt", st_attempt, "task", task, "resumed", resumed)
  end
  if crashes then
    -- This delivery found the crash (the reconciler's re-dispatch notifies
    -- of its own).
    notify("run_recovered", redis.call("HGET", RUN, "workflow"), "by", "worker", "kind", "crashed_attempt",
      "step", st_name, "attempt", st_attempt, "crashes", int(crashes))
  end
end

local used = st_attempt
if st_budget_base ~= "0" then
  used = int(num(st_attempt) - num(st_budget_base))
end
local out = {"ok", st_attempt, "0", resumed, run_input, st_policy or "{}", used, run_deadline or "0", nx_name or "",
  nx_attempt or "0", nx_timeout_ms or "0"}
if trace == "1" then
  out[#out + 1] = v[NF] or ""
end
if crashed == 1 then
  out[3] = int(crashes or redis.call("HGET", RUN, p .. "crashes"))
end
if idx >= COMP_BASE then
  -- A compensation: no next step to prepare; the run's failure instead.
  local r = redis.call("HMGET", RUN, "failure_code", "failure_reason")
  out[1], out[9], out[10], out[11] = "comp", r[1] or "", r[2] or "", ""
end
for i = NF + 1, #v do
  out[#out + 1] = v[i] or ""
end
return out
