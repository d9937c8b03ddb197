-- MBOX is the run's mailbox (keys.go's mailbox): a stream of the signals it
-- received that no step has consumed yet. Signal IDs already received are
-- fields sig:<id> of the run hash, so they expire and persist with it.
local MBOX = RUN .. ":mbox"
