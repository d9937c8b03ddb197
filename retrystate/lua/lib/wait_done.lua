-- needs: IDX, activation, gates, int, journal, notify, num, sp, status_move, step_deadline, step_get
-- wait_done ends an await or a sleep, step idx: it succeeds with output
-- (JSON) and the next step becomes current, due now. Returns the next
-- step's index, name, attempt and timeout (ms), as decimal strings (the
-- caller replies with that dispatch, whose task it enqueues), or nil when
-- this was the last step: the run succeeded, and the caller gives it its
-- retention (expire_run).
local function wait_done(idx, output)
  local r = redis.call("HMGET", RUN, "status", "steps", "workflow", "created_at", "deadline_base", "run_timeout_ms",
    "deadline")
  local run_status, run_steps, run_workflow, run_created_at = r[1], r[2], r[3], r[4]
  local run_deadline_base, run_timeout_ms, run_deadline = r[5], r[6], r[7]
  local p = sp(idx)
  local done = {p .. "status", "succeeded", p .. "output", output, p .. "finished_at", NOWS,
    p .. "next_attempt_at", "0"}
  local nxt = idx + 1
  if nxt < num(run_steps) then
    local nx = step_get(nxt, "attempt", "name", "timeout_ms", "run_timeout_ms")
    local nx_attempt, nx_name, nx_timeout_ms, nx_run_timeout_ms = nx[1], nx[2], nx[3], nx[4]
    local w, _, attempt = activation(nxt, nx_attempt)
    step_deadline(w, run_deadline_base or run_created_at, nx_run_timeout_ms, run_timeout_ms, run_deadline)
    for i = 1, #done do
      w[#w + 1] = done[i]
    end
    redis.call("HSET", RUN, unpack(w))
    redis.call("ZADD", IDX("active"), NOWS, RUN_ID)
    return int(nxt), nx_name, int(attempt), int(nx_timeout_ms)
  end
  status_move(nil, run_status, "succeeded", run_created_at, unpack(done))
  journal("run_succeeded")
  notify("run_succeeded", run_workflow)
  if redis.call("HGET", RUN, "gated") == "1" then
    gates().release(RUN_ID, false) -- the next runs of its lines start
  end
  return nil
end
