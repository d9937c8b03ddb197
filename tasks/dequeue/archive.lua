-- archive.lua (Dequeuer.Archive): asynq v0.26's Archive (rdb.go
-- archiveCmd): the task leaves the active list and the lease set for
-- asynq's archive, with its message updated (error, time of failure) and
-- state archived; the archive is trimmed as asynq trims it (tasks archived
-- before the cutoff, and the oldest past max_size); the processed and
-- failed counters count it.
-- KEYS: the task's record, asynq:{q}:active, asynq:{q}:lease,
-- asynq:{q}:archived, asynq:{q}:processed:<day>, asynq:{q}:failed:<day>,
-- asynq:{q}:processed, asynq:{q}:failed. ARGV: id, msg, now (Unix s),
-- cutoff (Unix s), max_size, the stats' expiry (Unix s), task_prefix.
local task, active, lease, archived, pday, fday, ptotal, ftotal = unpack(KEYS)
local id, msg, now, cutoff, max_size, stats_expiry, task_prefix = unpack(ARGV)
if redis.call("LREM", active, 0, id) == 0 then
  return redis.error_reply("NOT FOUND")
end
if redis.call("ZREM", lease, id) == 0 then
  return redis.error_reply("NOT FOUND")
end
redis.call("ZADD", archived, now, id)
local old = redis.call("ZRANGE", archived, "-inf", cutoff, "BYSCORE")
if #old > 0 then
  for _, o in ipairs(old) do
    redis.call("DEL", task_prefix .. o)
  end
  redis.call("ZREM", archived, unpack(old))
end
local extra = redis.call("ZRANGE", archived, 0, -tonumber(max_size))
if #extra > 0 then
  for _, o in ipairs(extra) do
    redis.call("DEL", task_prefix .. o)
  end
  redis.call("ZREM", archived, unpack(extra))
end
redis.call("HSET", task, "msg", msg, "state", "archived")
if redis.call("INCR", pday) == 1 then
  redis.call("EXPIREAT", pday, stats_expiry)
end
if redis.call("INCR", fday) == 1 then
  redis.call("EXPIREAT", fday, stats_expiry)
end
redis.call("INCR", ptotal)
redis.call("INCR", ftotal)
return redis.status_reply("OK")
