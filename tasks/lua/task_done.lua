-- task_done acknowledges task id, whose handler succeeded, as asynq v0.26's
-- Done, or its MarkAsComplete for a message with a retention (rdb.go
-- doneCmd, doneUniqueCmd, markAsCompleteCmd): the task leaves the active
-- list and the lease set; its record is deleted, or kept as completed
-- until keep_until (Unix s; "0": no retention) with msg, the message with
-- its completion time; the queue's processed counters count it (the day's,
-- which expires at stats_expiry, Unix s, and the total); a uniqueness lock
-- it holds is released. It returns false, as asynq answers NOT FOUND, when
-- the task is not in the active list (nothing changed), not in the lease
-- set, or has no record. The keys are asynq:{q}:active, asynq:{q}:lease,
-- the task's record asynq:{q}:t:<id>, asynq:{q}:processed:<day>,
-- asynq:{q}:processed, asynq:{q}:completed, and the uniqueness lock (nil
-- for none). Dequeuer.Done runs it alone (dequeue/done.lua); complete.lua
-- runs it with the step's checkpoint, so that the checkpoint and the
-- acknowledgement of the task that ran it take one round trip.
local function task_done(active, lease, task, day, total, completed, unique, id, stats_expiry, keep_until, msg)
  if redis.call("LREM", active, 0, id) == 0 then
    return false
  end
  if redis.call("ZREM", lease, id) == 0 then
    return false
  end
  if keep_until == "0" then
    if redis.call("DEL", task) == 0 then
      return false
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
  return true
end
