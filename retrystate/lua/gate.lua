-- gate.lua: the reconciler's repair of an admission gate (lib/gates.lua):
-- drop the admitted runs that no longer hold a slot (ended, gone), then admit waiting runs while the gate has free slots; the runs that pass
-- all their gates start (their tasks written here). Scripts keep gates right
-- as they go; this repairs what they cannot (a run's hash deleted).
-- KEYS
--   line       the gate's line, cairn:{q}:gate:<G>:wait
-- ARGV
--   RUN_ID, PREFIX, NOWS  "" (no run), the queue's key prefix, now (lua/README.md)
--   G          the gate
-- Returns {"gate", runs dropped, runs started}.

local line = unpack(KEYS)
local RUN_ID, PREFIX, NOWS, G = unpack(ARGV)
-- needs: gates, int

local dropped, started = gates().repair(G)
return {"gate", int(dropped), int(started)}
