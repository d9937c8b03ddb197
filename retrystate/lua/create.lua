-- create.lua: create a run and make its first step due now.
-- KEYS
--   RUN              the run record
--   idem             the idempotency key, scoped by owner (keys.go's idempotency), or the
--                    never-written placeholder cairn:{q}:idem: when there is none
--   legacy_idem      the key's name before keys were scoped by owner, cairn:{q}:idem:<key>,
--                    for an owned key (else the placeholder): a run it names counts only
--                    when it has the same owner
--   first_task       asynq:{q}:t:<run>_s0_a1, the first task's key (any key of the slot when
--                    first_msg is "")
--   pending          asynq:{q}:pending
--   seed             the seed of the definition version def for this script (keys.go's seed),
--                    when steps is 0 (else any key of the slot)
-- ARGV
--   RUN_ID, PREFIX, NOWS  the run ID, the queue's key prefix, now (lua/README.md)
--   workflow         the workflow's name
--   input            the input (JSON)
--   owner            the owner (the subject that started the run)
--   idempotency_key  the idempotency key, "" for none
--   def              the version of the workflow's definition the caller has, the sha256 that
--                    names its template cairn:{q}:def:<sha> (keys.go's definition; "" for
--                    none): the run refers to it (field def). When the workflow's published
--                    version (cairn:{q}:defv) is another, nothing is written and the reply is
--                    {"stale", published version}.
--   run_timeout      the run timeout, ms (0: none); the deadline is now + timeout
--   max_iterations   the most step executions, retries included (0: no limit)
--   steps            n, the number of steps; 0 with def: the run's fixed fields (run_timeout,
--                    max_iterations, the steps' and their compensations' and groups', and the
--                    saga's) come from the template cairn:{q}:def:<def> instead ({"stale", ""}
--                    when it is missing): the run hash is a COPY of the version's seed, made
--                    here from the template when it is missing. Then, per step:
--   .name            its name
--   .optional        "1" when it may be skipped, else "0"
--   .max_attempts    its max_attempts
--   .max_crashes     its max_crashes
--   .timeout_ms      its timeout, ms
--   .policy          its policy (JSON)
--   .run_timeout_ms  the run timeout in force while it is current (0: none)
--   .max_iterations  the iteration ceiling in force while it is current (0: none)
--   .kind            "" for a step with a body; "await", "sleep" or "sleep_until" (signals and
--                    timers: kind, signal and wait_ms are written only for those)
--   .signal          the awaited signal ("" for none)
--   .wait_ms         an await's timeout or a sleep's duration, ms
--   .breaker         its circuit breaker's spec (lib/breaker.lua; "" for none)
--   ord_key          the run's gates (lib/gates.lua): its ordering key ("" for none),
--   ord_limit        the key's concurrency,
--   ord_block        "1" when a failed run blocks its key (on_failure: block),
--   max_running      and the workflow's max_running (0: none)
--   first_msg        the asynq message (tasks.AsynqMessage) of step 0's first task,
--                    <run>_s0_a1: the script writes that task, pending (due now), unless the
--                    run waits at a gate; "" for none (the caller enqueues it)
--   on_failure       the workflow's on_failure: "compensate" for a saga, else ""
--   comps            m, the number of steps with a compensation (lib/fail_run.lua's sagas);
--                    then, per compensation:
--   .index           the index of the step it compensates
--   .max_attempts    its max_attempts
--   .max_crashes     its max_crashes
--   .timeout_ms      its timeout, ms
--   .policy          its policy (JSON)
--   .breaker         its circuit breaker's spec
--   groups           k, the number of steps in a group; then, per grouped step:
--   .index           its index
--   .group           its group's name
--   .optional        "1" when the group is optional, else "0"
--   trace            the run's trace context (W3C traceparent, a newline, tracestate), stored
--                    as the field trace when not "" (begin.lua returns it to a worker that
--                    traces)
-- (The arguments from first_msg on may be absent: no first task, no saga, no trace. A run of
-- a template has no per-step arguments, compensations or grouped steps.)
-- Returns {"created", task ID of step 0, attempt, enqueued (0|1: the script wrote its task)},
-- {"waiting", reason, position} when the run was created but waits in the line of one of its
-- gates (no task: it gets one when it is admitted), {"exists", run ID of the idempotency key},
-- or {"stale", the published version} (nothing written).

local RUN, idem, legacy_idem, first_task, pending, seed = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, workflow, input, owner, idempotency_key, def, run_timeout, max_iterations, steps =
  unpack(ARGV, 1, 11)
-- needs: COMP_BASE, IDX, NOW, RUN_DEFAULTS, STEP_DEFAULTS, activation, gates, int, journal, num, put_task, sp, step_deadline, zero

if idempotency_key ~= "" then
  local existing = redis.call("GET", idem)
  if existing then
    return {"exists", existing}
  end
  if legacy_idem ~= idem then
    local legacy = redis.call("GET", legacy_idem)
    if legacy and redis.call("HGET", PREFIX .. "run:" .. legacy, "owner") == owner then
      return {"exists", legacy}
    end
  end
end
local n = tonumber(steps)
if def ~= "" then
  -- The caller's definition must be the published one (a worker may have
  -- published another since the caller read it).
  local published = redis.call("HGET", PREFIX .. "defv", workflow)
  if published and published ~= def then
    return {"stale", published}
  end
end
-- A run of a template (n == 0) is copied from its definition's seed
-- (keys.go's seed: the template's fields and every default, lib/RUN_DEFAULTS.lua
-- and STEP_DEFAULTS.lua; the run-specific fields are written
-- below, over them), which Redis copies without a value crossing into Lua.
local from_template = n == 0
if from_template then
  if not seed then
    return redis.error_reply("ERR cairn: create.lua: a run of a template needs its seed's key (KEYS: seed)")
  end
  if redis.pcall("COPY", seed, RUN) ~= 1 then
    if redis.call("EXISTS", RUN) == 1 then
      return redis.error_reply("ERR cairn: run ID collision " .. RUN_ID)
    end
    -- The first run of this version (or a Redis without COPY, before 6.2):
    -- the seed is made from the template, once.
    local template = redis.call("HGETALL", PREFIX .. "def:" .. def)
    if #template == 0 then
      return {"stale", ""}
    end
    local template_steps = 0
    for j = 1, #template, 2 do
      if template[j] == "steps" then
        template_steps = num(template[j + 1])
      end
    end
    local f = {"def", def}
    for j = 1, #RUN_DEFAULTS do
      f[#f + 1] = RUN_DEFAULTS[j]
    end
    for i = 0, template_steps - 1 do
      local p = sp(i)
      for j = 1, #STEP_DEFAULTS, 2 do
        f[#f + 1] = p .. STEP_DEFAULTS[j]
        f[#f + 1] = STEP_DEFAULTS[j + 1]
      end
    end
    for j = 1, #template do
      f[#f + 1] = template[j]
    end
    for j = 1, #f, 1000 do
      redis.call("HSET", seed, unpack(f, j, math.min(j + 999, #f)))
    end
    if redis.pcall("COPY", seed, RUN) ~= 1 then
      for j = 1, #f, 1000 do
        redis.call("HSET", RUN, unpack(f, j, math.min(j + 999, #f)))
      end
    end
  end
elseif redis.call("EXISTS", RUN) == 1 then
  return redis.error_reply("ERR cairn: run ID collision " .. RUN_ID)
end
local idem_key = ""
if idempotency_key ~= "" then
  redis.call("SET", idem, RUN_ID)
  idem_key = string.sub(idem, #PREFIX + 1)
end

-- s0_run_timeout is step 0's run timeout: its argument, or the template's.
local s0_run_timeout = nil
local w = {"workflow", workflow, "owner", owner, "input", input, "deadline_base", NOWS, "created_at", NOWS}
if idempotency_key ~= "" then
  w[#w + 1] = "idempotency_key"
  w[#w + 1] = idempotency_key
  w[#w + 1] = "idem_key"
  w[#w + 1] = idem_key
end
if from_template then
  -- The fixed fields of the run, its steps, their compensations and groups
  -- (keys.go's definition), came with the seed.
  local r = redis.call("HMGET", RUN, "steps", "run_timeout_ms", "s0.run_timeout_ms")
  n, run_timeout, s0_run_timeout = num(r[1]), r[2], r[3]
else
  local f = {"steps", int(n), "max_iterations", int(max_iterations), "run_timeout_ms", int(run_timeout)}
  for j = 1, #RUN_DEFAULTS do
    f[#f + 1] = RUN_DEFAULTS[j]
  end
  if def ~= "" then
    f[#f + 1] = "def"
    f[#f + 1] = def
  end
  -- Written with w at the end, under the run's own fields (owner, key).
  for j = 1, #w do
    f[#f + 1] = w[j]
  end
  w = f
end
-- Without a template, the steps' fixed fields come in ARGV, from the
-- 12th argument on: at is the cursor, the next argument to read.
local at, names = 12, nil -- names: the steps' names, for their compensations'
for i = 0, num(steps) - 1 do
  local name, optional, max_attempts, max_crashes, timeout_ms, policy, run_timeout_ms, max_iterations, kind, signal,
    wait_ms, breaker = unpack(ARGV, at, at + 11)
  at = at + 12
  if i == 0 then
    s0_run_timeout, names = run_timeout_ms, {}
  end
  names[i] = name
  local p = sp(i)
  local f = {"name", name, "optional", optional, "max_attempts", max_attempts, "max_crashes", max_crashes,
    "timeout_ms", timeout_ms, "policy", policy, "run_timeout_ms", run_timeout_ms, "max_iterations", max_iterations}
  if kind ~= "" then
    -- An await or a sleep (signals and timers).
    local k = {"kind", kind, "signal", signal, "wait_ms", int(wait_ms)}
    for j = 1, #k do
      f[#f + 1] = k[j]
    end
  end
  if breaker ~= "" then
    -- The step's circuit breaker (lib/breaker.lua).
    f[#f + 1] = "breaker"
    f[#f + 1] = breaker
  end
  for j = 1, #STEP_DEFAULTS do
    f[#f + 1] = STEP_DEFAULTS[j]
  end
  for j = 1, #f, 2 do
    f[j] = p .. f[j]
  end
  redis.call("HSET", RUN, unpack(f))
end
local ord_key, ord_limit, ord_block, max_running, first_msg, on_failure, comps = unpack(ARGV, at, at + 6)
at = at + 7
ord_key, max_running = ord_key or "", max_running or "0"
local gated = ord_key ~= "" or not zero(max_running)
if gated then
  local g = {"gated", "1", "ord_key", ord_key, "ord_limit", int(ord_limit), "ord_block", ord_block,
    "wf_limit", int(max_running), "gate_seq", int(redis.call("INCR", PREFIX .. "gate:seq")), "hold_k", "0",
    "hold_w", "0", "waiting", ""}
  for j = 1, #g do
    w[#w + 1] = g[j]
  end
end
-- Compensations and step groups (lib/fail_run.lua's sagas), written for a
-- run without a template.
on_failure, comps = on_failure or "", num(comps)
for _ = 1, comps do
  local index, max_attempts, max_crashes, timeout_ms, policy, breaker = unpack(ARGV, at, at + 5)
  at = at + 6
  if not from_template then
    local i = num(index)
    local c = sp(COMP_BASE + i)
    local f = {sp(i) .. "comp", "1", c .. "name", "compensate:" .. names[i], c .. "max_attempts", max_attempts,
      c .. "max_crashes", max_crashes, c .. "timeout_ms", timeout_ms, c .. "policy", policy}
    if breaker ~= "" then
      f[#f + 1] = c .. "breaker"
      f[#f + 1] = breaker
    end
    redis.call("HSET", RUN, unpack(f))
  end
end
local groups = unpack(ARGV, at, at)
at, groups = at + 1, num(groups)
for _ = 1, groups do
  local index, group, optional = unpack(ARGV, at, at + 2)
  at = at + 3
  if not from_template then
    redis.call("HSET", RUN, sp(num(index)) .. "group", group, sp(num(index)) .. "group_opt", optional)
  end
end
if not from_template and (on_failure ~= "" or comps > 0 or groups > 0) then
  w[#w + 1] = "sagas"
  w[#w + 1] = "1"
  if on_failure ~= "" then
    w[#w + 1] = "on_failure"
    w[#w + 1] = on_failure
  end
end
local trace = unpack(ARGV, at, at)
if trace and trace ~= "" then
  w[#w + 1] = "trace"
  w[#w + 1] = trace
end
-- Step 0 becomes current, due now (activation's fields override the above).
local act, id, attempt = activation(0, 0)
step_deadline(act, NOW, s0_run_timeout, run_timeout, 0)
for j = 1, #act do
  w[#w + 1] = act[j]
end
redis.call("HSET", RUN, unpack(w))
redis.call("ZADD", IDX("all"), NOWS, RUN_ID)
redis.call("ZADD", IDX("status:pending"), NOWS, RUN_ID)
redis.call("ZADD", IDX("active"), NOWS, RUN_ID)
journal("run_started", "workflow", workflow, "owner", owner, "task", id)
if gated then
  local ok, reason, pos = gates().admit(RUN_ID)
  if not ok then
    return {"waiting", reason, pos}
  end
end
if first_msg and first_msg ~= "" then
  -- The run and its first task are one atomic write.
  put_task(first_task, pending, nil, id, first_msg, NOWS)
  return {"created", id, int(attempt), "1"}
end
return {"created", id, int(attempt), "0"}
