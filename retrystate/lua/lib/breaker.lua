-- Circuit breakers. A step whose policy has a circuit breaker carries its
-- spec in the step field "breaker": "name|threshold|window_ms|cooldown_ms|
-- max_cooldown_ms" (names hold no "|"). The breaker, shared by every run and
-- replica of the queue, is the hash breaker:<name>: state ("closed", "open",
-- "half_open"), failures (consecutive transient failures) since
-- window_start, open_until, cooldown (ms, doubled on each failed probe up to
-- the maximum), probe and probe_until (the one attempt let through while
-- half-open, and when its lease ends), opened and deferred (totals), and the
-- spec last seen. idx:breakers lists the breakers by last change.
--
-- breaker(op, spec, who, arg) is one breaker operation; like gates() it
-- captures no local of the script around it (begin.lua and complete.lua
-- include it), so it reads the run-level arguments itself:
--   breaker("admit", spec, who, timeout_ms) (begin): nil when the attempt
--     may start (as the probe when the cooldown is over), else the time (ms)
--     to defer it to;
--   breaker("success", spec, who) (complete): the probe closes the breaker;
--     a success while closed resets the failure count;
--   breaker("failure", spec, who) (fail, transient): counts the failure and
--     opens the breaker at the threshold; a failed probe opens it again with
--     the cooldown doubled;
--   breaker("permanent", spec, who) (fail, permanent): a probe that failed
--     permanently says nothing of the dependency: the next attempt probes;
--   breaker("crashed", spec, who) (begin, redispatch): the same for a probe
--     whose worker died: its resumed attempt, under a new fence token, may
--     probe at once rather than wait out the probe's lease.
-- who identifies the attempt: "<run>:<step index>:<fence token>".
local function breaker(op, spec, who, arg)
  local _, PREFIX, NOWS = unpack(ARGV, 1, 3)
  local NOW = tonumber(NOWS)
  local name, threshold, window, base, maxc = string.match(spec, "^(.*)|(%d+)|(%d+)|(%d+)|(%d+)$")
  if not name then
    return nil
  end
  threshold, window, base, maxc = tonumber(threshold), tonumber(window), tonumber(base), tonumber(maxc)
  local bk = PREFIX .. "breaker:" .. name
  local function int(n)
    return string.format("%d", math.floor(n))
  end
  local function note(typ, ...)
    redis.call("XADD", PREFIX .. "notifications", "MAXLEN", "~", "100000", "*", "type", typ, "at", NOWS,
      "breaker", name, ...)
  end
  local function open(cooldown, why)
    local opened = redis.call("HINCRBY", bk, "opened", 1)
    redis.call("HSET", bk, "state", "open", "open_until", int(NOW + cooldown), "cooldown", int(cooldown),
      "probe", "", "probe_until", "0", "failures", "0", "changed_at", NOWS)
    redis.call("ZADD", PREFIX .. "idx:breakers", NOWS, name)
    note("breaker_opened", "open_until", int(NOW + cooldown), "cooldown_ms", int(cooldown), "reason", why,
      "opened", int(opened))
  end
  local h = redis.call("HMGET", bk, "state", "failures", "window_start", "open_until", "cooldown", "probe",
    "probe_until")
  local state, failures, window_start, open_until = h[1] or "closed", tonumber(h[2]) or 0, tonumber(h[3]) or 0,
    tonumber(h[4]) or 0
  local cooldown, probe, probe_until = tonumber(h[5]) or 0, h[6] or "", tonumber(h[7]) or 0
  if cooldown <= 0 then
    cooldown = base
  end
  if op == "admit" then
    if state == "closed" then
      return nil
    end
    if state == "open" and NOW < open_until then
      redis.call("HINCRBY", bk, "deferred", 1)
      return open_until
    end
    if state == "half_open" and probe ~= "" and probe ~= who and NOW < probe_until then
      redis.call("HINCRBY", bk, "deferred", 1)
      return math.min(probe_until, NOW + cooldown)
    end
    -- The cooldown is over (or the probe's lease ended): this attempt is
    -- the one probe.
    redis.call("HSET", bk, "state", "half_open", "probe", who, "probe_until", int(NOW + (tonumber(arg) or 0) + 60000),
      "changed_at", NOWS)
    redis.call("ZADD", PREFIX .. "idx:breakers", NOWS, name)
    return nil
  elseif op == "success" then
    if state == "half_open" and probe == who then
      redis.call("HSET", bk, "state", "closed", "failures", "0", "window_start", "0", "open_until", "0",
        "cooldown", int(base), "probe", "", "probe_until", "0", "changed_at", NOWS)
      redis.call("ZADD", PREFIX .. "idx:breakers", NOWS, name)
      note("breaker_closed")
    elseif state == "closed" and failures > 0 then
      redis.call("HSET", bk, "failures", "0")
    end
  elseif op == "failure" then
    if state == "half_open" and probe == who then
      open(math.min(cooldown * 2, maxc), "probe failed")
    elseif state == "closed" then
      if NOW - window_start > window then
        failures, window_start = 0, NOW
      end
      failures = failures + 1
      redis.call("HSET", bk, "state", "closed", "failures", int(failures), "window_start", int(window_start),
        "spec", spec)
      redis.call("ZADD", PREFIX .. "idx:breakers", NOWS, name)
      if failures >= threshold then
        open(base, string.format("%d consecutive transient failures", failures))
      end
    end
  elseif op == "permanent" or op == "crashed" then
    if state == "half_open" and probe == who then
      redis.call("HSET", bk, "probe", "", "probe_until", "0")
    end
  end
  return nil
end
