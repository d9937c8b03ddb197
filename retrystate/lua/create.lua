-- create.lua: create a run and make its first step due now.
-- KEYS: the run-level layout of common.lua; KEYS[2] is step 0, KEYS[14] the
-- idempotency key (or the placeholder when there is none).
-- ARGV[1..3]: run ID, key prefix, now (common.lua)
-- ARGV[4]  workflow name
-- ARGV[5]  input (JSON)
-- ARGV[6]  owner (the subject that started the run)
-- ARGV[7]  idempotency key, "" for none
-- ARGV[8]  definition snapshot (JSON): the steps and policies this run keeps
-- ARGV[9]  run timeout, ms (0: none); the deadline is now + timeout
-- ARGV[10] max iterations (step executions, retries included; 0: no limit)
-- ARGV[11] number of steps, n
-- ARGV[12 .. 11+6n] per step: name, optional (0|1), max_attempts, max_crashes, timeout_ms, policy (JSON)
-- Returns {"created", task ID of step 0, attempt} or {"exists", run ID of the idempotency key}.

if ARGV[7] ~= "" then
  local existing = redis.call("GET", KEYS[14])
  if existing then
    return {"exists", existing}
  end
end
if redis.call("EXISTS", KEYS[1]) == 1 then
  return redis.error_reply("ERR cairn: run ID collision " .. RUN_ID)
end
if ARGV[7] ~= "" then
  redis.call("SET", KEYS[14], RUN_ID)
end

local n = tonumber(ARGV[11])
local deadline = 0
if num(ARGV[9]) > 0 then
  deadline = NOW + num(ARGV[9])
end
redis.call("HSET", KEYS[1],
  "workflow", ARGV[4], "status", "pending", "owner", ARGV[6], "input", ARGV[5],
  "idempotency_key", ARGV[7], "definition", ARGV[8], "steps", int(n), "current", "0",
  "iterations", "0", "max_iterations", int(ARGV[10]), "deadline", int(deadline), "run_timeout_ms", int(ARGV[9]),
  "created_at", int(NOW), "updated_at", int(NOW), "started_at", "0", "finished_at", "0",
  "failure_code", "", "failure_reason", "", "warning", "", "needs_attention", "0",
  "auto_recoveries", "0")
for i = 0, n - 1 do
  local a = 12 + i * 6
  redis.call("HSET", step_key(i),
    "name", ARGV[a], "optional", ARGV[a + 1], "max_attempts", ARGV[a + 2], "max_crashes", ARGV[a + 3],
    "timeout_ms", ARGV[a + 4], "policy", ARGV[a + 5],
    "status", "pending", "attempt", "0", "budget_base", "0", "retry_attempts", "0", "retry_state", "none",
    "next_attempt_at", "0", "attempts_started", "0", "crashes", "0", "gen", "0", "task", "", "fence", "", "fence_expires_at", "0",
    "last_error", "", "last_error_class", "", "output", "", "started_at", "0", "finished_at", "0")
end
redis.call("ZADD", KEYS[4], NOW, RUN_ID)
if deadline > 0 then
  redis.call("ZADD", KEYS[16], deadline, RUN_ID)
end
set_status(nil, "pending")
local _, id, attempt = activate(0)
journal("run_started", "workflow", ARGV[4], "owner", ARGV[6], "task", id)
return {"created", id, int(attempt)}
