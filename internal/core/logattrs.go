package core

// Log attribute names, used on every line about a run, step or attempt.
const (
	AttrRunID    = "run_id"
	AttrWorkflow = "workflow"
	AttrStep     = "step"
	AttrAttempt  = "attempt"
	AttrTaskID   = "task_id"
	AttrDelay    = "delay"
	AttrDueAt    = "due_at"
	AttrError    = "error"
	AttrClass    = "class"
	AttrCode     = "code"
	AttrReason   = "reason"
	AttrActor    = "actor"
	AttrDuration = "duration"
)
