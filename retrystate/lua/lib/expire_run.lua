-- needs: journal, num
-- expire_run gives a terminal run's keys their retention. idem is false
-- when the run has no idempotency key (nil: read here). The key's name is
-- the run's idem_key (keys.go's idempotency, scoped by owner), or, for a
-- run created before keys were scoped, idem:<idempotency_key>.
local function expire_run(retention_ms, idem)
  local ms = num(retention_ms)
  if ms <= 0 then
    return
  end
  redis.call("PEXPIRE", RUN, retention_ms)
  redis.call("PEXPIRE", JOURNAL, retention_ms)
  redis.call("PEXPIRE", RUN .. ":mbox", retention_ms) -- the mailbox (signals)
  if idem == false then
    return
  end
  local r = redis.call("HMGET", RUN, "idem_key", "idempotency_key")
  local run_idem_key, run_idempotency_key = r[1], r[2]
  if run_idem_key and run_idem_key ~= "" then
    redis.call("PEXPIRE", PREFIX .. run_idem_key, retention_ms)
  elseif run_idempotency_key and run_idempotency_key ~= "" then
    redis.call("PEXPIRE", PREFIX .. "idem:" .. run_idempotency_key, retention_ms)
  end
end
