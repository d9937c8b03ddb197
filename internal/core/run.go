package core

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/cairnhq/cairn/retrystate"
)

// RunStatus is the status of a run.
type RunStatus = retrystate.RunStatus

// StepStatus is the status of a step of a run.
type StepStatus = retrystate.StepStatus

// RetryState is where a step stands with its retries.
type RetryState = retrystate.RetryState

// Run statuses.
const (
	StatusPending   = retrystate.StatusPending
	StatusRunning   = retrystate.StatusRunning
	StatusSucceeded = retrystate.StatusSucceeded
	StatusFailed    = retrystate.StatusFailed
	StatusCancelled = retrystate.StatusCancelled
	// StatusCompensating: the run failed for good (or was cancelled with
	// compensation, or a step group failed) and runs the compensations of
	// its succeeded steps, last first (Step.Compensate).
	StatusCompensating = retrystate.StatusCompensating
	// StatusCompensated: the run's compensations all ran; it ended,
	// keeping the failure code and reason of the failure that started them.
	StatusCompensated = retrystate.StatusCompensated
)

// RunStatuses lists every run status.
var RunStatuses = retrystate.RunStatuses

// Step statuses. A step waiting for a scheduled retry is pending, with
// RetryState "scheduled".
const (
	StepPending   = retrystate.StepPending
	StepRunning   = retrystate.StepRunning
	StepSucceeded = retrystate.StepSucceeded
	StepFailed    = retrystate.StepFailed
	StepSkipped   = retrystate.StepSkipped // an operator skipped the (optional) step
	StepCancelled = retrystate.StepCancelled
	// StepCompensated: the step succeeded, and its compensation undid it.
	StepCompensated = retrystate.StepCompensated
	// StepRolledBack: the step belongs to an optional group that was rolled
	// back after a step of it failed; the run went on after the group.
	StepRolledBack = retrystate.StepRolledBack
)

// Retry states of a step.
const (
	RetryNone      = retrystate.RetryNone
	RetryScheduled = retrystate.RetryScheduled
	RetryExhausted = retrystate.RetryExhausted
)

// WarningRetryPending is the run warning while a retry is scheduled.
const WarningRetryPending = "retry_pending"

// Failure codes of a failed or cancelled run.
const (
	CodeRetriesExhausted      = retrystate.CodeRetriesExhausted
	CodePermanentError        = retrystate.CodePermanentError
	CodeRunTimeout            = retrystate.CodeRunTimeout
	CodeMaxIterationsExceeded = retrystate.CodeMaxIterationsExceeded
	CodeInvalidGoto           = retrystate.CodeInvalidGoto
	CodeCrashBudgetExhausted  = retrystate.CodeCrashBudgetExhausted
	CodeCancelled             = retrystate.CodeCancelled
	// CodeCompensationFailed: a compensation failed for good; the run
	// failed, needing attention, and an operator's recover or retry runs
	// that compensation again.
	CodeCompensationFailed = retrystate.CodeCompensationFailed
)

// Run is the state of a workflow run. Its JSON form is what
// `enqueue status --json` prints and the HTTP API returns.
type Run struct {
	ID             string    `json:"id"`
	Workflow       string    `json:"workflow"`
	Status         RunStatus `json:"status"`
	Warning        string    `json:"warning"`
	NeedsAttention bool      `json:"needs_attention"`
	// AttentionReason says why a run that has not failed needs an
	// operator (it was repaired automatically too often).
	AttentionReason string          `json:"attention_reason,omitempty"`
	FailureCode     string          `json:"failure_code"`
	FailureReason   string          `json:"failure_reason"`
	Owner           string          `json:"owner,omitempty"`
	IdempotencyKey  string          `json:"idempotency_key,omitempty"`
	Input           json.RawMessage `json:"input,omitempty"`
	CurrentStep     string          `json:"current_step,omitempty"`
	Iterations      int             `json:"iterations"`
	// Gotos is the number of gotos the run took (Goto).
	Gotos      int        `json:"gotos,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Deadline   *time.Time `json:"deadline"`
	// OrderingKey is the run's ordering key ("" for none), in the line of
	// its Owner's runs, or in the key's shared line when OrderingShared
	// (StartOptions.SharedOrdering; a run without an owner is always there).
	OrderingKey    string `json:"ordering_key,omitempty"`
	OrderingShared bool   `json:"ordering_shared,omitempty"`
	// WaitingFor says what the run waits for while it holds no worker slot:
	// a place in its ordering key's line or under its workflow's
	// max_running, or, when its current step waits, what that step waits
	// for. Nil when the run is not waiting.
	WaitingFor *WaitingFor `json:"waiting_for,omitempty"`
	// Paused is set while the run is paused (Client.Pause): it begins no
	// new attempt until Client.Resume. Nil when it is not (a run that ended
	// is never paused).
	Paused *Paused `json:"paused,omitempty"`
	// OnFailure is "compensate" for a run of a workflow whose failures run
	// its compensations (Definition.OnFailure), "" otherwise.
	OnFailure FailureAction `json:"on_failure,omitempty"`
	// Compensating says what the run's compensations undo and what follows
	// them, while it is StatusCompensating, and while a compensation that
	// failed for good waits for an operator (CodeCompensationFailed); nil
	// otherwise.
	Compensating *Compensating `json:"compensating,omitempty"`
	// Steps is empty for runs returned by List, and for a queued run.
	Steps []StepState `json:"steps,omitempty"`
	// Queued: the run's Start waits in the client's outbox
	// (ClientConfig.Outbox) for Redis to be reachable; the run does not
	// exist in Redis yet and will have this ID. Only the fields the Start
	// gave are set, with CreatedAt the time it was queued.
	Queued bool `json:"queued,omitempty"`
}

// Compensating is the state of a run's compensations (Run.Compensating).
type Compensating struct {
	// Then is what follows once they are done: "compensated" (the run
	// ends StatusCompensated), "failed" (a required group was rolled back
	// under on_failure stop: the run fails) or "continue" (an optional
	// group was rolled back: the run goes on after it).
	Then string `json:"then"`
	// FailedStep is the step whose failure started them (for a cancel with
	// compensation, the step the run was at).
	FailedStep string `json:"failed_step"`
	// Group is that step's group, when a group is rolled back.
	Group string `json:"group,omitempty"`
	// FromStep and ToStep bound the steps whose compensations run (last
	// first).
	FromStep string `json:"from_step"`
	ToStep   string `json:"to_step"`
	// Code and Reason are the failure that started them.
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// StepState is the progress of one step of a run.
type StepState struct {
	Name     string     `json:"name"`
	Status   StepStatus `json:"status"`
	Optional bool       `json:"optional"`
	// Attempts is the number of attempts started so far (resumes after a
	// crash are not new attempts).
	Attempts int `json:"attempts"`
	// RetryAttempts is the number of retries scheduled within the step's
	// current retry budget.
	RetryAttempts int `json:"retry_attempts"`
	// Snoozes is the number of times the step snoozed (Snooze).
	Snoozes int `json:"snoozes,omitempty"`
	// Snoozed: the step is pending after a snooze (RetryState is
	// "scheduled" and NextAttemptAt its next visit; no attempt failed).
	Snoozed        bool            `json:"snoozed,omitempty"`
	RetryState     RetryState      `json:"retry_state"`
	NextAttemptAt  *time.Time      `json:"next_attempt_at"`
	LastError      string          `json:"last_error"`
	LastErrorClass string          `json:"last_error_class,omitempty"`
	LastErrorCode  string          `json:"last_error_code,omitempty"`
	Crashes        int             `json:"crashes"`
	StartedAt      *time.Time      `json:"started_at"`
	FinishedAt     *time.Time      `json:"finished_at"`
	Output         json.RawMessage `json:"output,omitempty"`
	// EffectivePolicy is the policy in force for the step, after
	// precedence, as the run started with it.
	EffectivePolicy *Policy `json:"effective_policy,omitempty"`
	// WaitingFor says what a waiting step (status "waiting") waits for.
	WaitingFor *WaitingFor `json:"waiting_for,omitempty"`
	// Group is the step group the step belongs to ("" for none), and
	// GroupOptional tells whether that group is optional.
	Group         string `json:"group,omitempty"`
	GroupOptional bool   `json:"group_optional,omitempty"`
	// Compensation is the progress of the step's compensation
	// (Step.Compensate), named "compensate:<step>": pending until it runs,
	// then as a step's. Nil for a step without one.
	Compensation *StepState `json:"compensation,omitempty"`
}

// CompensationInPlay reports whether the compensation of step i has a part
// in the run: it has started (or failed, or waits for a retry), or the
// run's current compensations are still to undo the step. A view of the run
// shows such compensations, and leaves the others (pending, with nothing to
// undo) out.
func (r *Run) CompensationInPlay(i int) bool {
	if i < 0 || i >= len(r.Steps) || r.Steps[i].Compensation == nil {
		return false
	}
	st := r.Steps[i]
	c := st.Compensation
	if c.Status != StepPending || c.Attempts > 0 || c.LastError != "" || c.RetryState == RetryScheduled {
		return true
	}
	if r.Compensating == nil || st.Status != StepSucceeded {
		return false
	}
	index := func(name string) int {
		return slices.IndexFunc(r.Steps, func(s StepState) bool { return s.Name == name })
	}
	from, to := index(r.Compensating.FromStep), index(r.Compensating.ToStep)
	return from >= 0 && i >= from && i <= to
}

// Terminal reports whether the run has ended.
func (r *Run) Terminal() bool { return r.Status.Terminal() }

// WaitsForWorker tells whether the run goes on only once a worker takes
// its next attempt: it is pending, running or compensating, and waits for
// no signal, timer or admission gate (WaitingFor). Such a run waits for as
// long as no live worker serves its queue (Client.Served).
func (r *Run) WaitsForWorker() bool {
	switch r.Status {
	case StatusPending, StatusRunning, StatusCompensating:
		return r.WaitingFor == nil
	case StatusSucceeded, StatusFailed, StatusCancelled, StatusCompensated:
	}
	return false
}

// Step returns the state of the named step, or nil.
func (r *Run) Step(name string) *StepState {
	for i := range r.Steps {
		if r.Steps[i].Name == name {
			return &r.Steps[i]
		}
	}
	return nil
}

// TimePtr returns a pointer to t in UTC, or nil for the zero time.
func TimePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// RawJSON returns s as raw JSON, or nil for "".
func RawJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// RunFromRecord is the Run a client reads from a run record.
func RunFromRecord(rec *retrystate.Run) *Run {
	r := &Run{
		ID: rec.ID, Workflow: rec.Workflow, Status: rec.Status, Warning: rec.Warning,
		NeedsAttention: rec.NeedsAttention, AttentionReason: rec.AttentionReason, FailureCode: rec.FailureCode, FailureReason: rec.FailureReason,
		Owner: rec.Owner, IdempotencyKey: rec.IdempotencyKey, Input: RawJSON(rec.Input),
		Iterations: rec.Iterations, Gotos: rec.Gotos, CreatedAt: rec.CreatedAt.UTC(), StartedAt: TimePtr(rec.StartedAt),
		UpdatedAt: rec.UpdatedAt.UTC(), FinishedAt: TimePtr(rec.FinishedAt), Deadline: TimePtr(rec.Deadline),
	}
	for _, s := range rec.Steps {
		st := StepStateOf(s)
		st.Group, st.GroupOptional = s.Group, s.GroupOptional
		if s.Compensation != nil {
			c := StepStateOf(*s.Compensation)
			st.Compensation = &c
		}
		r.Steps = append(r.Steps, st)
	}
	r.OnFailure = FailureAction(rec.OnFailure)
	if rec.Paused {
		r.Paused = &Paused{At: rec.PausedAt.UTC(), By: rec.PausedBy, Parked: rec.Parked}
	}
	stepName := func(i int) string {
		if i >= 0 && i < len(rec.Steps) {
			return rec.Steps[i].Name
		}
		return ""
	}
	if sg := rec.Saga; sg != nil {
		r.Compensating = &Compensating{Then: sg.Ending, FailedStep: stepName(sg.FailedStep), Group: sg.Group,
			FromStep: stepName(sg.From), ToStep: stepName(sg.To), Code: sg.Code, Reason: sg.Reason}
	}
	switch cur := rec.Current; {
	case cur >= 0 && cur < len(rec.Steps):
		r.CurrentStep = rec.Steps[cur].Name
		if r.WaitingFor == nil {
			// The run is not waiting itself: it waits when its current step does.
			r.WaitingFor = r.Steps[cur].WaitingFor
		}
	case retrystate.IsCompensation(cur) && cur-retrystate.CompBase < len(rec.Steps):
		r.CurrentStep = retrystate.CompensationPrefix + rec.Steps[cur-retrystate.CompBase].Name
	}
	r.OrderingKey, r.OrderingShared = rec.OrderingKey, rec.OrderingShared
	switch rec.Waiting {
	case WaitOrderingKey:
		r.WaitingFor = &WaitingFor{OrderingKey: rec.OrderingKey, Shared: rec.OrderingShared, Position: rec.Position,
			HeldBy: rec.HeldBy}
	case WaitWorkflowLimit:
		r.WaitingFor = &WaitingFor{WorkflowLimit: rec.MaxRunning, Position: rec.Position}
	case WaitSignal, WaitTimer: // a step's wait, not the run's: see the step
	}
	return r
}

// StepStateOf is the state of a step record (a step's, or a compensation's).
func StepStateOf(s retrystate.Step) StepState {
	st := StepState{
		Name: s.Name, Status: s.Status, Optional: s.Optional, Attempts: s.AttemptsStarted,
		RetryAttempts: s.RetryAttempts, Snoozes: s.Snoozes, Snoozed: s.Snoozed, RetryState: s.RetryState, NextAttemptAt: TimePtr(s.NextAttemptAt),
		LastError: s.LastError, LastErrorClass: s.LastErrorClass, LastErrorCode: s.LastErrorCode,
		Crashes: s.Crashes, StartedAt: TimePtr(s.StartedAt), FinishedAt: TimePtr(s.FinishedAt),
		Output: RawJSON(s.Output),
	}
	if st.RetryState == "" {
		st.RetryState = RetryNone
	}
	var p Policy
	if s.Policy != "" && json.Unmarshal([]byte(s.Policy), &p) == nil {
		st.EffectivePolicy = &p
	}
	st.WaitingFor = StepWaitingFor(s) // an await or a sleep (waits.go)
	return st
}

// Event is one journal entry of a run: every transition of the run and its
// steps, oldest first.
type Event struct {
	ID      string            `json:"id"`
	Type    string            `json:"type"`
	At      time.Time         `json:"at"`
	Step    string            `json:"step,omitempty"`
	Attempt int               `json:"attempt,omitempty"`
	Details map[string]string `json:"details,omitempty"`
}

// Journal event types.
const (
	EventRunStarted         = retrystate.EventRunStarted
	EventAttemptStarted     = retrystate.EventAttemptStarted
	EventAttemptSucceeded   = retrystate.EventAttemptSucceeded
	EventAttemptFailed      = retrystate.EventAttemptFailed
	EventAttemptCrashed     = retrystate.EventAttemptCrashed
	EventAttemptInterrupted = retrystate.EventAttemptInterrupted
	EventRetryScheduled     = retrystate.EventRetryScheduled
	EventStepSnoozed        = retrystate.EventStepSnoozed
	EventStepGoto           = retrystate.EventStepGoto
	EventStepSuperseded     = retrystate.EventStepSuperseded
	EventRunSucceeded       = retrystate.EventRunSucceeded
	EventRunFailed          = retrystate.EventRunFailed
	EventRunCancelled       = retrystate.EventRunCancelled
	EventRunRecovered       = retrystate.EventRunRecovered
	EventStepSkipped        = retrystate.EventStepSkipped
	EventRepair             = retrystate.EventRepair
	EventNeedsAttention     = retrystate.EventNeedsAttention
	EventDeliveryIgnored    = retrystate.EventDeliveryIgnored
	EventRunWaiting         = retrystate.EventRunWaiting
	EventRunAdmitted        = retrystate.EventRunAdmitted
	// EventRetryNow: an operator (Client.RetryNow, actor) or asynq's
	// RunTask (asynqmon's "Run"; via asynq_run_task) made a step's
	// scheduled retry due now (due_at: the due time it had).
	EventRetryNow = retrystate.EventRetryNow
	// EventRunCompensating and the five after it are journaled by
	// compensations and step groups (Step.Compensate, Step.Group).
	EventRunCompensating       = retrystate.EventRunCompensating
	EventCompensationStarted   = retrystate.EventCompensationStarted
	EventCompensationSucceeded = retrystate.EventCompensationSucceeded
	EventCompensationFailed    = retrystate.EventCompensationFailed
	EventRunCompensated        = retrystate.EventRunCompensated
	EventGroupRolledBack       = retrystate.EventGroupRolledBack
	// EventPaused, EventResumed and EventDispatchParked are journaled by
	// Client.Pause and Client.Resume, and by a paused run's deliveries.
	EventPaused         = retrystate.EventPaused
	EventResumed        = retrystate.EventResumed
	EventDispatchParked = retrystate.EventDispatchParked
)

// EventFromEntry is the Event of a journal entry.
func EventFromEntry(e retrystate.Entry) Event {
	ev := Event{ID: e.ID, Type: e.Type, At: e.At.UTC(), Step: e.Step, Attempt: e.Attempt}
	if len(e.Fields) > 0 {
		ev.Details = make(map[string]string, len(e.Fields))
		for k, v := range e.Fields {
			if v == "" {
				continue
			}
			if k == "due_at" || k == "until" { // stored as Unix ms; shown as RFC 3339
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					v = time.UnixMilli(n).UTC().Format(time.RFC3339Nano)
				}
			}
			ev.Details[k] = v
		}
	}
	return ev
}

// DueAt returns the due time of a retry_scheduled event.
func (e Event) DueAt() (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, e.Details["due_at"])
	return t, err == nil
}

// FinalStatus is the status a run ends with after a failure a script
// answered with Then, and false when the run goes on (compensating, or
// after a rolled-back optional group).
func FinalStatus(then string) (RunStatus, bool) {
	switch then {
	case retrystate.ThenFailed:
		return StatusFailed, true
	case retrystate.ThenCompensated:
		return StatusCompensated, true
	case retrystate.ThenSucceeded:
		return StatusSucceeded, true
	}
	return "", false
}

// Paused is how a run is paused (Run.Paused).
type Paused struct {
	// At is when it was paused, By who paused it (the actor).
	At time.Time `json:"at"`
	By string    `json:"by"`
	// Parked: a dispatch of the current step arrived while paused and waits
	// for the resume, which writes its task again (due at its due time).
	Parked bool `json:"parked"`
}
