-- take_next.lua (Dequeuer.TakeNext): asynq v0.26's dequeue as it is
-- (rdb.go, dequeueCmd), for a worker that found work at its last look: the
-- oldest pending task (the right end) moves straight to asynq's active
-- list, its state becomes active (pending_since goes), its lease is set,
-- and its message is returned; one call where a blocked fetch takes two,
-- with nothing between them for a crash to leave behind. On a paused queue
-- "paused" is answered and nothing moves; on an empty one "empty"; a task
-- whose record was deleted leaves the list ("missing").
-- KEYS: asynq:{q}:pending, asynq:{q}:paused, asynq:{q}:active,
-- asynq:{q}:lease. ARGV: task_prefix (asynq:{q}:t:), lease expiry (Unix
-- seconds).
local pending, paused, active, lease = unpack(KEYS)
local task_prefix, expiry = unpack(ARGV)
if redis.call("EXISTS", paused) == 1 then
  return {"paused"}
end
local id = redis.call("RPOP", pending)
if not id then
  return {"empty"}
end
local msg = task_take(active, lease, task_prefix .. id, id, expiry)
if not msg then
  return {"missing"}
end
return {"ok", msg}
