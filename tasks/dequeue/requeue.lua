-- requeue.lua (Dequeuer.Requeue): asynq v0.26's Requeue (rdb.go
-- requeueCmd), what a shutting-down asynq server does with a task still
-- running: it leaves the active list and the lease set for the right end
-- of pending (the next to be taken), state pending.
-- KEYS: asynq:{q}:active, asynq:{q}:lease, asynq:{q}:pending, the task's
-- record. ARGV: id.
local active, lease, pending, task = unpack(KEYS)
local id = ARGV[1]
if redis.call("LREM", active, 0, id) == 0 then
  return redis.error_reply("NOT FOUND")
end
if redis.call("ZREM", lease, id) == 0 then
  return redis.error_reply("NOT FOUND")
end
redis.call("RPUSH", pending, id)
redis.call("HSET", task, "state", "pending")
return redis.status_reply("OK")
