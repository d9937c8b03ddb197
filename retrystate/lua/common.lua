-- common.lua: constants and helpers shared by the run-level scripts. The Go
-- side prepends this file to each of them before loading it.
--
-- KEYS layout of every run-level script (keys.go, runKeys):
--   KEYS[1]      cairn:{q}:run:<id>               run record (hash)
--   KEYS[2]      cairn:{q}:run:<id>:s:<idx>       the step the caller acts on (hash)
--   KEYS[3]      cairn:{q}:run:<id>:j             journal (stream)
--   KEYS[4]      cairn:{q}:idx:all                every run, by creation time
--   KEYS[5]      cairn:{q}:idx:active             non-terminal runs, by last update
--   KEYS[6]      cairn:{q}:idx:scheduled          runs with a scheduled retry, by due time
--   KEYS[7]      cairn:{q}:idx:attention          runs needing an operator
--   KEYS[8..12]  cairn:{q}:idx:status:<status>    pending, running, succeeded, failed, cancelled
--   KEYS[13]     cairn:{q}:notifications          run-level events (stream)
--   KEYS[14]     cairn:{q}:idem:<key>             idempotency key, or the never-written cairn:{q}:idem:
--   KEYS[15]     cairn:{q}:idx:fences             runs with a running attempt, by fence expiry
--   KEYS[16]     cairn:{q}:idx:deadlines          non-terminal runs with a deadline, by deadline
-- ARGV shared by every run-level script:
--   ARGV[1]  run ID
--   ARGV[2]  the queue's key prefix, cairn:{q}:
--   ARGV[3]  now, Unix ms
-- Each script documents its ARGV from ARGV[4] on.
--
-- Step keys of other steps and the idempotency key named in the run record
-- are derived here from ARGV[2], mirroring keys.go; they carry the same hash
-- tag, so every key a script touches is in one cluster slot.

local RUN_ID = ARGV[1]
local PREFIX = ARGV[2]
local NOW = tonumber(ARGV[3])
local STATUS_KEY = {
  pending = KEYS[8], running = KEYS[9], succeeded = KEYS[10], failed = KEYS[11], cancelled = KEYS[12],
}
local JOURNAL_MAXLEN = "10000"
local NOTIFY_MAXLEN = "100000"

-- int returns n as an integral number. Redis writes an integral Lua number
-- given to redis.call as its plain decimal digits ("%.17g"), as miniredis
-- does, and a script reply turns it into an integer: no string formatting
-- on the hot path. (Times are Unix ms: 13 digits, exact in a double.)
local function int(n)
  return math.floor(tonumber(n) or 0)
end

local function num(v)
  return tonumber(v) or 0
end

local function is_terminal(status)
  return status == "succeeded" or status == "failed" or status == "cancelled"
end

local function step_key(idx)
  return PREFIX .. "run:" .. RUN_ID .. ":s:" .. int(idx)
end

-- task_id mirrors tasks.ID in Go: <run>_s<idx>_a<attempt>, plus _g<gen> for a re-dispatch.
local function task_id(idx, attempt, gen)
  local id = RUN_ID .. "_s" .. int(idx) .. "_a" .. int(attempt)
  if num(gen) > 0 then
    id = id .. "_g" .. int(gen)
  end
  return id
end

-- journal appends an entry of type typ to the run's journal, then the given
-- field/value pairs.
local function journal(typ, ...)
  return redis.call("XADD", KEYS[3], "MAXLEN", "~", JOURNAL_MAXLEN, "*", "type", typ, "at", int(NOW), ...)
end

-- notify appends a run-level event to the queue's notification stream.
local function notify(typ, workflow, ...)
  return redis.call("XADD", KEYS[13], "MAXLEN", "~", NOTIFY_MAXLEN, "*",
    "type", typ, "at", int(NOW), "run", RUN_ID, "workflow", workflow, ...)
end

-- set_status records the run's new status and moves it between indexes.
local function set_status(old, new)
  if old == new then
    return
  end
  local created = redis.call("HGET", KEYS[1], "created_at")
  if old and STATUS_KEY[old] then
    redis.call("ZREM", STATUS_KEY[old], RUN_ID)
  end
  redis.call("ZADD", STATUS_KEY[new], created, RUN_ID)
  redis.call("HSET", KEYS[1], "status", new, "updated_at", int(NOW))
  if is_terminal(new) then
    redis.call("ZREM", KEYS[5], RUN_ID)
    redis.call("ZREM", KEYS[6], RUN_ID)
    redis.call("ZREM", KEYS[15], RUN_ID)
    redis.call("ZREM", KEYS[16], RUN_ID)
    redis.call("HSET", KEYS[1], "finished_at", int(NOW), "warning", "")
  else
    redis.call("ZADD", KEYS[5], NOW, RUN_ID)
  end
end

-- touch records activity on a non-terminal run.
local function touch()
  redis.call("HSET", KEYS[1], "updated_at", int(NOW))
  redis.call("ZADD", KEYS[5], NOW, RUN_ID)
end

-- activate makes step idx the run's current step, due now, with a new
-- attempt number and a fresh retry budget, and records activity on the run.
-- Returns the step key, its task ID, the attempt number, the step's name and
-- its timeout (ms).
local function activate(idx)
  local key = step_key(idx)
  local s = redis.call("HMGET", key, "attempt", "name", "timeout_ms")
  local attempt = num(s[1]) + 1
  local id = task_id(idx, attempt, 0)
  redis.call("HSET", key,
    "attempt", int(attempt), "status", "pending", "budget_base", int(attempt - 1), "retry_attempts", "0",
    "retry_state", "none", "next_attempt_at", "0", "gen", "0", "task", id,
    "fence", "", "fence_expires_at", "0")
  redis.call("HSET", KEYS[1], "current", int(idx), "updated_at", int(NOW))
  redis.call("ZADD", KEYS[5], NOW, RUN_ID)
  return key, id, attempt, s[2], s[3]
end

-- expire_run gives a terminal run's keys their retention.
local function expire_run(retention_ms)
  local ms = num(retention_ms)
  if ms <= 0 then
    return
  end
  local r = redis.call("HMGET", KEYS[1], "steps", "idempotency_key")
  redis.call("PEXPIRE", KEYS[1], ms)
  redis.call("PEXPIRE", KEYS[3], ms)
  for i = 0, num(r[1]) - 1 do
    redis.call("PEXPIRE", step_key(i), ms)
  end
  if r[2] and r[2] ~= "" then
    redis.call("PEXPIRE", PREFIX .. "idem:" .. r[2], ms)
  end
end

-- fail_run ends the run as failed, needing attention, because of step key sk.
local function fail_run(sk, code, reason, message, retention_ms)
  local r = redis.call("HMGET", KEYS[1], "status", "workflow")
  local s = redis.call("HMGET", sk, "name", "attempt")
  set_status(r[1], "failed")
  redis.call("HSET", KEYS[1], "failure_code", code, "failure_reason", reason, "needs_attention", "1")
  redis.call("ZADD", KEYS[7], NOW, RUN_ID)
  redis.call("HSET", sk, "status", "failed", "fence", "", "fence_expires_at", "0", "finished_at", int(NOW),
    "next_attempt_at", "0")
  if redis.call("HGET", sk, "retry_state") == "scheduled" then
    redis.call("HSET", sk, "retry_state", "none")
  end
  journal("run_failed", "step", s[1], "attempt", s[2], "code", code, "reason", reason, "message", message)
  notify("run_failed", r[2], "step", s[1], "attempt", s[2], "code", code, "reason", reason, "message", message)
  expire_run(retention_ms)
end

-- auto_repair counts one automatic repair of the run. Past max_auto repairs
-- it marks the run as needing attention instead, so the reconciler leaves it
-- to an operator rather than loop, and returns false and the reason.
local function auto_repair(max_auto, kind)
  local n = redis.call("HINCRBY", KEYS[1], "auto_recoveries", 1)
  if n <= num(max_auto) then
    return true, ""
  end
  local reason = string.format("repaired automatically %d times (max_auto_recoveries %d); left for an operator (last: %s)",
    n - 1, num(max_auto), kind)
  redis.call("HSET", KEYS[1], "needs_attention", "1", "attention_reason", reason)
  redis.call("ZADD", KEYS[7], NOW, RUN_ID)
  redis.call("ZREM", KEYS[15], RUN_ID)
  journal("needs_attention", "code", "auto_recovery_exhausted", "reason", reason)
  notify("run_needs_attention", redis.call("HGET", KEYS[1], "workflow"), "code", "auto_recovery_exhausted", "reason", reason)
  return false, reason
end
