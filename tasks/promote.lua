-- promote.lua (PromoteDue, timers.go): moves the tasks that Cairn's timers
-- index (put_task, put_now) holds as due at or before upto (Unix ms), at
-- most limit of them, from asynq's scheduled set (or its retry set, where
-- Cairn's own dequeue retries a task: retry.lua) to its pending list, as
-- asynq's forwarder would at the whole second: state pending, pending_since
-- now (Unix ms as a decimal string) in ns. A task that is no longer
-- scheduled nor retried (asynq's forwarder moved it first, an operator ran
-- or deleted it) only leaves the index. An entry due after upto stays.
-- KEYS: the timers index cairn:{q}:timers, asynq:{q}:scheduled,
-- asynq:{q}:pending, asynq:{q}:retry. ARGV: task_prefix (asynq:{q}:t:,
-- Keys.Task("")), now, upto, limit.
-- Returns {moved, read, next}: the tasks moved, the index entries read
-- (limit of them: more may be due) and the earliest due time left in the
-- index (Unix ms, "" when it is empty).
local timers, scheduled, pending, retry = unpack(KEYS)
local task_prefix, now, upto, limit = unpack(ARGV)
local ids = redis.call("ZRANGEBYSCORE", timers, "-inf", upto, "LIMIT", 0, limit)
local moved = 0
if #ids > 0 then
  local since = now .. "000000"
  for i = 1, #ids do
    local id = ids[i]
    local take = redis.call("ZREM", scheduled, id) == 1
    if not take then
      -- A retry is taken only when it is due by upto's whole second: an
      -- index entry older than the task's retry (a schedule asynq's
      -- forwarder moved) must not take it early.
      local s = redis.call("ZSCORE", retry, id)
      take = s and tonumber(s) <= math.floor(tonumber(upto) / 1000) and redis.call("ZREM", retry, id) == 1
    end
    if take then
      redis.call("LPUSH", pending, id)
      redis.call("HSET", task_prefix .. id, "state", "pending", "pending_since", since)
      moved = moved + 1
    end
  end
  redis.call("ZREM", timers, unpack(ids))
end
local nxt = redis.call("ZRANGE", timers, 0, 0, "WITHSCORES")
return {moved, #ids, nxt[2] or ""}
