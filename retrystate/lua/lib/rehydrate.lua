-- needs: RUN_DEFAULTS, STEP_DEFAULTS, num, sp, task_id
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
      add(p .. "task", task_id(RUN_ID, i, num(a), num(m[p .. "gen"])))
    end
    for j = 1, #STEP_DEFAULTS, 2 do
      add(p .. STEP_DEFAULTS[j], STEP_DEFAULTS[j + 1])
    end
  end
  for j = 1, #w, 1000 do
    redis.call("HSET", RUN, unpack(w, j, math.min(j + 999, #w)))
  end
end
