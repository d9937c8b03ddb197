-- needs: IDX, is_terminal
-- status_move records the run's new status and moves it between indexes.
-- created is the run's created_at when the caller has it (nil: read here).
-- leave names the indexes (active, scheduled, fences, deadlines) a run
-- that ends may still be in, to remove it from; nil: all of them. Fields to
-- write to the run hash along with the status may follow. (The default
-- includes the indexes of waiting awaits and sleeps.)
local function status_move(leave, old, new, created, ...)
  if old == new then
    if select("#", ...) > 0 then
      redis.call("HSET", RUN, ...)
    end
    return
  end
  if not created then
    created = redis.call("HGET", RUN, "created_at")
  end
  if old then
    redis.call("ZREM", IDX("status:" .. old), RUN_ID)
  end
  redis.call("ZADD", IDX("status:" .. new), created, RUN_ID)
  if is_terminal(new) then
    leave = leave or {"active", "scheduled", "fences", "deadlines", "waiting:signal", "waiting:timer"}
    for i = 1, #leave do
      redis.call("ZREM", IDX(leave[i]), RUN_ID)
    end
    redis.call("HSET", RUN, "status", new, "updated_at", NOWS, "finished_at", NOWS, "warning", "", ...)
  else
    redis.call("ZADD", IDX("active"), NOWS, RUN_ID)
    redis.call("HSET", RUN, "status", new, "updated_at", NOWS, ...)
  end
end
