-- take.lua (Dequeuer.Take): the second half of Cairn's own dequeue. The
-- fetcher's BLMOVE moved task id from asynq's pending list to the worker's
-- claim list; this does what asynq v0.26's dequeue does for it (rdb.go,
-- dequeueCmd): the ID moves to asynq's active list, the record's state
-- becomes active (pending_since goes), the lease is set, and the message is
-- returned. On a paused queue (asynq's paused key) the ID goes back to the
-- right end of pending, where asynq takes from, and "paused" is answered.
-- An ID no longer in the claim list (a sweep handed it back) answers
-- "gone"; a task whose record was deleted only leaves the claim list
-- ("missing").
-- KEYS: the claim list, asynq:{q}:active, asynq:{q}:lease, asynq:{q}:paused,
-- asynq:{q}:pending. ARGV: id, task_prefix (asynq:{q}:t:), lease expiry
-- (Unix seconds).
local claim, active, lease, paused, pending = unpack(KEYS)
local id, task_prefix, expiry = unpack(ARGV)
if redis.call("EXISTS", paused) == 1 then
  if redis.call("LREM", claim, 1, id) == 1 then
    redis.call("RPUSH", pending, id)
  end
  return {"paused"}
end
if redis.call("LREM", claim, 1, id) == 0 then
  return {"gone"}
end
local msg = task_take(active, lease, task_prefix .. id, id, expiry)
if not msg then
  return {"missing"}
end
return {"ok", msg}
