-- done.lua (Dequeuer.Done): asynq v0.26's Done, or its MarkAsComplete for a
-- message with a retention: task_done (lua/task_done.lua, put in front of
-- this script), with asynq's "NOT FOUND" error when the task is not active.
-- KEYS: asynq:{q}:active, asynq:{q}:lease, the task's record,
-- asynq:{q}:processed:<day>, asynq:{q}:processed, asynq:{q}:completed, and
-- the uniqueness lock when the message has one. ARGV: id, the stats'
-- expiry (Unix s), the completed task's expiry (Unix s; "0": no retention,
-- delete the record), the message with its completion time.
local active, lease, task, day, total, completed, unique = unpack(KEYS)
local id, stats_expiry, keep_until, msg = unpack(ARGV)
if not task_done(active, lease, task, day, total, completed, unique, id, stats_expiry, keep_until, msg) then
  return redis.error_reply("NOT FOUND")
end
return redis.status_reply("OK")
