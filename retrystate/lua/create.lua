-- create.lua: create a run and make its first step due now.
-- KEYS[1] the run record
-- KEYS[2] the idempotency key, scoped by owner (keys.go's idempotency), or the
--         never-written placeholder cairn:{q}:idem: when there is none
-- KEYS[3] the key's name before keys were scoped by owner, cairn:{q}:idem:<key>,
--         for an owned key (else the placeholder): a run it names counts only
--         when it has the same owner
-- ARGV[1..3]: run ID, key prefix, now (common.lua)
-- ARGV[4]  workflow name
-- ARGV[5]  input (JSON)
-- ARGV[6]  owner (the subject that started the run)
-- ARGV[7]  idempotency key, "" for none
-- ARGV[8]  definition snapshot (JSON): the steps and policies this run keeps
-- ARGV[9]  run timeout, ms (0: none); the deadline is now + timeout
-- ARGV[10] max iterations (step executions, retries included; 0: no limit)
-- ARGV[11] number of steps, n
-- ARGV[12 .. 11+12n] per step: name, optional (0|1), max_attempts, max_crashes, timeout_ms, policy (JSON),
--                  run_timeout_ms and max_iterations in force while the step is current (0: none),
--                  then kind ("" for a step with a body; "await", "sleep" or "sleep_until"), the
--                  awaited signal ("" for none) and wait_ms (an await's timeout or a sleep's duration);
--                  the last three are written only for an await or a sleep; then the step's
--                  circuit breaker spec (common.lua's breaker; "" for none)
-- ARGV[G..G+3], G = 12 + 12n: the run's gates (common.lua): ordering key ("" for none), its
--                  concurrency, "1" when a failed run blocks its key (on_failure: block), and
--                  the workflow's max_running (0: none)
-- ARGV[G+4]        the workflow's on_failure: "compensate" for a saga, else ""
-- ARGV[G+5]        m, the number of steps with a compensation (common.lua's sagas); then per
--                  compensation, 6 values: the step's index, the compensation's max_attempts,
--                  max_crashes, timeout_ms, policy (JSON) and circuit breaker spec
-- ARGV[H], H = G + 6 + 6m: k, the number of steps in a group; then per step, 3 values: its
--                  index, its group's name and "1" when the group is optional (else "0")
-- (ARGV from G+4 on may be absent: no saga.)
-- Returns {"created", task ID of step 0, attempt}, {"waiting", reason, position} when the
-- run was created but waits in the line of one of its gates (no task: it gets one when it
-- is admitted), or {"exists", run ID of the idempotency key}.

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
if redis.call("EXISTS", RUN) == 1 then
  return redis.error_reply("ERR cairn: run ID collision " .. RUN_ID)
end
local idem_key = ""
if ARGV[7] ~= "" then
  redis.call("SET", KEYS[2], RUN_ID)
  idem_key = string.sub(KEYS[2], #PREFIX + 1)
end

local n = tonumber(ARGV[11])
-- STEP_ARGS is the number of ARGV per step.
local STEP_ARGS = 12
local w = {
  "workflow", ARGV[4], "status", "pending", "owner", ARGV[6], "input", ARGV[5],
  "idempotency_key", ARGV[7], "idem_key", idem_key, "definition", ARGV[8], "steps", int(n),
  "iterations", "0", "max_iterations", int(ARGV[10]), "deadline", "0", "deadline_base", NOWS, "run_timeout_ms", int(ARGV[9]),
  "created_at", NOWS, "started_at", "0", "finished_at", "0",
  "failure_code", "", "failure_reason", "", "warning", "", "needs_attention", "0",
  "auto_recoveries", "0"}
for i = 0, n - 1 do
  local a, p = 12 + i * STEP_ARGS, sp(i)
  local f = {
    "name", ARGV[a], "optional", ARGV[a + 1], "max_attempts", ARGV[a + 2], "max_crashes", ARGV[a + 3],
    "timeout_ms", ARGV[a + 4], "policy", ARGV[a + 5], "run_timeout_ms", ARGV[a + 6], "max_iterations", ARGV[a + 7],
    "status", "pending", "attempt", "0", "budget_base", "0", "retry_attempts", "0", "retry_state", "none",
    "next_attempt_at", "0", "attempts_started", "0", "crashes", "0", "gen", "0", "task", "", "fence", "",
    "fence_expires_at", "0", "last_error", "", "last_error_class", "", "output", "", "started_at", "0",
    "finished_at", "0"}
  if ARGV[a + 8] ~= "" then
    -- An await or a sleep (signals and timers).
    local k = {"kind", ARGV[a + 8], "signal", ARGV[a + 9], "wait_ms", int(ARGV[a + 10])}
    for j = 1, #k do
      f[#f + 1] = k[j]
    end
  end
  if ARGV[a + 11] ~= "" then
    -- The step's circuit breaker (common.lua's breaker).
    f[#f + 1] = "breaker"
    f[#f + 1] = ARGV[a + 11]
  end
  for j = 1, #f, 2 do
    f[j] = p .. f[j]
  end
  redis.call("HSET", RUN, unpack(f))
end
local G = 12 + n * STEP_ARGS
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
local on_failure, m = ARGV[G + 4] or "", num(ARGV[G + 5])
local H = G + 6 + 6 * m
local k = num(ARGV[H])
if on_failure ~= "" or m > 0 or k > 0 then
  -- Compensations and step groups (common.lua's sagas).
  w[#w + 1] = "sagas"
  w[#w + 1] = "1"
  if on_failure ~= "" then
    w[#w + 1] = "on_failure"
    w[#w + 1] = on_failure
  end
  for j = 0, m - 1 do
    local a = G + 6 + 6 * j
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
-- Step 0 becomes current, due now (activation's fields override the above).
local act, id, attempt = activation(0, 0)
step_deadline(act, NOW, ARGV[12 + 6], ARGV[9], 0)
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
return {"created", id, int(attempt)}
