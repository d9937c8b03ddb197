local NOTIFY_MAXLEN = "100000"

-- notify appends a run-level event to the queue's notification stream,
-- with the run's owner (so that subscribers can show each subject its own
-- runs).
local function notify(typ, workflow, ...)
  return redis.call("XADD", PREFIX .. "notifications", "MAXLEN", "~", NOTIFY_MAXLEN, "*",
    "type", typ, "at", NOWS, "run", RUN_ID, "workflow", workflow, "owner", redis.call("HGET", RUN, "owner") or "",
    ...)
end
