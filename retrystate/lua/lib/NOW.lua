-- NOW is now, Unix ms, as a number: the script's argument NOWS, the
-- decimal string the caller sent, which is written as is, with no number
-- formatting.
local NOW = tonumber(NOWS)
