-- sp returns the field name prefix of step idx: "s<idx>.".
local function sp(idx)
  return string.format("s%d.", idx)
end
