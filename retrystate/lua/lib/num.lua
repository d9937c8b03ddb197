local function num(v)
  return tonumber(v) or 0
end
