-- needs: put_now, task_id
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
-- gates() builds the gate functions and returns them, by name:
--   admit(rid): takes run rid through its gates (admit below);
--   release(rid, keep_key): run rid gives up its slots (release below);
--   repair(g): the reconciler's repair of gate g (repair below, gate.lua).
-- A script calls it when it needs one, gates().release(RUN_ID, false), so
-- that only a gated run's call creates them: every local function of a
-- script is a closure made on each of its calls, and the hot path's
-- complete.lua includes this one (so a run without a gate pays for one
-- closure, gates itself).
local function gates()
  -- gates uses no local of the script around it: a closure's cost grows
  -- with the locals it captures, and begin.lua and complete.lua include
  -- this one on every call. It reads the run-level arguments itself
  -- (lua/README.md) and has its own copies of the few helpers it needs.
  local _, PREFIX, NOWS = unpack(ARGV, 1, 3)
  local NOW = tonumber(NOWS)
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
  -- fill admits the heads of gate g's line while it has free slots; a
  -- head whose run ended or is gone leaves the line. Returns the run IDs
  -- admitted: each holds g now and must still pass its later gates.
  local function fill(g)
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
    local id = task_id(rid, cur, num(s[2]), gen)
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
    -- (The queue's name is in the prefix, cairn:{<queue>}:.)
    put_now(string.sub(PREFIX, 8, -3), NOWS, rid, workflow, cur, s[1], s[2], gen, id, s[4])
  end
  -- admit takes run rid through the gates it does not hold yet. Returns
  -- true when it holds them all; else it waits in the line of the first gate
  -- it could not pass (run_wait) and admit returns false, the wait reason
  -- and its position. Runs that other runs' admission lets through start
  -- (run_go); this script's own run (RUN_ID) is left to the caller.
  local function admit(rid)
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
        local admitted = fill(g[1])
        for j = 1, #admitted do
          if admitted[j] == rid then
            held = true
          elseif admit(admitted[j]) then
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
  -- release gives up the gates run rid holds (all but its ordering key
  -- when keep_key) or the line it waits in, and admits the runs that frees.
  local function release(rid, keep_key)
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
        local admitted = fill(g[1])
        for j = 1, #admitted do
          if admit(admitted[j]) then
            run_go(admitted[j])
          end
        end
        if redis.call("EXISTS", gate_key(g[1], "wait"), gate_key(g[1], "admitted")) == 0 then
          redis.call("ZREM", idx("gates"), g[1])
        end
      end
    end
  end
  -- repair drops the admitted runs of gate g that hold no slot any more
  -- (ended, gone), then admits waiting runs while there are free slots.
  -- Returns the runs dropped and the runs started.
  local function repair(g)
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
    local admitted = fill(g)
    local started = 0
    for j = 1, #admitted do
      if admit(admitted[j]) then
        run_go(admitted[j])
        started = started + 1
      end
    end
    if redis.call("EXISTS", gate_key(g, "wait"), ak) == 0 then
      redis.call("ZREM", idx("gates"), g)
    end
    return dropped, started
  end
  return {admit = admit, release = release, repair = repair}
end
