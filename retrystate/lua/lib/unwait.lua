-- needs: IDX
-- unwait takes the run out of the indexes of a waiting step: the waiting
-- index of reason ("signal" or "timer") and the scheduled index (its
-- wake-up).
local function unwait(reason)
  redis.call("ZREM", IDX("waiting:" .. reason), RUN_ID)
  redis.call("ZREM", IDX("scheduled"), RUN_ID)
end
