-- needs: IDX, journal, notify, num
-- auto_repair counts one automatic repair of the run. Past max_auto repairs
-- it marks the run as needing attention instead, so the reconciler leaves it
-- to an operator rather than loop, and returns false and the reason.
local function auto_repair(max_auto, kind)
  local n = redis.call("HINCRBY", RUN, "auto_recoveries", "1")
  if n <= num(max_auto) then
    return true, ""
  end
  local reason = string.format("repaired automatically %d times (max_auto_recoveries %d); left for an operator (last: %s)",
    n - 1, num(max_auto), kind)
  redis.call("HSET", RUN, "needs_attention", "1", "attention_reason", reason)
  redis.call("ZADD", IDX("attention"), NOWS, RUN_ID)
  redis.call("ZREM", IDX("fences"), RUN_ID)
  journal("needs_attention", "code", "auto_recovery_exhausted", "reason", reason)
  notify("run_needs_attention", redis.call("HGET", RUN, "workflow"), "code", "auto_recovery_exhausted", "reason", reason)
  return false, reason
end
