-- zero tells whether a stored number is 0 or unset, without converting it.
local function zero(v)
  return not v or v == "0" or v == "" or v == 0
end
