-- create.lua: create a run and make its first step due now.
-- KEYS[1] the run record
-- KEYS[2] the idempotency key, scoped by owner (keys.go's idempotency), or the
--         never-written placeholder cairn:{q}:idem: when there is none
-- KEYS[3] the key's name before keys were scoped by owner, cairn:{q}:idem:<key>,
--         for an owned key (else the placeholder): a run it names counts only
--         when it has the same owner
-- KEYS[4] asynq:{q}:t:<run>_s0_a1, the first task's key (any key of the slot when ARGV[G+4] is "")
-- KEYS[5] asynq:{q}:pending
-- KEYS[6] the seed of the definition version ARGV[8] for this script (keys.go's seed), when ARGV[11]
--         is 0 (else any key of the slot)
-- ARGV[1..3]: run ID, key prefix, now (lua/README.md)
-- ARGV[4]  workflow name
-- ARGV[5]  input (JSON)
-- ARGV[6]  owner (the subject that started the run)
-- ARGV[7]  idempotency key, "" for none
-- ARGV[8]  the version of the workflow's definition the caller has, the sha256 that names its
--          template cairn:{q}:def:<sha> (keys.go's definition; "" for none): the run refers to it
--          (field def). When the workflow's published version (cairn:{q}:defv) is another, nothing
--          is written and the reply is {"stale", published version}.
-- ARGV[9]  run timeout, ms (0: none); the deadline is now + timeout
-- ARGV[10] max iterations (step executions, retries included; 0: no limit)
-- ARGV[11] number of steps, n; 0 with ARGV[8]: the run's fixed fields (ARGV[9], ARGV[10], the
--          steps' and their compensations' and groups', and the saga's) come from the template
--          cairn:{q}:def:<ARGV[8]> instead ({"stale", ""} when it is missing): the run hash is a
--          COPY of the version's seed KEYS[6], made here from the template when it is missing
-- ARGV[12 .. 11+12n] per step: name, optional (0|1), max_attempts, max_crashes, timeout_ms, policy (JSON),
--                  run_timeout_ms and max_iterations in force while the step is current (0: none),
--                  then kind ("" for a step with a body; "await", "sleep" or "sleep_until"), the
--                  awaited signal ("" for none) and wait_ms (an await's timeout or a sleep's duration);
--                  the last three are written only for an await or a sleep; then the step's
--                  circuit breaker spec (lib/breaker.lua; "" for none)
-- ARGV[G..G+3], G = 12 + 12n: the run's gates (lib/gate.lua): ordering key ("" for none), its
--                  concurrency, "1" when a failed run blocks its key (on_failure: block), and
--                  the workflow's max_running (0: none)
-- ARGV[G+4]        the asynq message (tasks.AsynqMessage) of step 0's first task, <run>_s0_a1: the
--                  script writes that task, pending (due now), unless the run waits at a gate; ""
--                  for none (the caller enqueues it)
-- ARGV[G+5]        the workflow's on_failure: "compensate" for a saga, else ""
-- ARGV[G+6]        m, the number of steps with a compensation (lib/fail_run.lua's sagas); then per
--                  compensation, 6 values: the step's index, the compensation's max_attempts,
--                  max_crashes, timeout_ms, policy (JSON) and circuit breaker spec
-- ARGV[H], H = G + 7 + 6m: k, the number of steps in a group; then per step, 3 values: its
--                  index, its group's name and "1" when the group is optional (else "0")
-- ARGV[H + 1 + 3k]  the run's trace context (W3C traceparent, a newline, tracestate), stored as the
--                  field trace when not "" (begin.lua returns it to a worker that traces)
-- (ARGV from G+4 on may be absent: no first task, no saga, no trace.)
-- Returns {"created", task ID of step 0, attempt, enqueued (0|1: the script wrote its task)},
-- {"waiting", reason, position} when the run was created but waits in the line of one of its
-- gates (no task: it gets one when it is admitted), {"exists", run ID of the idempotency key},
-- or {"stale", the published version} (nothing written).

local RUN = KEYS[1]
local RUN_ID, PREFIX, NOWS = ARGV[1], ARGV[2], ARGV[3]
-- needs: COMP_BASE, IDX, NOW, RUN_DEFAULTS, STEP_DEFAULTS, activation, gate, int, journal, num, sp, step_deadline, zero

if ARGV[7] ~= "" then
  local existing = redis.call("GET", KEYS[2])
  if existing then
    return {"exists", existing}
  end
  if KEYS[3] ~= KEYS[2] then
    local legacy = redis.call("GET", KEYS[3])
    if legacy and redis.call("HGET", PREFIX .. "run:" .. legacy, "owner") == ARGV[6] then
      return {"exists", legacy}
    end
  end
end
local sha, n = ARGV[8], tonumber(ARGV[11])
if sha ~= "" then
  -- The caller's definition must be the published one (a worker may have
  -- published another since the caller read it).
  local published = redis.call("HGET", PREFIX .. "defv", ARGV[4])
  if published and published ~= sha then
    return {"stale", published}
  end
end
-- A run of a template (n == 0) is copied from its definition's seed
-- (keys.go's seed: the template's fields and every default, lib/RUN_DEFAULTS.lua
-- and STEP_DEFAULTS.lua; the run-specific fields are written
-- below, over them), which Redis copies without a value crossing into Lua.
local from_template = n == 0
if from_template then
  local seed = KEYS[6]
  if not seed then
    return redis.error_reply("ERR cairn: create.lua: a run of a template needs its seed's key (KEYS[6])")
  end
  if redis.pcall("COPY", seed, RUN) ~= 1 then
    if redis.call("EXISTS", RUN) == 1 then
      return redis.error_reply("ERR cairn: run ID collision " .. RUN_ID)
    end
    -- The first run of this version (or a Redis without COPY, before 6.2):
    -- the seed is made from the template, once.
    local template = redis.call("HGETALL", PREFIX .. "def:" .. sha)
    if #template == 0 then
      return {"stale", ""}
    end
    local steps = 0
    for j = 1, #template, 2 do
      if template[j] == "steps" then
        steps = num(template[j + 1])
      end
    end
    local f = {"def", sha}
    for j = 1, #RUN_DEFAULTS do
      f[#f + 1] = RUN_DEFAULTS[j]
    end
    for i = 0, steps - 1 do
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
if ARGV[7] ~= "" then
  redis.call("SET", KEYS[2], RUN_ID)
  idem_key = string.sub(KEYS[2], #PREFIX + 1)
end

-- STEP_ARGS is the number of ARGV per step.
local STEP_ARGS = 12
local run_timeout, s0_run_timeout = ARGV[9], ARGV[12 + 6]
local w = {"workflow", ARGV[4], "owner", ARGV[6], "input", ARGV[5], "deadline_base", NOWS, "created_at", NOWS}
if ARGV[7] ~= "" then
  w[#w + 1] = "idempotency_key"
  w[#w + 1] = ARGV[7]
  w[#w + 1] = "idem_key"
  w[#w + 1] = idem_key
end
if from_template then
  -- The fixed fields of the run, its steps, their compensations and groups
  -- (keys.go's definition), came with the seed.
  local r = redis.call("HMGET", RUN, "steps", "run_timeout_ms", "s0.run_timeout_ms")
  n, run_timeout, s0_run_timeout = num(r[1]), r[2], r[3]
else
  local f = {"steps", int(n), "max_iterations", int(ARGV[10]), "run_timeout_ms", int(ARGV[9])}
  for j = 1, #RUN_DEFAULTS do
    f[#f + 1] = RUN_DEFAULTS[j]
  end
  if sha ~= "" then
    f[#f + 1] = "def"
    f[#f + 1] = sha
  end
  -- Written with w at the end, under the run's own fields (owner, key).
  for j = 1, #w do
    f[#f + 1] = w[j]
  end
  w = f
end
-- Without a template, the steps' fixed fields come in ARGV.
for i = 0, (from_template and 0 or n) - 1 do
  local a, p = 12 + i * STEP_ARGS, sp(i)
  local f = {"name", ARGV[a], "optional", ARGV[a + 1], "max_attempts", ARGV[a + 2], "max_crashes", ARGV[a + 3],
    "timeout_ms", ARGV[a + 4], "policy", ARGV[a + 5], "run_timeout_ms", ARGV[a + 6], "max_iterations", ARGV[a + 7]}
  if ARGV[a + 8] ~= "" then
    -- An await or a sleep (signals and timers).
    local k = {"kind", ARGV[a + 8], "signal", ARGV[a + 9], "wait_ms", int(ARGV[a + 10])}
    for j = 1, #k do
      f[#f + 1] = k[j]
    end
  end
  if ARGV[a + 11] ~= "" then
    -- The step's circuit breaker (lib/breaker.lua).
    f[#f + 1] = "breaker"
    f[#f + 1] = ARGV[a + 11]
  end
  for j = 1, #STEP_DEFAULTS do
    f[#f + 1] = STEP_DEFAULTS[j]
  end
  for j = 1, #f, 2 do
    f[j] = p .. f[j]
  end
  redis.call("HSET", RUN, unpack(f))
end
local G = 12 + num(ARGV[11]) * STEP_ARGS
local ord_key, wf_limit = ARGV[G] or "", ARGV[G + 3] or "0"
local gated = ord_key ~= "" or not zero(wf_limit)
if gated then
  local g = {"gated", "1", "ord_key", ord_key, "ord_limit", int(ARGV[G + 1]), "ord_block", ARGV[G + 2],
    "wf_limit", int(wf_limit), "gate_seq", int(redis.call("INCR", PREFIX .. "gate:seq")), "hold_k", "0",
    "hold_w", "0", "waiting", ""}
  for j = 1, #g do
    w[#w + 1] = g[j]
  end
end
local on_failure, m = ARGV[G + 5] or "", num(ARGV[G + 6])
local H = G + 7 + 6 * m
local k = num(ARGV[H])
if not from_template and (on_failure ~= "" or m > 0 or k > 0) then
  -- Compensations and step groups (lib/fail_run.lua's sagas).
  w[#w + 1] = "sagas"
  w[#w + 1] = "1"
  if on_failure ~= "" then
    w[#w + 1] = "on_failure"
    w[#w + 1] = on_failure
  end
  for j = 0, m - 1 do
    local a = G + 7 + 6 * j
    local i = num(ARGV[a])
    local c = sp(COMP_BASE + i)
    local f = {sp(i) .. "comp", "1", c .. "name", "compensate:" .. ARGV[12 + i * STEP_ARGS], c .. "max_attempts",
      ARGV[a + 1], c .. "max_crashes", ARGV[a + 2], c .. "timeout_ms", ARGV[a + 3], c .. "policy", ARGV[a + 4]}
    if ARGV[a + 5] ~= "" then
      f[#f + 1] = c .. "breaker"
      f[#f + 1] = ARGV[a + 5]
    end
    redis.call("HSET", RUN, unpack(f))
  end
  for j = 0, k - 1 do
    local a = H + 1 + 3 * j
    redis.call("HSET", RUN, sp(num(ARGV[a])) .. "group", ARGV[a + 1], sp(num(ARGV[a])) .. "group_opt", ARGV[a + 2])
  end
end
local trace = ARGV[H + 1 + 3 * k]
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
redis.call("ZADD", IDX.all, NOWS, RUN_ID)
redis.call("ZADD", IDX["status:pending"], NOWS, RUN_ID)
redis.call("ZADD", IDX.active, NOWS, RUN_ID)
journal("run_started", "workflow", ARGV[4], "owner", ARGV[6], "task", id)
if gated then
  local ok, reason, pos = gate("pass", RUN_ID)
  if not ok then
    return {"waiting", reason, pos}
  end
end
local msg = ARGV[G + 4]
if msg and msg ~= "" then
  -- As put_task (lib/put_task.lua) writes a task due now: the run and its first
  -- task are one atomic write.
  redis.call("HSET", KEYS[4], "msg", msg, "state", "pending", "pending_since", NOWS .. "000000")
  redis.call("LPUSH", KEYS[5], id)
  return {"created", id, int(attempt), "1"}
end
return {"created", id, int(attempt), "0"}
