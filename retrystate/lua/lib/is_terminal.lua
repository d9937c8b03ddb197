local function is_terminal(status)
  return status == "succeeded" or status == "failed" or status == "cancelled" or status == "compensated"
end
