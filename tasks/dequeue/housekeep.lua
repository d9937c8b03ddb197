-- housekeep.lua (Dequeuer.Housekeep): what a worker on Cairn's own dequeue
-- does every second in one call, in place of the asynq server it no longer
-- runs:
--   1. its heartbeat: its entry in cairn:{q}:fetchers scores the time its
--      claim list is trusted until (Unix ms); with fields, its record
--      cairn:{q}:worker:<worker> (what the Workers page shows) is written
--      and expires with the heartbeat's TTL;
--   2. the claim lists of workers whose heartbeat ended (killed between
--      their BLMOVE and their take) go back to the right end of pending,
--      IDs whose record is gone dropped, and the worker leaves the set
--      (its record goes too);
--   3. asynq's forwarder, as a fallback of the promoter (promote.lua): due
--      scheduled and retry tasks (whole seconds, at most 100 of each, a
--      retry a second after its score, so never early) move to pending (a
--      task of a group to its group, as asynq does);
--   4. asynq's janitor: completed tasks past their retention are deleted
--      (at most 100);
--   5. asynq's recoverer's query: the messages of active tasks whose lease
--      ended before the cutoff, for the caller to retry or archive.
-- KEYS: cairn:{q}:fetchers, asynq:{q}:pending, asynq:{q}:scheduled,
-- asynq:{q}:retry, asynq:{q}:completed, asynq:{q}:lease. ARGV: worker,
-- now_ms, heartbeat expiry (Unix ms), now (Unix s), lease cutoff (Unix s),
-- task_prefix (asynq:{q}:t:), claim_prefix (cairn:{q}:claim:),
-- group_prefix (asynq:{q}:g:), record_prefix (cairn:{q}:worker:), record
-- TTL (ms), then the record's fields and values (none: no record).
-- Returns {claimed IDs handed back, tasks forwarded, completed tasks
-- deleted, expired message...}.
local fetchers, pending, scheduled, retry, completed, lease = unpack(KEYS)
local worker, now_ms, expiry, now, cutoff, task_prefix, claim_prefix, group_prefix, record_prefix, record_ttl =
  unpack(ARGV, 1, 10)
if worker ~= "" then
  redis.call("ZADD", fetchers, expiry, worker)
  if #ARGV > 10 then
    local record = record_prefix .. worker
    redis.call("HSET", record, unpack(ARGV, 11))
    redis.call("PEXPIRE", record, record_ttl)
  end
end
local handed = 0
local dead = redis.call("ZRANGEBYSCORE", fetchers, "-inf", "(" .. now_ms, "LIMIT", 0, 10)
for _, w in ipairs(dead) do
  local claim = claim_prefix .. w
  local ids = redis.call("LRANGE", claim, 0, -1)
  -- The oldest claim is the list's last: pushed back last, it is taken first.
  for _, id in ipairs(ids) do
    if redis.call("EXISTS", task_prefix .. id) == 1 then
      redis.call("RPUSH", pending, id)
      redis.call("HSET", task_prefix .. id, "state", "pending")
      handed = handed + 1
    end
  end
  redis.call("DEL", claim, record_prefix .. w)
  redis.call("ZREM", fetchers, w)
end
local forwarded = 0
local since = now .. "000000000"
-- A retry's score is its due time rounded down (asynq's Retry): forwarded
-- once the next second began, it is never early (the promoter moves it at
-- its millisecond anyway); a schedule's is rounded up.
for set, upto in pairs({[scheduled] = tonumber(now), [retry] = tonumber(now) - 1}) do
  local ids = redis.call("ZRANGEBYSCORE", set, "-inf", upto, "LIMIT", 0, 100)
  for _, id in ipairs(ids) do
    local key = task_prefix .. id
    local group = redis.call("HGET", key, "group")
    if group and group ~= "" then
      redis.call("ZADD", group_prefix .. group, now, id)
      redis.call("ZREM", set, id)
      redis.call("HSET", key, "state", "aggregating")
    else
      redis.call("LPUSH", pending, id)
      redis.call("ZREM", set, id)
      redis.call("HSET", key, "state", "pending", "pending_since", since)
    end
    forwarded = forwarded + 1
  end
end
local deleted = 0
local done = redis.call("ZRANGEBYSCORE", completed, "-inf", now, "LIMIT", 0, 100)
for _, id in ipairs(done) do
  redis.call("DEL", task_prefix .. id)
  redis.call("ZREM", completed, id)
  deleted = deleted + 1
end
local res = {handed, forwarded, deleted}
local expired = redis.call("ZRANGEBYSCORE", lease, "-inf", cutoff, "LIMIT", 0, 100)
for _, id in ipairs(expired) do
  local msg = redis.call("HGET", task_prefix .. id, "msg")
  if msg then
    res[#res + 1] = msg
  end
end
return res
