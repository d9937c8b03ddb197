-- leave.lua (Dequeuer.Leave): a worker's clean exit from Cairn's own
-- dequeue: the IDs left in its claim list go back to the right end of
-- pending (IDs whose record is gone dropped), the list is deleted, the
-- worker leaves cairn:{q}:fetchers and its record (cairn:{q}:worker:<id>)
-- is deleted.
-- KEYS: cairn:{q}:fetchers, the claim list, asynq:{q}:pending, the worker's
-- record. ARGV: worker, task_prefix (asynq:{q}:t:).
local fetchers, claim, pending, record = unpack(KEYS)
local worker, task_prefix = unpack(ARGV)
local ids = redis.call("LRANGE", claim, 0, -1)
for _, id in ipairs(ids) do
  if redis.call("EXISTS", task_prefix .. id) == 1 then
    redis.call("RPUSH", pending, id)
    redis.call("HSET", task_prefix .. id, "state", "pending")
  end
end
redis.call("DEL", claim, record)
redis.call("ZREM", fetchers, worker)
return #ids
