-- gate.lua: the reconciler's repair of an admission gate (lib/gate.lua):
-- drop the admitted runs that no longer hold a slot (ended, gone), then admit waiting runs while the gate has free slots; the runs that pass
-- all their gates start (their tasks written here). Scripts keep gates right
-- as they go; this repairs what they cannot (a run's hash deleted).
-- KEYS[1] the gate's line, cairn:{q}:gate:<G>:wait
-- ARGV[1] "" (no run)
-- ARGV[2] the queue's key prefix, cairn:{q}:
-- ARGV[3] now, Unix ms
-- ARGV[4] the gate, G
-- Returns {"gate", runs dropped, runs started}.

-- needs: gate, int

local dropped, started = gate("repair", nil, ARGV[4])
return {"gate", int(dropped), int(started)}
