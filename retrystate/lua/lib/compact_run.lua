-- needs: COMP_BASE, task_id
-- compact_run rewrites a run that has ended, succeeded or cancelled, in its
-- compact form (definitions.go): it deletes the fixed fields its definition's
-- template holds (create.lua copied them from it; Store.Run fills them back)
-- and every field that holds its default ("", or "0" or "none" but in a
-- field of text its caller chose, TEXT_*_FIELDS; a step's task ID when it is its attempt 1's, its attempts_started
-- when it is its attempt, its attempt_started_at when it is its started_at;
-- the run's updated_at when it is its finished_at, its deadline_base when
-- it is its created_at: compact.go's fillCompact), and it moves the
-- run's journal into the run hash, so that a short run keeps one small hash,
-- which Redis can store as a listpack (at most 128 fields of at most 64
-- bytes), and no stream. A run of the layout before templates (no def), or
-- whose template is missing, is left as it is. The rewrite drops the hash's
-- expiry: call it before expire_run. rehydrate undoes it when the run is
-- reopened. Like gates(), it uses no local of the script around it (it reads
-- the run-level arguments itself).
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
  local RUN = unpack(KEYS)
  local RUN_ID, PREFIX = unpack(ARGV, 1, 2)
  local r = redis.call("HMGET", RUN, "def", "steps", "jn", "finished_at", "created_at", "sagas")
  if not r[1] or not r[2] then
    return
  end
  local fixed = redis.call("HKEYS", PREFIX .. "def:" .. r[1])
  if #fixed == 0 then
    return
  end
  for j = 1, #fixed, 1000 do
    redis.call("HDEL", RUN, unpack(fixed, j, math.min(j + 999, #fixed)))
  end
  -- The fields a field of the same run gives (derived: they go when they
  -- hold that value, and stay, even "" or "0", when not). A step's empty
  -- task stays: it was never activated, or waited in a gate's line.
  local n = tonumber(r[2]) or 0
  -- TEXT_RUN_FIELDS and TEXT_STEP_FIELDS are the fields of the run and of
  -- each step (and compensation) that hold text its caller chose: an input, an
  -- output, an error, a reason. A "0" or a "none" there is a value, which
  -- stays; in any other field it is the default, which goes.
  local TEXT_RUN_FIELDS = {"workflow", "input", "owner", "idempotency_key", "idem_key", "failure_code", "failure_reason",
    "warning", "attention_reason", "ord_key"}
  local TEXT_STEP_FIELDS = {"output", "last_error", "last_error_code"}
  local f = {}
  for i = 0, n - 1 do
    local p = "s" .. i .. "."
    f[#f + 1] = p .. "attempt"
    f[#f + 1] = p .. "started_at"
  end
  local a = {}
  if n > 0 then
    a = redis.call("HMGET", RUN, unpack(f))
  end
  local derived = {updated_at = r[4] or "", deadline_base = r[5] or ""}
  local keep = {updated_at = true, deadline_base = true}
  -- A journal moved before (a restored run that ends again) keeps its
  -- chunks, whatever bytes they hold.
  if r[3] then
    keep.jn = true
    for i = 0, (tonumber(r[3]) or 0) - 1 do
      keep["j" .. i] = true
    end
  end
  local text = {}
  for i = 1, #TEXT_RUN_FIELDS do
    text[TEXT_RUN_FIELDS[i]] = true
  end
  local last = n - 1
  if r[6] == "1" then
    last = 2 * n - 1 -- and the compensations', s<COMP_BASE + i>.
  end
  for k = 0, last do
    local p = "s" .. k .. "."
    if k >= n then
      p = "s" .. (COMP_BASE + k - n) .. "."
    end
    for j = 1, #TEXT_STEP_FIELDS do
      text[p .. TEXT_STEP_FIELDS[j]] = true
    end
  end
  for i = 0, n - 1 do
    local p = "s" .. i .. "."
    derived[p .. "task"] = task_id(RUN_ID, i, 1)
    derived[p .. "attempts_started"] = a[2 * i + 1] or "0"
    derived[p .. "attempt_started_at"] = a[2 * i + 2] or "0"
    keep[p .. "task"], keep[p .. "attempts_started"], keep[p .. "attempt_started_at"] = true, true, true
  end
  local h = redis.call("HGETALL", RUN)
  local w, gone, nw, ng, big = {}, {}, 0, 0, false
  for i = 1, #h, 2 do
    local k, v = h[i], h[i + 1]
    if derived[k] == v or (not keep[k] and (v == "" or ((v == "0" or v == "none") and not text[k]))) then
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
  local jk = RUN .. ":j"
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
      redis.call("HDEL", RUN, unpack(gone, j, math.min(j + 999, ng)))
    end
  else
    -- A new hash (Redis keeps a hash that grew out of a listpack as a hash
    -- table), which is a listpack.
    redis.call("DEL", RUN)
    redis.call("HSET", RUN, unpack(w))
  end
  if journal then
    redis.call("HSET", RUN, unpack(jw))
    redis.call("DEL", jk)
  end
end
