-- common.lua: constants and helpers shared by the run-level scripts. The Go
-- side (scripts.go) prepends to each script the definitions of this file it
-- uses, directly or through other definitions: every top-level statement
-- here is a "local" definition (with its comment above it), and a
-- definition may only use those above it.
--
-- A run is one hash: the run's fields (workflow, status, current, ...) and
-- each step's fields, named s<idx>.<field> (s0.status, s1.output, ...), so a
-- transition reads and writes the run and its steps in one command each.
--
-- KEYS of every run-level script (keys.go):
--   KEYS[1]  cairn:{q}:run:<id>   the run record (hash)
--   KEYS[2..] what the script's own header says
-- ARGV shared by every run-level script:
--   ARGV[1]  run ID
--   ARGV[2]  the queue's key prefix, cairn:{q}:
--   ARGV[3]  now, Unix ms
-- Each script documents its ARGV from ARGV[4] on.
--
-- The run's journal, the queue's indexes and its notification stream are
-- derived here from KEYS[1] and ARGV[2], mirroring keys.go; they carry the
-- queue's hash tag, so every key a script touches is in the slot of KEYS[1].

local RUN_ID = ARGV[1]
local PREFIX = ARGV[2]
local NOW = tonumber(ARGV[3])
-- NOWS is now as the decimal string the caller sent: written as is, with no
-- number formatting.
local NOWS = ARGV[3]
local RUN = KEYS[1]
local JOURNAL = RUN .. ":j"
local JOURNAL_MAXLEN = "10000"
local NOTIFY_MAXLEN = "100000"

-- IDX.<name> is the key of index cairn:{q}:idx:<name> (all, active,
-- scheduled, attention, fences, deadlines, status:<status>), built when first
-- used.
local IDX = setmetatable({}, {__index = function(t, name)
  local k = PREFIX .. "idx:" .. name
  rawset(t, name, k)
  return k
end})

-- int returns n, a number or a numeric string (nil and false are 0),
-- rounded down, as a decimal string. Every number written to Redis or
-- returned goes through it: given a Lua number, redis.call formats it with
-- "%.17g" (and Lua's own tostring with "%.14g"), multi-precision
-- conversions that cost more than the command they feed; "%d" is an
-- integer conversion. (Times are Unix ms: 13 digits, exact in a double.)
local function int(n)
  return string.format("%d", math.floor(tonumber(n) or 0))
end

local function num(v)
  return tonumber(v) or 0
end

-- zero tells whether a stored number is 0 or unset, without converting it.
local function zero(v)
  return not v or v == "0" or v == "" or v == 0
end

local function is_terminal(status)
  return status == "succeeded" or status == "failed" or status == "cancelled" or status == "compensated"
end

-- sp returns the field name prefix of step idx: "s<idx>.".
local function sp(idx)
  return string.format("s%d.", idx)
end

-- step_get reads fields of step idx; step_set writes field/value pairs of
-- step idx; step_incr increments one of its fields.
local function step_get(idx, ...)
  local p, f = sp(idx), {...}
  for i = 1, #f do
    f[i] = p .. f[i]
  end
  return redis.call("HMGET", RUN, unpack(f))
end

local function step_set(idx, ...)
  local p, a = sp(idx), {...}
  for i = 1, #a, 2 do
    a[i] = p .. a[i]
  end
  return redis.call("HSET", RUN, unpack(a))
end

local function step_incr(idx, field, by)
  return redis.call("HINCRBY", RUN, sp(idx) .. field, by)
end

-- task_id mirrors tasks.ID in Go: <run>_s<idx>_a<attempt>, plus _g<gen> for a re-dispatch.
local function task_id(idx, attempt, gen)
  if num(gen) > 0 then
    return string.format("%s_s%d_a%d_g%d", RUN_ID, idx, attempt, gen)
  end
  return string.format("%s_s%d_a%d", RUN_ID, idx, attempt)
end

-- journal appends an entry of type typ to the run's journal, then the given
-- field/value pairs.
local function journal(typ, ...)
  return redis.call("XADD", JOURNAL, "MAXLEN", "~", JOURNAL_MAXLEN, "*", "type", typ, "at", NOWS, ...)
end

-- notify appends a run-level event to the queue's notification stream,
-- with the run's owner (so that subscribers can show each subject its own
-- runs).
local function notify(typ, workflow, ...)
  return redis.call("XADD", PREFIX .. "notifications", "MAXLEN", "~", NOTIFY_MAXLEN, "*",
    "type", typ, "at", NOWS, "run", RUN_ID, "workflow", workflow, "owner", redis.call("HGET", RUN, "owner") or "",
    ...)
end

-- put_task writes asynq's record of task id, whose message is msg
-- (tasks.AsynqMessage), as asynq's own enqueue or schedule would (see
-- tasks/asynqwire.go): pending on pending_key when due_ms is not after now,
-- else scheduled on scheduled_key for due_ms rounded up to the whole second
-- (asynq keeps whole seconds; the engine waits out the rest). A state script
-- writes the task that continues the run with the state change itself, so
-- no crash or lost reply can fall between the two.
local function put_task(task_key, pending_key, scheduled_key, id, msg, due_ms)
  local due = num(due_ms)
  if due <= NOW then
    redis.call("HSET", task_key, "msg", msg, "state", "pending", "pending_since", NOWS .. "000000")
    redis.call("LPUSH", pending_key, id)
  else
    redis.call("HSET", task_key, "msg", msg, "state", "scheduled")
    redis.call("ZADD", scheduled_key, int((due + 999) / 1000), id)
  end
end

-- status_move records the run's new status and moves it between indexes.
-- created is the run's created_at when the caller has it (nil: read here).
-- leave names the indexes (active, scheduled, fences, deadlines) a run
-- that ends may still be in, to remove it from; nil: all of them. Fields to
-- write to the run hash along with the status may follow. (The default
-- includes the indexes of waiting awaits and sleeps.)
local function status_move(leave, old, new, created, ...)
  if old == new then
    if select("#", ...) > 0 then
      redis.call("HSET", RUN, ...)
    end
    return
  end
  if not created then
    created = redis.call("HGET", RUN, "created_at")
  end
  if old then
    redis.call("ZREM", IDX["status:" .. old], RUN_ID)
  end
  redis.call("ZADD", IDX["status:" .. new], created, RUN_ID)
  if is_terminal(new) then
    leave = leave or {"active", "scheduled", "fences", "deadlines", "waiting:signal", "waiting:timer"}
    for i = 1, #leave do
      redis.call("ZREM", IDX[leave[i]], RUN_ID)
    end
    redis.call("HSET", RUN, "status", new, "updated_at", NOWS, "finished_at", NOWS, "warning", "", ...)
  else
    redis.call("ZADD", IDX.active, NOWS, RUN_ID)
    redis.call("HSET", RUN, "status", new, "updated_at", NOWS, ...)
  end
end

-- set_status is status_move from whatever indexes the run is in.
local function set_status(old, new, created, ...)
  return status_move(nil, old, new, created, ...)
end

-- touch records activity on a non-terminal run.
local function touch()
  redis.call("HSET", RUN, "updated_at", NOWS)
  redis.call("ZADD", IDX.active, NOWS, RUN_ID)
end

-- put_now writes to asynq, pending (due now), the task id of step idx
-- (name, attempt, gen, timeout_ms) of run rid, as asynq's enqueue would
-- (tasks/asynqwire.go): the task that continues a run written by the
-- script that changes the run (gate admission, compensations). Given
-- due_ms (Unix ms) after now, the task is scheduled instead, for due_ms
-- rounded up to the whole second, as asynq's schedule would (put_task; the
-- reconciler's repair of a retry or wake-up, repair.lua). It uses no local
-- of the script around it (see gate below) and encodes the message itself:
-- tasks.Step.AsynqMessage in Lua, which TestGateAdmissionWritesAsynqTask
-- and TestRepairedTaskMatchesAsynq check byte for byte against Go's.
local function put_now(rid, workflow, idx, name, attempt, gen, id, timeout_ms, due_ms)
  local prefix, nows = ARGV[2], ARGV[3]
  -- queue is the queue's name, from the prefix cairn:{<queue>}:.
  local queue = string.sub(prefix, 8, -3)
  local char = string.char
  -- varint encodes protobuf's varint (one byte below 128, as lengths are).
  local function varint(n)
    if n < 128 then
      return char(n)
    end
    local b = {}
    repeat
      local x = n % 128
      n = (n - x) / 128
      if n > 0 then
        x = x + 128
      end
      b[#b + 1] = char(x)
    until n == 0
    return table.concat(b)
  end
  local payload = string.format("cairn1 %s %s %d %s %d %d", rid, workflow, idx, name, tonumber(attempt) or 0,
    tonumber(gen) or 0)
  local secs = 86400
  local timeout = tonumber(timeout_ms) or 0
  if timeout > 0 then
    secs = math.floor((timeout + 60000) / 1000)
  end
  -- The fields, each after its tag (field * 8, + 2 when length-delimited),
  -- in one concatenation: 1 type "cairn:step" (10 bytes), 2 payload, 3 ID,
  -- 4 queue, 5 retry (25), 8 timeout (seconds).
  local msg = "\10\10cairn:step\18" .. varint(#payload) .. payload .. "\26" .. varint(#id) .. id .. "\34" ..
    varint(#queue) .. queue .. "\40\25\64" .. varint(secs)
  local due = tonumber(due_ms) or 0
  if due > tonumber(nows) then
    redis.call("HSET", "asynq:{" .. queue .. "}:t:" .. id, "msg", msg, "state", "scheduled")
    redis.call("ZADD", "asynq:{" .. queue .. "}:scheduled", string.format("%d", math.floor((due + 999) / 1000)), id)
    return
  end
  redis.call("HSET", "asynq:{" .. queue .. "}:t:" .. id, "msg", msg, "state", "pending", "pending_since",
    nows .. "000000")
  redis.call("LPUSH", "asynq:{" .. queue .. "}:pending", id)
end

-- Admission gates: ordering keys and max_running.
-- A gate G is "k:<ordering key>" or "w:<workflow>" (max_running). Its line
-- of waiting runs is gate:<G>:wait (a sorted set of run IDs by start
-- sequence, the run's gate_seq from the counter gate:seq) and the runs it
-- admitted are gate:<G>:admitted (run IDs by admission time); idx:gates
-- lists the gates in use, for the reconciler. A gated run has gated=1, its
-- gates' settings (ord_key, ord_limit, ord_block, wf_limit), what it holds
-- (hold_k, hold_w: "1" when admitted) and, while it waits, waiting (the
-- wait reason) with its current step pending under task "" (so no delivery
-- can start it) and outside idx:active and idx:deadlines. A run passes its
-- gates in one order, key then workflow, so no two runs wait for each
-- other; each line admits in start order only.
--
-- gate(op, rid, arg) does one gate operation, so that the scripts which
-- may need one create its helpers only when they call it (a local function
-- is a closure made on every call of a script that includes it, and the
-- hot path's complete.lua includes this one):
--   gate("pass", rid): gate_pass below;
--   gate("release", rid, keep_key): gate_release below;
--   gate("repair", nil, g): the reconciler's repair of gate g (gate.lua).
local function gate(op, rid, arg)
  -- gate uses no local of the script around it: a closure's cost grows
  -- with the locals it captures, and begin.lua and complete.lua include
  -- this one on every call. It reads ARGV itself and has its own copies
  -- of the few helpers it needs (as above).
  local PREFIX, NOW, NOWS = ARGV[2], tonumber(ARGV[3]), ARGV[3]
  local JOURNAL_MAXLEN = "10000"
  local function int(n)
    return string.format("%d", math.floor(tonumber(n) or 0))
  end
  local function num(v)
    return tonumber(v) or 0
  end
  local function zero(v)
    return not v or v == "0" or v == "" or v == 0
  end
  local function is_terminal(status)
    return status == "succeeded" or status == "failed" or status == "cancelled" or status == "compensated"
  end
  local function sp(idx)
    return string.format("s%d.", idx)
  end
  local function idx(name)
    return PREFIX .. "idx:" .. name
  end
  local function gate_key(g, part)
    return PREFIX .. "gate:" .. g .. ":" .. part
  end
  -- gates_of returns the gates of run rid in the order it passes them, each
  -- {g, limit, hold field, held, reason}, and the run's key.
  local function gates_of(rid)
    local rk = PREFIX .. "run:" .. rid
    local r = redis.call("HMGET", rk, "ord_key", "ord_limit", "wf_limit", "workflow", "hold_k", "hold_w")
    local gs = {}
    if r[1] and r[1] ~= "" then
      gs[#gs + 1] = {"k:" .. r[1], num(r[2]), "hold_k", r[5] == "1", "ordering_key"}
    end
    if not zero(r[3]) then
      gs[#gs + 1] = {"w:" .. r[4], num(r[3]), "hold_w", r[6] == "1", "workflow_limit"}
    end
    return gs, rk
  end
  -- gate_fill admits the heads of gate g's line while it has free slots; a
  -- head whose run ended or is gone leaves the line. Returns the run IDs
  -- admitted: each holds g now and must still pass its later gates.
  local function gate_fill(g)
    local wk, ak = gate_key(g, "wait"), gate_key(g, "admitted")
    local out = {}
    while true do
      local head = redis.call("ZRANGE", wk, 0, 0)[1]
      if not head then
        break
      end
      local gs, rk = gates_of(head)
      local limit = nil
      for i = 1, #gs do
        if gs[i][1] == g then
          limit = gs[i]
        end
      end
      local st = redis.call("HGET", rk, "status")
      if not limit or not st or is_terminal(st) then
        -- (Cancel takes a run out of its line; this is a run whose
        -- record is gone, or one ended some other way.)
        redis.call("ZREM", wk, head)
        redis.call("ZREM", idx("waiting:ordering_key"), head)
        redis.call("ZREM", idx("waiting:workflow_limit"), head)
      else
        if redis.call("ZCARD", ak) >= limit[2] then
          break
        end
        redis.call("ZREM", wk, head)
        redis.call("ZADD", ak, NOWS, head)
        redis.call("HSET", rk, limit[3], "1")
        out[#out + 1] = head
      end
    end
    return out
  end
  -- run_wait records that run rid waits for reason (its current step, just
  -- activated or already waiting, gets no task), and journals it.
  local function run_wait(rid, reason, g)
    local rk = PREFIX .. "run:" .. rid
    local r = redis.call("HMGET", rk, "waiting", "current", "workflow", "status", "created_at", "owner")
    if r[1] and r[1] ~= "" and r[1] ~= reason then
      redis.call("ZREM", idx("waiting:" .. r[1]), rid)
    end
    if r[4] == "running" then
      -- A reopened run waits pending, like a new one; begin makes it
      -- running again.
      redis.call("ZREM", idx("status:running"), rid)
      redis.call("ZADD", idx("status:pending"), r[5], rid)
      redis.call("HSET", rk, "status", "pending")
    end
    redis.call("HSET", rk, "waiting", reason, sp(num(r[2])) .. "task", "", "deadline", "0")
    redis.call("ZADD", idx("waiting:" .. reason), NOWS, rid)
    redis.call("ZREM", idx("active"), rid)
    redis.call("ZREM", idx("deadlines"), rid)
    local pos = redis.call("ZRANK", gate_key(g, "wait"), rid)
    redis.call("XADD", rk .. ":j", "MAXLEN", "~", JOURNAL_MAXLEN, "*", "type", "run_waiting", "at", NOWS,
      "reason", reason, "gate", string.sub(g, 3), "position", int(num(pos) + 1))
    redis.call("XADD", PREFIX .. "notifications", "MAXLEN", "~", "100000", "*", "type", "run_waiting", "at", NOWS,
      "run", rid, "workflow", r[3], "owner", r[6] or "", "reason", reason, "gate", string.sub(g, 3),
      "position", int(num(pos) + 1))
    return int(num(pos) + 1)
  end
  -- run_go lets run rid, which waited and now holds all its gates, start: its
  -- current step gets its task, written to asynq (due now) in this script,
  -- and its deadline counts from now (a compensating run has none: its
  -- compensations undo what it did).
  local function run_go(rid)
    local rk = PREFIX .. "run:" .. rid
    local r = redis.call("HMGET", rk, "current", "workflow", "waiting", "run_timeout_ms", "status")
    local cur, workflow = num(r[1]), r[2]
    local p = sp(cur)
    local s = redis.call("HMGET", rk, p .. "name", p .. "attempt", p .. "gen", p .. "timeout_ms", p .. "run_timeout_ms")
    local gen = num(s[3])
    local id = string.format("%s_s%d_a%d", rid, cur, num(s[2]))
    if gen > 0 then
      id = id .. string.format("_g%d", gen)
    end
    local rt = num(s[5])
    if rt == 0 then
      rt = num(r[4])
    end
    if r[5] == "compensating" then
      rt = 0
    end
    local deadline = 0
    if rt > 0 then
      deadline = NOW + rt
      redis.call("ZADD", idx("deadlines"), int(deadline), rid)
    end
    redis.call("HSET", rk, "waiting", "", p .. "task", id, "deadline_base", NOWS, "deadline", int(deadline),
      "updated_at", NOWS)
    if r[3] and r[3] ~= "" then
      redis.call("ZREM", idx("waiting:" .. r[3]), rid)
    end
    redis.call("ZADD", idx("active"), NOWS, rid)
    redis.call("XADD", rk .. ":j", "MAXLEN", "~", JOURNAL_MAXLEN, "*", "type", "run_admitted", "at", NOWS,
      "task", id)
    put_now(rid, workflow, cur, s[1], s[2], gen, id, s[4])
  end
  -- gate_pass takes run rid through the gates it does not hold yet. Returns
  -- true when it holds them all; else it waits in the line of the first gate
  -- it could not pass (run_wait) and gate_pass returns false, the wait reason
  -- and its position. Runs that other runs' admission lets through start
  -- (run_go); this script's own run (RUN_ID) is left to the caller.
  local function gate_pass(rid)
    local gs, rk = gates_of(rid)
    for i = 1, #gs do
      local g = gs[i]
      if not g[4] then
        local wk = gate_key(g[1], "wait")
        if not redis.call("ZSCORE", wk, rid) then
          redis.call("ZADD", wk, redis.call("HGET", rk, "gate_seq"), rid)
          redis.call("ZADD", idx("gates"), NOWS, g[1])
        end
        local held = false
        local admitted = gate_fill(g[1])
        for j = 1, #admitted do
          if admitted[j] == rid then
            held = true
          elseif gate_pass(admitted[j]) then
            run_go(admitted[j])
          end
        end
        if not held then
          return false, g[5], run_wait(rid, g[5], g[1])
        end
      end
    end
    return true
  end
  -- gate_release gives up the gates run rid holds (all but its ordering key
  -- when keep_key) or the line it waits in, and admits the runs that frees.
  local function gate_release(rid, keep_key)
    local gs, rk = gates_of(rid)
    local waiting = redis.call("HGET", rk, "waiting")
    if waiting and waiting ~= "" then
      redis.call("ZREM", idx("waiting:" .. waiting), rid)
      redis.call("HSET", rk, "waiting", "")
    end
    for i = 1, #gs do
      local g = gs[i]
      if not (keep_key and g[3] == "hold_k") then
        redis.call("ZREM", gate_key(g[1], "wait"), rid)
        if g[4] then
          redis.call("ZREM", gate_key(g[1], "admitted"), rid)
          redis.call("HSET", rk, g[3], "0")
        end
        local admitted = gate_fill(g[1])
        for j = 1, #admitted do
          if gate_pass(admitted[j]) then
            run_go(admitted[j])
          end
        end
        if redis.call("EXISTS", gate_key(g[1], "wait"), gate_key(g[1], "admitted")) == 0 then
          redis.call("ZREM", idx("gates"), g[1])
        end
      end
    end
  end
  if op == "pass" then
    return gate_pass(rid)
  elseif op == "release" then
    return gate_release(rid, arg)
  end
  -- repair: drop the admitted runs that hold no slot any more (ended,
  -- gone), then admit waiting runs while there are free slots.
  local g = arg
  local ak = gate_key(g, "admitted")
  local dropped = 0
  local members = redis.call("ZRANGE", ak, 0, -1)
  for i = 1, #members do
    local m = members[i]
    local gs, rk = gates_of(m)
    local r = redis.call("HMGET", rk, "status", "ord_block")
    local holds = false
    for j = 1, #gs do
      if gs[j][1] == g and gs[j][4] then
        holds = true
      end
    end
    if holds and r[1] and is_terminal(r[1]) then
      -- Only a failed run keeps a slot: its ordering key's, when it blocks it.
      holds = r[1] == "failed" and r[2] == "1" and string.sub(g, 1, 2) == "k:"
    end
    if not r[1] or not holds then
      redis.call("ZREM", ak, m)
      dropped = dropped + 1
    end
  end
  local admitted = gate_fill(g)
  local started = 0
  for j = 1, #admitted do
    if gate_pass(admitted[j]) then
      run_go(admitted[j])
      started = started + 1
    end
  end
  if redis.call("EXISTS", gate_key(g, "wait"), ak) == 0 then
    redis.call("ZREM", idx("gates"), g)
  end
  return dropped, started
end

-- activation returns the field/value pairs that make step idx, whose
-- attempt counter is attempt_before, the run's current step, due now, with a
-- new attempt number and a fresh retry budget; the caller writes them (with
-- its own) and records activity on the run (ZADD IDX.active). Returns the
-- pairs, the task ID (task_id's) and the new attempt number.
-- Like step_deadline below, it captures no local of the script around it
-- (it reads ARGV itself): a closure's creation cost grows with what it
-- captures, and complete.lua, and begin.lua through saga(), include both.
local function activation(idx, attempt_before)
  local attempt = math.floor(tonumber(attempt_before) or 0) + 1
  local id = string.format("%s_s%d_a%d", ARGV[1], idx, attempt)
  local p = string.format("s%d.", idx)
  local w = {p .. "attempt", string.format("%d", attempt), p .. "status", "pending", p .. "task", id,
    "current", string.format("%d", idx), "updated_at", ARGV[3]}
  if attempt > 1 then
    -- A step that never had an attempt still has the values create gave
    -- it (a skip leaves them too); only a step activated before needs
    -- them reset.
    local r = {p .. "budget_base", string.format("%d", attempt - 1), p .. "retry_attempts", "0",
      p .. "retry_state", "none", p .. "next_attempt_at", "0", p .. "gen", "0", p .. "fence", "",
      p .. "fence_expires_at", "0"}
    for i = 1, #r do
      w[#w + 1] = r[i]
    end
  end
  return w, id, attempt
end

-- step_deadline appends to the writes w the run's deadline while a step
-- whose effective run timeout is rt_ms (0 or false: the run's own, run_ms) is
-- current: base (the run's deadline_base: its creation, or a recovery past
-- the deadline) plus that timeout, 0 for none. The most specific run timeout
-- wins: a step may tighten or loosen it. old is the deadline now; when it
-- changes (or old is nil: always), the deadline index follows. (It captures
-- no local, as activation above.)
local function step_deadline(w, base, rt_ms, run_ms, old)
  local rt = tonumber(rt_ms) or 0
  if rt == 0 then
    rt = tonumber(run_ms) or 0
  end
  local d = 0
  if rt > 0 then
    d = (tonumber(base) or 0) + rt
  end
  if old ~= nil and d == (tonumber(old) or 0) then
    return d
  end
  local ds = string.format("%d", math.floor(d))
  w[#w + 1] = "deadline"
  w[#w + 1] = ds
  if d > 0 then
    redis.call("ZADD", ARGV[2] .. "idx:deadlines", ds, ARGV[1])
  else
    redis.call("ZREM", ARGV[2] .. "idx:deadlines", ARGV[1])
  end
  return d
end

-- timeout_limit describes the run timeout in force while step idx is
-- current, for failure reasons: "run_timeout 1500ms".
local function timeout_limit(idx)
  local st_run_timeout_ms = step_get(idx, "run_timeout_ms")[1]
  local ms = num(st_run_timeout_ms)
  if ms == 0 then
    ms = num(redis.call("HGET", RUN, "run_timeout_ms"))
  end
  if ms % 1000 == 0 then
    return string.format("run_timeout %ds", ms / 1000)
  end
  return string.format("run_timeout %dms", ms)
end

-- activate makes step idx the run's current step (see activation) and writes
-- it, with the run's deadline under that step's run timeout. Returns the
-- task ID, the attempt number, the step's name and its timeout (ms).
local function activate(idx)
  local s = step_get(idx, "attempt", "name", "timeout_ms", "run_timeout_ms")
  local st_attempt, st_name, st_timeout_ms, st_run_timeout_ms = s[1], s[2], s[3], s[4]
  local r = redis.call("HMGET", RUN, "deadline_base", "run_timeout_ms", "created_at")
  local run_deadline_base, run_timeout_ms, run_created_at = r[1], r[2], r[3]
  local w, id, attempt = activation(idx, st_attempt)
  step_deadline(w, run_deadline_base or run_created_at, st_run_timeout_ms, run_timeout_ms, nil)
  redis.call("HSET", RUN, unpack(w))
  redis.call("ZADD", IDX.active, NOWS, RUN_ID)
  return id, attempt, st_name, st_timeout_ms
end

-- Circuit breakers. A step whose policy has a circuit breaker carries its
-- spec in the step field "breaker": "name|threshold|window_ms|cooldown_ms|
-- max_cooldown_ms" (names hold no "|"). The breaker, shared by every run and
-- replica of the queue, is the hash breaker:<name>: state ("closed", "open",
-- "half_open"), failures (consecutive transient failures) since
-- window_start, open_until, cooldown (ms, doubled on each failed probe up to
-- the maximum), probe and probe_until (the one attempt let through while
-- half-open, and when its lease ends), opened and deferred (totals), and the
-- spec last seen. idx:breakers lists the breakers by last change.
--
-- breaker(op, spec, who, arg) is one breaker operation; like gate() it
-- captures no local of the script around it (begin.lua and complete.lua
-- include it), so it reads ARGV itself:
--   breaker("admit", spec, who, timeout_ms) (begin): nil when the attempt
--     may start (as the probe when the cooldown is over), else the time (ms)
--     to defer it to;
--   breaker("success", spec, who) (complete): the probe closes the breaker;
--     a success while closed resets the failure count;
--   breaker("failure", spec, who) (fail, transient): counts the failure and
--     opens the breaker at the threshold; a failed probe opens it again with
--     the cooldown doubled;
--   breaker("permanent", spec, who) (fail, permanent): a probe that failed
--     permanently says nothing of the dependency: the next attempt probes;
--   breaker("crashed", spec, who) (begin, redispatch): the same for a probe
--     whose worker died: its resumed attempt, under a new fence token, may
--     probe at once rather than wait out the probe's lease.
-- who identifies the attempt: "<run>:<step index>:<fence token>".
local function breaker(op, spec, who, arg)
  local PREFIX, NOW, NOWS = ARGV[2], tonumber(ARGV[3]), ARGV[3]
  local name, threshold, window, base, maxc = string.match(spec, "^(.*)|(%d+)|(%d+)|(%d+)|(%d+)$")
  if not name then
    return nil
  end
  threshold, window, base, maxc = tonumber(threshold), tonumber(window), tonumber(base), tonumber(maxc)
  local bk = PREFIX .. "breaker:" .. name
  local function int(n)
    return string.format("%d", math.floor(n))
  end
  local function note(typ, ...)
    redis.call("XADD", PREFIX .. "notifications", "MAXLEN", "~", "100000", "*", "type", typ, "at", NOWS,
      "breaker", name, ...)
  end
  local function open(cooldown, why)
    local opened = redis.call("HINCRBY", bk, "opened", 1)
    redis.call("HSET", bk, "state", "open", "open_until", int(NOW + cooldown), "cooldown", int(cooldown),
      "probe", "", "probe_until", "0", "failures", "0", "changed_at", NOWS)
    redis.call("ZADD", PREFIX .. "idx:breakers", NOWS, name)
    note("breaker_opened", "open_until", int(NOW + cooldown), "cooldown_ms", int(cooldown), "reason", why,
      "opened", int(opened))
  end
  local h = redis.call("HMGET", bk, "state", "failures", "window_start", "open_until", "cooldown", "probe",
    "probe_until")
  local state, failures, window_start, open_until = h[1] or "closed", tonumber(h[2]) or 0, tonumber(h[3]) or 0,
    tonumber(h[4]) or 0
  local cooldown, probe, probe_until = tonumber(h[5]) or 0, h[6] or "", tonumber(h[7]) or 0
  if cooldown <= 0 then
    cooldown = base
  end
  if op == "admit" then
    if state == "closed" then
      return nil
    end
    if state == "open" and NOW < open_until then
      redis.call("HINCRBY", bk, "deferred", 1)
      return open_until
    end
    if state == "half_open" and probe ~= "" and probe ~= who and NOW < probe_until then
      redis.call("HINCRBY", bk, "deferred", 1)
      return math.min(probe_until, NOW + cooldown)
    end
    -- The cooldown is over (or the probe's lease ended): this attempt is
    -- the one probe.
    redis.call("HSET", bk, "state", "half_open", "probe", who, "probe_until", int(NOW + (tonumber(arg) or 0) + 60000),
      "changed_at", NOWS)
    redis.call("ZADD", PREFIX .. "idx:breakers", NOWS, name)
    return nil
  elseif op == "success" then
    if state == "half_open" and probe == who then
      redis.call("HSET", bk, "state", "closed", "failures", "0", "window_start", "0", "open_until", "0",
        "cooldown", int(base), "probe", "", "probe_until", "0", "changed_at", NOWS)
      redis.call("ZADD", PREFIX .. "idx:breakers", NOWS, name)
      note("breaker_closed")
    elseif state == "closed" and failures > 0 then
      redis.call("HSET", bk, "failures", "0")
    end
  elseif op == "failure" then
    if state == "half_open" and probe == who then
      open(math.min(cooldown * 2, maxc), "probe failed")
    elseif state == "closed" then
      if NOW - window_start > window then
        failures, window_start = 0, NOW
      end
      failures = failures + 1
      redis.call("HSET", bk, "state", "closed", "failures", int(failures), "window_start", int(window_start),
        "spec", spec)
      redis.call("ZADD", PREFIX .. "idx:breakers", NOWS, name)
      if failures >= threshold then
        open(base, string.format("%d consecutive transient failures", failures))
      end
    end
  elseif op == "permanent" or op == "crashed" then
    if state == "half_open" and probe == who then
      redis.call("HSET", bk, "probe", "", "probe_until", "0")
    end
  end
  return nil
end

-- free_probe gives up the breaker probe slot that the running attempt of
-- step idx may hold, when that attempt stops without an answer from the
-- dependency: handed back (release.lua), or its run cancelled or timed out.
-- (begin.lua and redispatch.lua do the same for a crashed one.)
local function free_probe(idx)
  local s = step_get(idx, "status", "breaker", "fence")
  if s[1] == "running" and s[2] and s[2] ~= "" then
    breaker("crashed", s[2], RUN_ID .. ":" .. int(idx) .. ":" .. (s[3] or ""))
  end
end

-- compact_run rewrites a run that has ended, succeeded or cancelled, in its
-- compact form (definitions.go): it deletes the fixed fields its definition's
-- template holds (create.lua copied them from it; Store.Run fills them back)
-- and every field that holds its default ("" or "0", "none" for a retry
-- state; a step's task ID when it is its attempt 1's, its attempts_started
-- when it is its attempt, its attempt_started_at when it is its started_at;
-- the run's updated_at when it is its finished_at, its deadline_base when
-- it is its created_at: compact.go's fillCompact), and it moves the
-- run's journal into the run hash, so that a short run keeps one small hash,
-- which Redis can store as a listpack (at most 128 fields of at most 64
-- bytes), and no stream. A run of the layout before templates (no def), or
-- whose template is missing, is left as it is. The rewrite drops the hash's
-- expiry: call it before expire_run. rehydrate undoes it when the run is
-- reopened. Like gate(), it uses no local of the script around it.
--
-- The journal moves as Redis's own serialization of the stream (DUMP: its
-- listpack, compressed), cut into fields of 64 bytes, j0, j1, ... (one
-- field when the hash cannot be a listpack anyway), and jn, their number;
-- Store.Journal reads it with journal.lua, which restores it into a
-- temporary key. A journal of more than 64 entries, or a run that has moved
-- its journal before (it was reopened), keeps its stream; so does a store
-- that cannot DUMP a stream (miniredis).
--
-- (What it costs: every value that crosses between Redis and Lua costs some
-- 2,000 instructions, so it reads the hash once, after deleting the fixed
-- fields, and leaves the journal's entries to Redis.)
local function compact_run()
  local rk, rid = KEYS[1], ARGV[1]
  local r = redis.call("HMGET", rk, "def", "steps", "jn", "finished_at", "created_at")
  if not r[1] or not r[2] then
    return
  end
  local fixed = redis.call("HKEYS", ARGV[2] .. "def:" .. r[1])
  if #fixed == 0 then
    return
  end
  for j = 1, #fixed, 1000 do
    redis.call("HDEL", rk, unpack(fixed, j, math.min(j + 999, #fixed)))
  end
  -- The fields a field of the same run gives (derived: they go when they
  -- hold that value, and stay, even "" or "0", when not). A step's empty
  -- task stays: it was never activated, or waited in a gate's line.
  local n = tonumber(r[2]) or 0
  local f = {}
  for i = 0, n - 1 do
    local p = "s" .. i .. "."
    f[#f + 1] = p .. "attempt"
    f[#f + 1] = p .. "started_at"
  end
  local a = {}
  if n > 0 then
    a = redis.call("HMGET", rk, unpack(f))
  end
  local derived = {updated_at = r[4] or "", deadline_base = r[5] or ""}
  local keep = {updated_at = true, deadline_base = true}
  for i = 0, n - 1 do
    local p = "s" .. i .. "."
    derived[p .. "task"] = rid .. "_s" .. i .. "_a1"
    derived[p .. "attempts_started"] = a[2 * i + 1] or "0"
    derived[p .. "attempt_started_at"] = a[2 * i + 2] or "0"
    keep[p .. "task"], keep[p .. "attempts_started"], keep[p .. "attempt_started_at"] = true, true, true
  end
  local h = redis.call("HGETALL", rk)
  local w, gone, nw, ng, big = {}, {}, 0, 0, false
  for i = 1, #h, 2 do
    local k, v = h[i], h[i + 1]
    if derived[k] == v or (not keep[k] and (v == "" or v == "0" or v == "none")) then
      ng = ng + 1
      gone[ng] = k
    else
      w[nw + 1] = k
      w[nw + 2] = v
      nw = nw + 2
      if #v > 64 then
        big = true
      end
    end
  end
  local jk = rk .. ":j"
  local journal = nil
  if not r[3] and redis.call("XLEN", jk) <= 64 then
    journal = redis.pcall("DUMP", jk)
    if type(journal) ~= "string" then
      journal = nil
    end
  end
  local jw = {}
  if journal then
    local size = 64
    if big or nw / 2 + #journal / 64 + 2 > 128 then
      size = #journal
    end
    local c = 0
    for j = 1, #journal, size do
      jw[#jw + 1] = "j" .. c
      jw[#jw + 1] = string.sub(journal, j, j + size - 1)
      c = c + 1
    end
    jw[#jw + 1] = "jn"
    jw[#jw + 1] = tostring(c)
  end
  if big or nw + #jw > 256 then
    -- The hash cannot be a listpack: delete what goes.
    for j = 1, ng, 1000 do
      redis.call("HDEL", rk, unpack(gone, j, math.min(j + 999, ng)))
    end
  else
    -- A new hash (Redis keeps a hash that grew out of a listpack as a hash
    -- table), which is a listpack.
    redis.call("DEL", rk)
    redis.call("HSET", rk, unpack(w))
  end
  if journal then
    redis.call("HSET", rk, unpack(jw))
    redis.call("DEL", jk)
  end
end

-- RUN_DEFAULTS and STEP_DEFAULTS are the fields create.lua gives a new run
-- and each of its steps, with their defaults (field, value, ...): in its
-- seed, or written from arguments; rehydrate gives them back to a compact
-- run.
local RUN_DEFAULTS = {"status", "pending", "owner", "", "idempotency_key", "", "idem_key", "", "iterations", "0",
  "deadline", "0", "started_at", "0", "finished_at", "0", "failure_code", "", "failure_reason", "", "warning", "",
  "needs_attention", "0", "auto_recoveries", "0"}
local STEP_DEFAULTS = {"status", "pending", "attempt", "0", "budget_base", "0", "retry_attempts", "0",
  "retry_state", "none", "next_attempt_at", "0", "attempts_started", "0", "crashes", "0", "gen", "0", "task", "",
  "fence", "", "fence_expires_at", "0", "last_error", "", "last_error_class", "", "output", "", "started_at", "0",
  "finished_at", "0"}

-- rehydrate gives a compact run (compact_run) back the fields it dropped:
-- its template's and, with their defaults, those create.lua gives a run
-- and its steps, as a run that is reopened needs them. (Its journal stays
-- where it is: the entries compact_run moved into the hash come before the
-- stream's.)
local function rehydrate()
  local r = redis.call("HMGET", RUN, "def", "steps", "gated")
  if not r[1] or r[2] then
    return
  end
  local t = redis.call("HGETALL", PREFIX .. "def:" .. r[1])
  local h = redis.call("HGETALL", RUN)
  local m = {}
  for i = 1, #h, 2 do
    m[h[i]] = h[i + 1]
  end
  local w = {}
  local function add(k, v)
    if not m[k] then
      m[k] = v
      w[#w + 1] = k
      w[#w + 1] = v
    end
  end
  for i = 1, #t, 2 do
    add(t[i], t[i + 1])
  end
  local run = {"current", "0"}
  for i = 1, #RUN_DEFAULTS do
    run[#run + 1] = RUN_DEFAULTS[i]
  end
  if r[3] == "1" then
    local g = {"ord_key", "", "ord_limit", "0", "ord_block", "0", "wf_limit", "0", "hold_k", "0", "hold_w", "0",
      "waiting", ""}
    for i = 1, #g do
      run[#run + 1] = g[i]
    end
  end
  for i = 1, #run, 2 do
    add(run[i], run[i + 1])
  end
  add("updated_at", m.finished_at or "0")
  add("deadline_base", m.created_at or "0")
  for i = 0, num(m.steps) - 1 do
    local p = sp(i)
    local a = m[p .. "attempt"] or "0"
    add(p .. "attempts_started", a)
    if m[p .. "started_at"] and m[p .. "started_at"] ~= "0" then
      add(p .. "attempt_started_at", m[p .. "started_at"])
    end
    if a ~= "0" then
      -- (Before the defaults: their empty task is a step never activated.)
      add(p .. "task", task_id(i, num(a), num(m[p .. "gen"])))
    end
    for j = 1, #STEP_DEFAULTS, 2 do
      add(p .. STEP_DEFAULTS[j], STEP_DEFAULTS[j + 1])
    end
  end
  for j = 1, #w, 1000 do
    redis.call("HSET", RUN, unpack(w, j, math.min(j + 999, #w)))
  end
end

-- ---- signals and durable timers (wait.lua, signal.lua) ----

-- MBOX is the run's mailbox (keys.go's mailbox): a stream of the signals it
-- received that no step has consumed yet. Signal IDs already received are
-- fields sig:<id> of the run hash, so they expire and persist with it.
local MBOX = RUN .. ":mbox"

-- unwait takes the run out of the indexes of a waiting step: the waiting
-- index of reason ("signal" or "timer") and the scheduled index (its
-- wake-up).
local function unwait(reason)
  redis.call("ZREM", IDX["waiting:" .. reason], RUN_ID)
  redis.call("ZREM", IDX.scheduled, RUN_ID)
end

-- wait_done ends an await or a sleep, step idx: it succeeds with output
-- (JSON) and the next step becomes current, due now. Returns the next
-- step's index, name, attempt and timeout (ms), as decimal strings (the
-- caller replies with that dispatch, whose task it enqueues), or nil when
-- this was the last step: the run succeeded, and the caller gives it its
-- retention (expire_run).
local function wait_done(idx, output)
  local r = redis.call("HMGET", RUN, "status", "steps", "workflow", "created_at", "deadline_base", "run_timeout_ms",
    "deadline")
  local run_status, run_steps, run_workflow, run_created_at = r[1], r[2], r[3], r[4]
  local run_deadline_base, run_timeout_ms, run_deadline = r[5], r[6], r[7]
  local p = sp(idx)
  local done = {p .. "status", "succeeded", p .. "output", output, p .. "finished_at", NOWS,
    p .. "next_attempt_at", "0"}
  local nxt = idx + 1
  if nxt < num(run_steps) then
    local nx = step_get(nxt, "attempt", "name", "timeout_ms", "run_timeout_ms")
    local nx_attempt, nx_name, nx_timeout_ms, nx_run_timeout_ms = nx[1], nx[2], nx[3], nx[4]
    local w, _, attempt = activation(nxt, nx_attempt)
    step_deadline(w, run_deadline_base or run_created_at, nx_run_timeout_ms, run_timeout_ms, run_deadline)
    for i = 1, #done do
      w[#w + 1] = done[i]
    end
    redis.call("HSET", RUN, unpack(w))
    redis.call("ZADD", IDX.active, NOWS, RUN_ID)
    return int(nxt), nx_name, int(attempt), int(nx_timeout_ms)
  end
  status_move(nil, run_status, "succeeded", run_created_at, unpack(done))
  journal("run_succeeded")
  notify("run_succeeded", run_workflow)
  if redis.call("HGET", RUN, "gated") == "1" then
    gate("release", RUN_ID, false) -- the next runs of its lines start
  end
  return nil
end

-- ---- end of signals and durable timers ----

-- expire_run gives a terminal run's keys their retention. idem is false
-- when the run has no idempotency key (nil: read here). The key's name is
-- the run's idem_key (keys.go's idempotency, scoped by owner), or, for a
-- run created before keys were scoped, idem:<idempotency_key>.
local function expire_run(retention_ms, idem)
  local ms = num(retention_ms)
  if ms <= 0 then
    return
  end
  redis.call("PEXPIRE", RUN, retention_ms)
  redis.call("PEXPIRE", JOURNAL, retention_ms)
  redis.call("PEXPIRE", RUN .. ":mbox", retention_ms) -- the mailbox (signals)
  if idem == false then
    return
  end
  local r = redis.call("HMGET", RUN, "idem_key", "idempotency_key")
  local run_idem_key, run_idempotency_key = r[1], r[2]
  if run_idem_key and run_idem_key ~= "" then
    redis.call("PEXPIRE", PREFIX .. run_idem_key, retention_ms)
  elseif run_idempotency_key and run_idempotency_key ~= "" then
    redis.call("PEXPIRE", PREFIX .. "idem:" .. run_idempotency_key, retention_ms)
  end
end

-- ---- compensations and step groups (sagas) ----
--
-- The compensation of step i is the step record COMP_BASE + i (fields
-- s<1000+i>.*, task IDs <run>_s<1000+i>_a<n>), so begin, fail, release,
-- snooze, redispatch and the reconciler treat its attempts as any step's;
-- compdone.lua is its complete. (A workflow has at most 1000 steps.)
-- create.lua writes its name ("compensate:<step>"), policy, budgets and
-- breaker, and comp = "1" on step i. A run with compensations or groups has
-- sagas = "1", and on_failure = "compensate" for a saga; a grouped step has
-- group (the group's name) and group_opt ("1": the group is optional).
--
-- While compensations run, the run is "compensating", with no deadline, and
-- its current step is the compensation running; its fields say what the
-- compensations undo and what comes next: comp_lo (the lowest step index to
-- compensate), comp_end ("compensated": the run ends so; "failed": it fails,
-- after a required group's rollback under on_failure stop; "continue": an
-- optional group was rolled back and the run goes on after it, at comp_hi +
-- 1), comp_step (the step that failed), comp_group, and comp_code and
-- comp_reason (the failure, also the run's failure_code and
-- failure_reason). They stay while a compensation that failed for good
-- waits for an operator, and go when the saga ends.
local COMP_BASE = 1000

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
          gate("release", RUN_ID, false)
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
          gate("release", RUN_ID, false)
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
      put_now(RUN_ID, workflow, nxt, s[2], attempt, 0, id, s[3])
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
          redis.call("ZADD", IDX.active, NOWS, RUN_ID)
          journal("compensation_started", "step", s[3], "attempt", int(attempt), "task", id)
          put_now(RUN_ID, r[2], c, cs[2], attempt, 0, id, cs[3])
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
        redis.call("ZREM", IDX[leave[i]], RUN_ID)
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
  redis.call("ZADD", IDX.attention, NOWS, RUN_ID)
  -- A gated run frees its slots, but keeps its ordering key's when its
  -- workflow says on_failure: block: the key's next runs wait until this
  -- one is recovered to success, skipped through or cancelled, and it is
  -- kept (no retention) until then.
  local block = false
  if redis.call("HGET", RUN, "gated") == "1" then
    local g = redis.call("HMGET", RUN, "ord_block", "hold_k")
    block = g[1] == "1" and g[2] == "1"
    gate("release", RUN_ID, block)
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

-- ---- end of sagas ----

-- reopen makes a failed, cancelled or succeeded run (status) live again for
-- an operator (recover, retry, skip, restore): pending if it never started,
-- else running (or to, when given: a compensation's recover makes the run
-- compensating); no failure, attention or expiry; a fresh iteration count
-- and auto-recovery count; and, when its deadline has passed, a deadline
-- that starts afresh from now (activate sets the deadline of the step the
-- run resumes at). Returns the new status.
local function reopen(status, to)
  local r = redis.call("HMGET", RUN, "started_at", "deadline", "idempotency_key", "idem_key")
  local run_started_at, run_deadline, run_idempotency_key, run_idem_key = r[1], r[2], r[3], r[4]
  if not to then
    to = "running"
    if num(run_started_at) == 0 then
      to = "pending"
    end
  end
  set_status(status, to, nil, "needs_attention", "0", "failure_code", "", "failure_reason", "", "attention_reason", "",
    "finished_at", "0", "auto_recoveries", "0", "iterations", "0", "warning", "")
  redis.call("ZREM", IDX.attention, RUN_ID)
  redis.call("PERSIST", RUN)
  redis.call("PERSIST", JOURNAL)
  if run_idem_key and run_idem_key ~= "" then
    redis.call("PERSIST", PREFIX .. run_idem_key)
  elseif run_idempotency_key and run_idempotency_key ~= "" then
    redis.call("PERSIST", PREFIX .. "idem:" .. run_idempotency_key) -- a run from before keys were scoped by owner
  end
  local deadline = num(run_deadline)
  if deadline > 0 and deadline <= NOW then
    redis.call("HSET", RUN, "deadline_base", NOWS)
  end
  return to
end

-- auto_repair counts one automatic repair of the run. Past max_auto repairs
-- it marks the run as needing attention instead, so the reconciler leaves it
-- to an operator rather than loop, and returns false and the reason.
local function auto_repair(max_auto, kind)
  local n = redis.call("HINCRBY", RUN, "auto_recoveries", "1")
  if n <= num(max_auto) then
    return true, ""
  end
  local reason = string.format("repaired automatically %d times (max_auto_recoveries %d); left for an operator (last: %s)",
    n - 1, num(max_auto), kind)
  redis.call("HSET", RUN, "needs_attention", "1", "attention_reason", reason)
  redis.call("ZADD", IDX.attention, NOWS, RUN_ID)
  redis.call("ZREM", IDX.fences, RUN_ID)
  journal("needs_attention", "code", "auto_recovery_exhausted", "reason", reason)
  notify("run_needs_attention", redis.call("HGET", RUN, "workflow"), "code", "auto_recovery_exhausted", "reason", reason)
  return false, reason
end
