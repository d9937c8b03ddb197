-- put_now writes to asynq, pending (due now), the task id of step idx
-- (name, attempt, gen, timeout_ms) of run rid of workflow, in queue, as
-- asynq's enqueue would (tasks/asynqwire.go), now being Unix ms (a decimal
-- string: it is written as is): the task that continues a run, written by
-- the script that changes the run (gate admission, compensations). Given
-- due_ms (Unix ms) after now, the task is scheduled instead, for due_ms
-- rounded up to the whole second, as asynq's schedule would, and indexed
-- for due_ms in Cairn's timers index (put_task; the
-- reconciler's repair of a retry or wake-up, repair.lua). It encodes the
-- message itself: tasks.Step.AsynqMessage in Lua, which tasks.CheckAsynqWire
-- compares with asynq's own client's at every worker's start (as do
-- TestGateAdmissionWritesAsynqTask and TestRepairedTaskMatchesAsynq, byte
-- for byte against Go's, in the scripts that call it).
local function put_now(queue, now, rid, workflow, idx, name, attempt, gen, id, timeout_ms, due_ms)
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
  if due > tonumber(now) then
    redis.call("HSET", "asynq:{" .. queue .. "}:t:" .. id, "msg", msg, "state", "scheduled")
    redis.call("ZADD", "asynq:{" .. queue .. "}:scheduled", string.format("%d", math.floor((due + 999) / 1000)), id)
    redis.call("ZADD", "cairn:{" .. queue .. "}:timers", string.format("%d", due), id)
    return
  end
  redis.call("HSET", "asynq:{" .. queue .. "}:t:" .. id, "msg", msg, "state", "pending", "pending_since",
    now .. "000000")
  redis.call("LPUSH", "asynq:{" .. queue .. "}:pending", id)
end
