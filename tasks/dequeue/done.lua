-- done.lua (Dequeuer.Done): asynq v0.26's Done, or its MarkAsComplete for a
-- message with a retention (rdb.go doneCmd, doneUniqueCmd,
-- markAsCompleteCmd): the task leaves the active list and the lease set;
-- its record is deleted, or kept as completed until its retention ends;
-- the queue's processed counters (the day's, expiring with asynq's stats,
-- and the total) count it; a uniqueness lock it holds is released. A task
-- not in the active list or the lease set (asynq's recoverer took it) is
-- an error, as in asynq.
-- KEYS: asynq:{q}:active, asynq:{q}:lease, the task's record,
-- asynq:{q}:processed:<day>, asynq:{q}:processed, asynq:{q}:completed, and
-- the uniqueness lock when the message has one. ARGV: id, the stats'
-- expiry (Unix s), the completed task's expiry (Unix s; "0": no retention,
-- delete the record), the message with its completion time.
local active, lease, task, day, total, completed, unique = unpack(KEYS)
local id, stats_expiry, keep_until, msg = unpack(ARGV)
if redis.call("LREM", active, 0, id) == 0 then
  return redis.error_reply("NOT FOUND")
end
if redis.call("ZREM", lease, id) == 0 then
  return redis.error_reply("NOT FOUND")
end
if keep_until == "0" then
  if redis.call("DEL", task) == 0 then
    return redis.error_reply("NOT FOUND")
  end
else
  redis.call("ZADD", completed, keep_until, id)
  redis.call("HSET", task, "msg", msg, "state", "completed")
end
if redis.call("INCR", day) == 1 then
  redis.call("EXPIREAT", day, stats_expiry)
end
redis.call("INCR", total)
if unique and redis.call("GET", unique) == id then
  redis.call("DEL", unique)
end
return redis.status_reply("OK")
