-- needs: num
-- task_id mirrors tasks.ID in Go: <run>_s<idx>_a<attempt>, plus _g<gen> for a re-dispatch.
local function task_id(idx, attempt, gen)
  if num(gen) > 0 then
    return string.format("%s_s%d_a%d_g%d", RUN_ID, idx, attempt, gen)
  end
  return string.format("%s_s%d_a%d", RUN_ID, idx, attempt)
end
