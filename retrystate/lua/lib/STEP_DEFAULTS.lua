-- STEP_DEFAULTS are the fields create.lua gives each step of a new run,
-- with their defaults (field, value, ...), as RUN_DEFAULTS for the run.
local STEP_DEFAULTS = {"status", "pending", "attempt", "0", "budget_base", "0", "retry_attempts", "0",
  "retry_state", "none", "next_attempt_at", "0", "attempts_started", "0", "crashes", "0", "gen", "0", "task", "",
  "fence", "", "fence_expires_at", "0", "last_error", "", "last_error_class", "", "output", "", "started_at", "0",
  "finished_at", "0"}
