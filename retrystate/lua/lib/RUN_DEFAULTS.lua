-- RUN_DEFAULTS are the fields create.lua gives a new run, with their
-- defaults (field, value, ...): in its seed, or written from arguments;
-- rehydrate gives them back to a compact run. (STEP_DEFAULTS are the same
-- for each step.)
local RUN_DEFAULTS = {"status", "pending", "owner", "", "idempotency_key", "", "idem_key", "", "iterations", "0",
  "deadline", "0", "started_at", "0", "finished_at", "0", "failure_code", "", "failure_reason", "", "warning", "",
  "needs_attention", "0", "auto_recoveries", "0"}
