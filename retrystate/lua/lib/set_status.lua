-- needs: status_move
-- set_status is status_move from whatever indexes the run is in.
local function set_status(old, new, created, ...)
  return status_move(nil, old, new, created, ...)
end
