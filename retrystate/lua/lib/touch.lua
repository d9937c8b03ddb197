-- needs: IDX
-- touch records activity on a non-terminal run.
local function touch()
  redis.call("HSET", RUN, "updated_at", NOWS)
  redis.call("ZADD", IDX("active"), NOWS, RUN_ID)
end
