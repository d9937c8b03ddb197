package retrystate

import (
	"strconv"
	"time"
)

// Error classes recorded with a failed attempt.
const (
	ClassTransient = "transient"
	ClassPermanent = "permanent"
)

// Failure codes of a failed run.
const (
	CodeRetriesExhausted      = "retries_exhausted"
	CodePermanentError        = "permanent_error"
	CodeRunTimeout            = "run_timeout"
	CodeMaxIterationsExceeded = "max_iterations_exceeded"
	// CodeInvalidGoto: a step asked to go to a step that is not itself or an earlier one.
	CodeInvalidGoto          = "invalid_goto"
	CodeCrashBudgetExhausted = "crash_budget_exhausted"
	CodeCancelled            = "cancelled"
	// CodeSignalTimeout: an await's timeout passed without its signal.
	CodeSignalTimeout = "signal_timeout"
	// CodeCompensationFailed: a compensation failed for good; the run
	// waits for an operator to retry it.
	CodeCompensationFailed = "compensation_failed"
)

// Run is a run record with its step records, as stored.
type Run struct {
	ID             string
	Workflow       string
	Status         RunStatus
	Owner          string
	Input          string // JSON
	IdempotencyKey string
	// Def is the version of the definition the run started with, which
	// names its template (definitions.go); "" for a run created before
	// definitions had versions, whose Definition is the definition's
	// snapshot JSON ("" for a newer run).
	Def            string
	Definition     string
	Current        int // index of the current step
	StepCount      int
	Iterations     int
	MaxIterations  int
	Gotos          int       // gotos taken (goto.lua)
	Deadline       time.Time // zero: none
	CreatedAt      time.Time
	StartedAt      time.Time
	UpdatedAt      time.Time
	FinishedAt     time.Time
	FailureCode    string
	FailureReason  string
	Warning        string
	NeedsAttention bool
	// AttentionReason says why a run that has not failed needs an operator
	// (it was repaired automatically too often).
	AttentionReason string
	AutoRecoveries  int
	// Pause (Store.Pause): the run is paused (a terminal run never is:
	// a run that ended while paused reads as not paused), since PausedAt,
	// by PausedBy; Parked when a dispatch of its current step waits for
	// the resume.
	Paused   bool
	Parked   bool
	PausedAt time.Time
	PausedBy string
	// OrderingKey is the run's ordering key ("" for none), in its owner's
	// line, or in the shared line when OrderingShared (gates.go,
	// StoredOrderingKey); MaxRunning its workflow's limit when the run
	// started (0: none).
	OrderingKey    string
	OrderingShared bool
	MaxRunning     int
	// Waiting is what the run waits for in a gate's line ("" when it is not
	// waiting there); Position is its place in that line, from 1 (set by
	// Store.Run only).
	Waiting  WaitReason
	Position int
	// HeldBy, for a run waiting in its ordering key's line, are the runs
	// that hold the line's slots, oldest first, at most 10 (set by
	// Store.Run only): a failed run that blocks the key is one of them.
	HeldBy []string
	// OnFailure is "compensate" for a run whose failure runs its
	// compensations (a saga), "" otherwise.
	OnFailure string
	// Saga is what the run's compensations undo and what follows them,
	// while it compensates, and while a compensation that failed for good
	// waits for an operator; nil otherwise.
	Saga  *Saga
	Steps []Step // empty when listed without steps
}

// Saga is the state of a run's compensations (the sagas of lua/lib/fail_run.lua).
type Saga struct {
	// Ending is what follows the compensations: SagaCompensated (the run
	// ends compensated), SagaFailed (it fails: a required group was rolled
	// back under on_failure stop) or SagaContinue (an optional group was
	// rolled back; the run goes on after it).
	Ending string
	// FailedStep is the index of the step that failed (or the current step
	// of a run cancelled with compensation); From and To bound the steps
	// compensated (To: the last step of the failed step's group).
	FailedStep, From, To int
	// Group is the failed step's group ("" for none).
	Group string
	// Code and Reason are the failure that started the compensations.
	Code, Reason string
}

// What follows a run's compensations (Saga.Ending).
const (
	SagaCompensated = "compensated"
	SagaFailed      = "failed"
	SagaContinue    = "continue"
)

// Step is a step record: progress, retry metadata and checkpoint.
type Step struct {
	Index            int
	Name             string
	Optional         bool
	Status           StepStatus
	Attempt          int // number of the current (or last) attempt; never reused
	AttemptsStarted  int
	Snoozes          int  // visits the step snoozed (snooze.lua)
	Snoozed          bool // pending after a snooze: its next visit resumes the attempt
	BudgetBase       int  // attempts before the current retry budget began
	RetryAttempts    int  // retries scheduled within the current budget
	RetryState       RetryState
	NextAttemptAt    time.Time // zero unless a retry is scheduled
	MaxAttempts      int
	MaxCrashes       int
	Timeout          time.Duration
	Policy           string // JSON of the step's effective policy
	LastError        string
	LastErrorClass   string
	LastErrorCode    string
	LastErrorAt      time.Time
	Output           string // JSON checkpoint; "" until the step succeeds
	Crashes          int
	Gen              int
	Task             string // asynq task ID of the current dispatch
	Fence            string
	FenceExpiresAt   time.Time
	StartedAt        time.Time
	AttemptStartedAt time.Time
	FinishedAt       time.Time
	// Kind is what the step does (KindBody for a step with a body); Signal
	// the signal an await waits for; Wait an await's timeout or a sleep's
	// duration. While the step is StepWaiting, NextAttemptAt is when it
	// wakes up: the await's timeout, the sleep's end.
	Kind   StepKind
	Signal string
	Wait   time.Duration
	// Group is the step's group ("" for none); GroupOptional: that group
	// is optional.
	Group         string
	GroupOptional bool
	// Compensation is the record of the step's compensation (its attempts,
	// status and output; Index CompBase + the step's), nil for a step
	// without one.
	Compensation *Step
}

// Entry is one journal entry.
type Entry struct {
	ID      string // stream entry ID
	Type    string
	At      time.Time
	Step    string
	Attempt int
	// Fields holds every other field of the entry (error, class, delay_ms,
	// due_at, task, code, reason, message, actor, ...).
	Fields map[string]string
}

// Journal entry types.
const (
	EventRunStarted       = "run_started"
	EventAttemptStarted   = "attempt_started"
	EventAttemptSucceeded = "attempt_succeeded"
	EventAttemptFailed    = "attempt_failed"
	EventAttemptCrashed   = "attempt_crashed"
	// EventAttemptInterrupted: the attempt's worker could not renew its
	// fence (Redis unreachable) and handed the attempt back (no budget
	// spent); it resumes under a new dispatch.
	EventAttemptInterrupted = "attempt_interrupted"
	EventRetryScheduled     = "retry_scheduled"
	// EventStepSnoozed: the step body asked to run again later (Snooze).
	EventStepSnoozed = "step_snoozed"
	// EventStepGoto: the step body asked to continue at a step (Goto).
	EventStepGoto = "step_goto"
	// EventStepSuperseded: a goto superseded the step's checkpoint, kept
	// here with its output.
	EventStepSuperseded  = "step_superseded"
	EventRunSucceeded    = "run_succeeded"
	EventRunFailed       = "run_failed"
	EventRunCancelled    = "run_cancelled"
	EventRunRecovered    = "run_recovered"
	EventStepSkipped     = "step_skipped"
	EventRepair          = "repair"
	EventNeedsAttention  = "needs_attention"
	EventDeliveryIgnored = "delivery_ignored"
	// EventRunWaiting: the run waits in the line of an ordering key or of
	// its workflow's max_running (reason, gate, position).
	EventRunWaiting = "run_waiting"
	// EventRunAdmitted: a run that waited got its slot and starts.
	EventRunAdmitted = "run_admitted"
	// EventAwaitStarted (signals and timers: lua/wait.lua, lua/signal.lua): an await began to wait for its signal (signal,
	// until).
	EventAwaitStarted = "await_started"
	// EventSignalReceived: a signal arrived (signal, id); with a step, the
	// waiting await it completed; with queued=1, kept in the mailbox.
	EventSignalReceived = "signal_received"
	// EventSignalConsumed: an await, when reached, took its signal from the
	// mailbox and completed (signal, id).
	EventSignalConsumed = "signal_consumed"
	// EventAwaitTimedOut: an await's timeout passed without its signal;
	// the run fails with signal_timeout.
	EventAwaitTimedOut = "await_timed_out"
	// EventTimerSet: a sleep began (until).
	EventTimerSet = "timer_set"
	// EventTimerFired: a sleep's time came; the step succeeded.
	EventTimerFired = "timer_fired"
	// EventRunCompensating (sagas, lua/lib/fail_run.lua): a step's failure (step,
	// code, reason, group) starts the run's compensations; the run is
	// compensating.
	EventRunCompensating = "run_compensating"
	// EventCompensationStarted: the compensation of step is activated
	// (attempt, task).
	EventCompensationStarted = "compensation_started"
	// EventCompensationSucceeded: the compensation of step succeeded
	// (attempt, duration_ms); the step is compensated.
	EventCompensationSucceeded = "compensation_succeeded"
	// EventCompensationFailed: the compensation of step failed for good
	// (code, reason); the run fails with compensation_failed.
	EventCompensationFailed = "compensation_failed"
	// EventRunCompensated: the run's compensations all ran (code, reason:
	// the failure that started them); the run ended compensated.
	EventRunCompensated = "run_compensated"
	// EventGroupRolledBack: an optional group (group) was rolled back after
	// its step failed (step, code, reason); the run goes on after it.
	EventGroupRolledBack = "group_rolled_back"
)

// runFields are the fields of a run record that are not step fields; List
// reads only these.
var runFields = []string{"workflow", "status", "owner", "input", "idempotency_key", "def", "current",
	"steps", "iterations", "max_iterations", "deadline", "created_at", "started_at", "updated_at", "finished_at",
	"failure_code", "failure_reason", "warning", "needs_attention", "attention_reason", "auto_recoveries",
	"ord_key", "wf_limit", "waiting", "paused", "paused_at", "paused_by"}

// splitRunHash splits a run hash (HGETALL) into the run's own fields, each
// step's, whose fields are named s<idx>.<field> (lua/README.md), and each
// compensation's, whose records follow at CompBase + the step's index
// (comps, by the step's index).
func splitRunHash(h map[string]string) (run map[string]string, steps []map[string]string, comps map[int]map[string]string) {
	run = make(map[string]string, len(runFields))
	for k, v := range h {
		idx, field, ok := stepField(k)
		switch {
		case !ok:
			run[k] = v
			continue
		case idx >= CompBase:
			if idx >= 2*CompBase {
				continue // no record of the format
			}
			if comps == nil {
				comps = map[int]map[string]string{}
			}
			if comps[idx-CompBase] == nil {
				comps[idx-CompBase] = map[string]string{}
			}
			comps[idx-CompBase][field] = v
			continue
		}
		for len(steps) <= idx {
			steps = append(steps, map[string]string{})
		}
		steps[idx][field] = v
	}
	if n := atoi(run["steps"]); n < len(steps) && n >= 0 {
		steps = steps[:n]
	}
	return run, steps, comps
}

// stepField parses a step field name, s<idx>.<field>.
func stepField(k string) (int, string, bool) {
	if len(k) < 4 || k[0] != 's' || k[1] < '0' || k[1] > '9' {
		return 0, "", false
	}
	idx := 0
	for i := 1; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= '0' && c <= '9':
			idx = idx*10 + int(c-'0')
			if idx > 1<<20 {
				return 0, "", false
			}
		case c == '.' && i+1 < len(k):
			return idx, k[i+1:], true
		default:
			return 0, "", false
		}
	}
	return 0, "", false
}

func parseRun(id string, h map[string]string) *Run {
	ordKey, _, ordShared := SplitOrderingKey(h["ord_key"])
	r := &Run{
		ID:              id,
		Workflow:        h["workflow"],
		Status:          RunStatus(h["status"]),
		Owner:           h["owner"],
		Input:           h["input"],
		IdempotencyKey:  h["idempotency_key"],
		Def:             h["def"],
		Definition:      h["definition"],
		Current:         atoi(h["current"]),
		StepCount:       atoi(h["steps"]),
		Iterations:      atoi(h["iterations"]),
		Gotos:           atoi(h["gotos"]),
		MaxIterations:   atoi(h["max_iterations"]),
		Deadline:        msTime(h["deadline"]),
		CreatedAt:       msTime(h["created_at"]),
		StartedAt:       msTime(h["started_at"]),
		UpdatedAt:       msTime(h["updated_at"]),
		FinishedAt:      msTime(h["finished_at"]),
		FailureCode:     h["failure_code"],
		FailureReason:   h["failure_reason"],
		Warning:         h["warning"],
		NeedsAttention:  h["needs_attention"] == "1",
		AttentionReason: h["attention_reason"],
		AutoRecoveries:  atoi(h["auto_recoveries"]),
		OrderingKey:     ordKey,
		OrderingShared:  ordShared && ordKey != "",
		MaxRunning:      atoi(h["wf_limit"]),
		Waiting:         WaitReason(h["waiting"]),
		OnFailure:       h["on_failure"],
		Saga:            parseSaga(h),
	}
	if p := h["paused"]; p != "" && !r.Status.Terminal() {
		r.Paused, r.Parked, r.PausedAt, r.PausedBy = true, p == "parked", msTime(h["paused_at"]), h["paused_by"]
	}
	return r
}

// recordFromHash parses a run hash (HGETALL) into a Run with its steps.
func recordFromHash(id string, h map[string]string) *Run {
	runHash, stepHashes, comps := splitRunHash(h)
	r := parseRun(id, runHash)
	r.Steps = make([]Step, len(stepHashes))
	for i, m := range stepHashes {
		r.Steps[i] = parseStep(i, m)
		if c := comps[i]; c != nil {
			cs := parseStep(CompBase+i, c)
			if cs.Status == "" {
				cs.Status = StepPending // create.lua writes only its fixed fields
			}
			r.Steps[i].Compensation = &cs
		}
	}
	return r
}

// parseSaga reads a run's comp_ fields (the sagas of lua/lib/fail_run.lua).
func parseSaga(h map[string]string) *Saga {
	if h["comp_end"] == "" {
		return nil
	}
	return &Saga{Ending: h["comp_end"], FailedStep: atoi(h["comp_step"]), From: atoi(h["comp_lo"]),
		To: atoi(h["comp_hi"]), Group: h["comp_group"], Code: h["comp_code"], Reason: h["comp_reason"]}
}

func parseStep(idx int, h map[string]string) Step {
	return Step{
		Index:            idx,
		Name:             h["name"],
		Optional:         h["optional"] == "1",
		Status:           StepStatus(h["status"]),
		Attempt:          atoi(h["attempt"]),
		AttemptsStarted:  atoi(h["attempts_started"]),
		Snoozes:          atoi(h["snoozes"]),
		Snoozed:          h["resuming"] == "snoozed",
		BudgetBase:       atoi(h["budget_base"]),
		RetryAttempts:    atoi(h["retry_attempts"]),
		RetryState:       RetryState(h["retry_state"]),
		NextAttemptAt:    msTime(h["next_attempt_at"]),
		MaxAttempts:      atoi(h["max_attempts"]),
		MaxCrashes:       atoi(h["max_crashes"]),
		Timeout:          time.Duration(atoi(h["timeout_ms"])) * time.Millisecond,
		Policy:           h["policy"],
		LastError:        h["last_error"],
		LastErrorClass:   h["last_error_class"],
		LastErrorCode:    h["last_error_code"],
		LastErrorAt:      msTime(h["last_error_at"]),
		Output:           h["output"],
		Crashes:          atoi(h["crashes"]),
		Gen:              atoi(h["gen"]),
		Task:             h["task"],
		Fence:            h["fence"],
		FenceExpiresAt:   msTime(h["fence_expires_at"]),
		StartedAt:        msTime(h["started_at"]),
		AttemptStartedAt: msTime(h["attempt_started_at"]),
		FinishedAt:       msTime(h["finished_at"]),
		Kind:             StepKind(h["kind"]),
		Signal:           h["signal"],
		Wait:             time.Duration(atoi(h["wait_ms"])) * time.Millisecond,
		Group:            h["group"],
		GroupOptional:    h["group_opt"] == "1",
	}
}

// streamFields returns a stream entry's fields as strings, and takes the
// fields every entry has (type, at) out of them.
func streamFields(values map[string]any) (typ string, at time.Time, rest map[string]string) {
	rest = make(map[string]string, len(values))
	for k, v := range values {
		rest[k], _ = v.(string)
	}
	typ, at = rest["type"], msTime(rest["at"])
	if g, ok := rest["gate"]; ok {
		// A gate is named by an ordering key as a run stores it: an
		// entry shows the key itself (its owner is the run's).
		rest["gate"], _, _ = SplitOrderingKey(g)
	}
	delete(rest, "type")
	delete(rest, "at")
	return typ, at, rest
}

// take removes field k from m and returns its value.
func take(m map[string]string, k string) string {
	v := m[k]
	delete(m, k)
	return v
}

func parseEntry(id string, values map[string]any) Entry {
	typ, at, rest := streamFields(values)
	return Entry{ID: id, Type: typ, At: at, Step: take(rest, "step"), Attempt: atoi(take(rest, "attempt")), Fields: rest}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// msTime converts stored Unix milliseconds; "0" and "" are the zero time.
func msTime(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

func ms(t time.Time) int64 { return t.UnixMilli() }
