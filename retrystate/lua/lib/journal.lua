-- JOURNAL is the run's journal (keys.go's journal): a stream of one entry
-- per transition.
local JOURNAL = RUN .. ":j"
local JOURNAL_MAXLEN = "10000"

-- journal appends an entry of type typ to the run's journal, then the given
-- field/value pairs.
local function journal(typ, ...)
  return redis.call("XADD", JOURNAL, "MAXLEN", "~", JOURNAL_MAXLEN, "*", "type", typ, "at", NOWS, ...)
end
