-- task_id returns the ID of the task of attempt attempt of step idx of run
-- rid, dispatch gen: <run>_s<idx>_a<attempt>, plus _g<gen> for a
-- re-dispatch (gen > 0), as tasks.ID builds it in Go.
local function task_id(rid, idx, attempt, gen)
  if gen and (tonumber(gen) or 0) > 0 then
    return string.format("%s_s%d_a%d_g%d", rid, idx, attempt, gen)
  end
  return string.format("%s_s%d_a%d", rid, idx, attempt)
end
