-- needs: task_done
-- acker returns acked(out), for a script that ends an attempt (complete.lua,
-- fail.lua): it returns out, the reply of an outcome that leaves the
-- delivery nothing more to do, having acknowledged the delivery's asynq
-- task with task_done and appended "acked", when the caller sent task_done's
-- keys and arguments (id set; see those scripts' headers); else out as it
-- is.
local function acker(active, lease, task, day, total, completed, unique, id, stats_expiry, keep_until, msg)
  return function(out)
    if id then
      task_done(active, lease, task, day, total, completed, unique, id, stats_expiry, keep_until, msg)
      out[#out + 1] = "acked"
    end
    return out
  end
end
