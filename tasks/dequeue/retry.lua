-- retry.lua (Dequeuer.Retry): asynq v0.26's Retry (rdb.go retryCmd): the
-- task leaves the active list and the lease set for asynq's retry set, due
-- at retry_at in whole seconds (as asynq writes it), with its message
-- updated (retried count, error, time of failure) and state retry; the
-- processed and failed counters count it when it is a failure. It is also
-- indexed in Cairn's timers index at its millisecond, so that a promoter
-- moves it when due rather than at asynq's next forward (promote.lua).
-- KEYS: the task's record, asynq:{q}:active, asynq:{q}:lease,
-- asynq:{q}:retry, asynq:{q}:processed:<day>, asynq:{q}:failed:<day>,
-- asynq:{q}:processed, asynq:{q}:failed, cairn:{q}:timers. ARGV: id, msg,
-- retry_at (Unix s), retry_at_ms (Unix ms), the stats' expiry (Unix s),
-- is_failure ("1" or "0").
local task, active, lease, retry, pday, fday, ptotal, ftotal, timers = unpack(KEYS)
local id, msg, retry_at, retry_at_ms, stats_expiry, is_failure = unpack(ARGV)
if redis.call("LREM", active, 0, id) == 0 then
  return redis.error_reply("NOT FOUND")
end
if redis.call("ZREM", lease, id) == 0 then
  return redis.error_reply("NOT FOUND")
end
redis.call("ZADD", retry, retry_at, id)
redis.call("HSET", task, "msg", msg, "state", "retry")
redis.call("ZADD", timers, retry_at_ms, id)
if is_failure == "1" then
  if redis.call("INCR", pday) == 1 then
    redis.call("EXPIREAT", pday, stats_expiry)
  end
  if redis.call("INCR", fday) == 1 then
    redis.call("EXPIREAT", fday, stats_expiry)
  end
  redis.call("INCR", ptotal)
  redis.call("INCR", ftotal)
end
return redis.status_reply("OK")
