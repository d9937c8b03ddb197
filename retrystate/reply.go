package retrystate

import (
	"fmt"
	"strconv"
	"time"
)

// This file is the protocol between the Go side and the Lua scripts: every
// reply of a state script is decoded here, by one function per kind of reply,
// and nowhere else. A reply is a flat array whose first element is an outcome
// word; the elements after it are positional, as each script's header
// documents. The layouts below restate them. A reply of the wrong length,
// with an unknown outcome word or with a malformed number is an error
// wrapping ErrUnexpectedReply.

// decoded is a decoded script reply: the script's Outcome and the fields
// that outcome sets (see the Outcome constants); the others are zero. Each
// operation turns it into its typed result (outcome.go).
type decoded struct {
	Outcome Outcome
	// Dispatch is the task that must exist for the run to go on.
	Dispatch *Dispatch
	// Enqueued: the script wrote Dispatch's task itself.
	Enqueued bool
	// RunID is the run the idempotency key started (OutcomeExists) or the
	// run created (OutcomeCreated).
	RunID string
	// RunStatus is the run's status (OutcomeEnded, OutcomeDone,
	// OutcomeAlreadyCancelled).
	RunStatus RunStatus
	// Code and Reason of a run that failed; Reason also says why an
	// action was refused, why a run needs attention, or why nothing was
	// done.
	Code   string
	Reason string
	// Wait is how long to wait before trying again (OutcomeBusy,
	// OutcomeEarly).
	Wait time.Duration
	// Why the attempt no longer owns its step (OutcomeFenced).
	Why string
	// Kind names a reconciler's repair: crashed_attempt, task_missing,
	// retry_task_missing, task_archived, stalled_delivery, deadline.
	Kind string
	// Workflow is the run's workflow (OutcomeDispatch).
	Workflow string
	// Task and StepStatus: the current step's task ID and status.
	Task       string
	StepStatus StepStatus
	// Crashes counted on the step (OutcomeDispatch of kind
	// crashed_attempt).
	Crashes int
	// Started is the attempt a begin started (OutcomeOK).
	Started *Started
	// StepKind is the kind of the step (OutcomeWait, OutcomeWake).
	StepKind StepKind
	// Trace is the run's trace context (OutcomeWait and OutcomeWake of a
	// begin with BeginParams.Trace; an attempt's is Started.Trace).
	Trace string
	// WaitReason is what the step waits for (OutcomeWaiting).
	WaitReason WaitReason
	// Step is the step a signal completed (OutcomeDelivered, and
	// OutcomeRunSucceeded of a signal).
	Step string
	// Pending is the number of signals in the run's mailbox
	// (OutcomeQueued), or its maximum (outcomeMailboxFull).
	Pending int
	// Position is a waiting run's place in its gate's line, from 1
	// (OutcomeWaiting of create, operate, restore).
	Position int
	// Then says what follows a run's failure (OutcomeRunFailed): one of
	// the Then constants; ThenFailed ("") when the run failed.
	Then string
	// RecheckAt is when to look at the run again (OutcomeRecheck).
	RecheckAt time.Time
	// Acked: the script acknowledged the delivery's asynq task with its
	// write (complete.lua with CompleteParams.Ack).
	Acked bool
}

// failure returns d's RunFailure: the whole of it for OutcomeRunFailed,
// the run's failure code for OutcomeDone (fail) and OutcomeCompensated.
func (d decoded) failure() RunFailure {
	switch d.Outcome {
	case OutcomeRunFailed:
		return RunFailure{Code: d.Code, Reason: d.Reason, Then: d.Then}
	case OutcomeDone, OutcomeCompensated:
		return RunFailure{Code: d.Code}
	default:
		return RunFailure{}
	}
}

// next returns d's dispatch and whether the script wrote its task.
func (d decoded) next() Next { return Next{Dispatch: d.Dispatch, Enqueued: d.Enqueued} }

// gateWait returns d's place in a gate's line (OutcomeWaiting of create,
// operate, restore).
func (d decoded) gateWait() GateWait { return GateWait{WaitReason: d.WaitReason, Position: d.Position} }

// Reply layouts: the positions of the elements of each reply, counted from
// the outcome word, element 0 (peek.lua's reply has no word). Every element
// of a layout is present: the length of a reply is fixed by its outcome word,
// but for begin's "ok", whose earlier steps follow, and begin's "stale", with
// or without a dispatch.

// begin.lua, {"ok", ...}: the attempt, then the name and output of each
// earlier step.
const (
	okAttempt     = 1 + iota // attempt number
	okCrashes                // crashes of the step ("0" unless resumed after a crash)
	okResumed                // "1": resumed after a crash; "interrupted": after a release; "snoozed"; "0"
	okInput                  // the run's input (JSON)
	okPolicy                 // the step's effective policy (JSON)
	okUsed                   // attempts used in the budget, this one included
	okDeadline               // the run's deadline, ms ("0": none)
	okNextName               // the next step's name ("" for none)
	okNextAttempt            // its attempt counter (its next attempt is one more)
	okNextTimeout            // its timeout, ms
	okEarlier                // from here: name, output pairs (after the trace, with BeginParams.Trace)
)

// Replies made of single fields after the word.
const (
	// {"ended", status}, {"done", status} (complete), {"busy", wait_ms},
	// {"early", wait_ms}, {"fenced", why}, {"attention", reason},
	// {"noop", reason}, {"refused", reason}, {"exists", run ID}.
	replyField = 1
	// {"failed", code, reason, then} (begin, fail, redispatch, wait,
	// snooze, goto; compdone with then "").
	failedCode, failedReason, failedThen, failedLen = 1, 2, 3, 4
	// {"done", status, failure code} (fail).
	doneStatus, doneCode = 1, 2
	// {"created", task ID of step 0, attempt}.
	createdTask, createdAttempt, createdEnqueued = 1, 2, 3
	// {"cancelled", task ID of the current step, its status before}.
	cancelledTask, cancelledStepStatus = 1, 2
	// {"failed", task ID of the current step, its status before, reason,
	// then} (timeout).
	expiredTask, expiredStepStatus, expiredReason, expiredThen, expiredLen = 1, 2, 3, 4, 5
)

// absent marks a Dispatch field a reply does not carry: it stays zero.
const absent = -1

// dispatchAt gives the positions of a Dispatch's fields in a reply (absent:
// not carried). Times are ms.
type dispatchAt struct{ index, name, attempt, gen, due, timeout int }

// The dispatches of the replies, and the elements that follow them.
var (
	// {"stale", index, name, attempt, gen, due_ms, timeout_ms} (begin), and
	// repair.lua's {"repair", ..., kind, workflow}.
	staleDispatch = dispatchAt{index: 1, name: 2, attempt: 3, gen: 4, due: 5, timeout: 6}
	// {"deferred", until, index, name, attempt, gen, timeout_ms} (begin).
	deferredDispatch = dispatchAt{index: 2, name: 3, attempt: 4, gen: 5, due: 1, timeout: 6}
	// {"next", index, name, attempt, timeout_ms, enqueued} (complete).
	nextDispatch = dispatchAt{index: 1, name: 2, attempt: 3, gen: absent, due: absent, timeout: 4}
	// {"retry", due_ms, attempt, timeout_ms, enqueued} (fail): the index is
	// the failed step's.
	retryDispatch = dispatchAt{index: absent, name: absent, attempt: 2, gen: absent, due: 1, timeout: 3}
	// {"released", index, name, attempt, gen, timeout_ms, enqueued}.
	releasedDispatch = dispatchAt{index: 1, name: 2, attempt: 3, gen: 4, due: absent, timeout: 5}
	// {"redispatched", index, name, attempt, gen, timeout_ms, crashes, workflow}.
	redispatchedDispatch = releasedDispatch
	// {"dispatch", index, name, attempt, timeout_ms, workflow} (operate,
	// restore).
	actionDispatch = nextDispatch
	// {"snoozed", index, name, attempt, gen, due_ms, timeout_ms, enqueued}.
	snoozedDispatch = dispatchAt{index: 1, name: 2, attempt: 3, gen: 4, due: 5, timeout: 6}
	// {"goto", index, name, attempt, timeout_ms, enqueued}.
	gotoDispatch = nextDispatch
	// {"waiting", reason, until_ms, index, name, attempt, gen, timeout_ms,
	// enqueued} (wait): the wake-up.
	waitingDispatch = dispatchAt{index: 3, name: 4, attempt: 5, gen: 6, due: 2, timeout: 7}
	// {"delivered", step, wake-up task, index, name, attempt, timeout_ms,
	// workflow} (signal): the next step.
	deliveredDispatch = dispatchAt{index: 3, name: 4, attempt: 5, gen: absent, due: absent, timeout: 6}
	// peek.lua's reply has no outcome word: {status, needs_attention,
	// updated_at, current index, step name, step status, attempt, gen,
	// task, next_attempt_at, fence_expires_at, timeout_ms}.
	peekDispatch = dispatchAt{index: 3, name: 4, attempt: 6, gen: 7, due: 9, timeout: 11}
)

// Positions of the other elements of the dispatch replies, and their lengths.
const (
	nextEnqueued, nextLen                                      = 5, 6
	retryEnqueued, retryLen                                    = 4, 5
	releasedEnqueued, releasedLen                              = 6, 7
	snoozedEnqueued, snoozedLen                                = 7, 8
	gotoEnqueued, gotoLen                                      = nextEnqueued, nextLen
	redispatchedCrashes, redispatchedWorkflow, redispatchedLen = 6, 7, 8
	repairKind, repairWorkflow, repairLen                      = 7, 8, 9
	actionWorkflow, actionLen                                  = 5, 6
	waitingReason, waitingEnqueued, waitingLen                 = 1, 8, 9
	deliveredStep, deliveredTask, deliveredWorkflow            = 1, 2, 7
	deliveredLen, signalSucceededLen                           = 8, 3
	staleLen                                                   = 7
	// {"inline", index, name, attempt, timeout_ms, policy, deadline, the
	// step after it's name, attempt counter and timeout_ms} (complete).
	inlinePolicy, inlineDeadline, inlineNextName          = 5, 6, 7
	inlineNextAttempt, inlineNextTimeout, inlineLen       = 8, 9, 10
	peekStatus, peekAttention, peekUpdated, peekStepState = 0, 1, 2, 5
	peekTask, peekFenceExpires, peekLen                   = 8, 10, 12
)

// reply reads the elements of one script reply, keeping the first problem it
// finds.
type reply struct {
	op  string
	res []string
	err error
}

func newReply(op string, res []string) *reply { return &reply{op: op, res: res} }

func (r *reply) failf(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s: %s: %q", ErrUnexpectedReply, r.op, fmt.Sprintf(format, args...), r.res)
	}
}

// word returns the outcome word, element 0.
func (r *reply) word() string {
	if len(r.res) == 0 {
		r.failf("empty reply")
		return ""
	}
	return r.res[0]
}

// unknown records that the outcome word is not one the script replies with.
func (r *reply) unknown() {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s: %w %q: %q", ErrUnexpectedReply, r.op, errUnknownOutcome, r.word(), r.res)
	}
}

// want checks that the reply has n elements.
func (r *reply) want(n int) {
	if len(r.res) != n {
		r.failf("%d elements, want %d", len(r.res), n)
	}
}

// result returns res, or the reply's error.
func (r *reply) result(res decoded) (decoded, error) {
	if r.err != nil {
		return decoded{}, r.err
	}
	return res, nil
}

func (r *reply) str(i int) string {
	if i < 0 || i >= len(r.res) {
		r.failf("no element %d", i)
		return ""
	}
	return r.res[i]
}

// integer reads a decimal integer; "" (an unset field) is 0.
func (r *reply) integer(i int) int {
	s := r.str(i)
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		r.failf("element %d: %q is not an integer", i, s)
	}
	return n
}

// millis reads a duration in milliseconds.
func (r *reply) millis(i int) time.Duration { return time.Duration(r.integer(i)) * time.Millisecond }

// instant reads Unix milliseconds; 0 (or less, or "") is the zero time.
func (r *reply) instant(i int) time.Time {
	n := r.integer(i)
	if n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(n))
}

// flag reads "0" or "1".
func (r *reply) flag(i int) bool {
	switch s := r.str(i); s {
	case "1":
		return true
	case "0", "":
		return false
	default:
		r.failf("element %d: %q is not 0 or 1", i, s)
		return false
	}
}

// dispatch reads the Dispatch at the positions at.
func (r *reply) dispatch(at dispatchAt) *Dispatch {
	d := &Dispatch{}
	if at.index != absent {
		d.Index = r.integer(at.index)
	}
	if at.name != absent {
		d.Name = r.str(at.name)
	}
	if at.attempt != absent {
		d.Attempt = r.integer(at.attempt)
	}
	if at.gen != absent {
		d.Gen = r.integer(at.gen)
	}
	if at.due != absent {
		d.DueAt = r.instant(at.due)
	}
	if at.timeout != absent {
		d.Timeout = r.millis(at.timeout)
	}
	return d
}

// decodeCreate decodes create.lua's reply: {"created", task ID, attempt} or
// {"exists", run ID}. runID and first are the run asked for and its first
// step.
func decodeCreate(res []string, runID string, first NewStep) (decoded, error) {
	r := newReply("create", res)
	switch r.word() {
	case "created":
		r.want(4)
		return r.result(decoded{Outcome: OutcomeCreated, RunID: runID, Task: r.str(createdTask),
			Dispatch: &Dispatch{Index: 0, Name: first.Name, Attempt: r.integer(createdAttempt), Timeout: first.Timeout},
			Enqueued: r.flag(createdEnqueued)})
	case "stale":
		r.want(2)
		return r.result(decoded{Outcome: OutcomeStale, Reason: r.str(replyField)})
	case "exists":
		r.want(2)
		return r.result(decoded{Outcome: OutcomeExists, RunID: r.str(replyField)})
	case "waiting":
		res, err := decodeWaiting(r)
		res.RunID = runID
		return res, err
	}
	r.unknown()
	return r.result(decoded{})
}

// decodeBegin decodes begin.lua's reply to a begin of step index; traced
// says whether the begin asked for the run's trace (BeginParams.Trace), which
// then comes before the earlier steps.
func decodeBegin(res []string, index int, traced bool) (decoded, error) {
	r := newReply("begin", res)
	earlier := okEarlier
	if traced {
		earlier++
	}
	switch r.word() {
	case "ok", "comp":
		if len(res) < earlier || (len(res)-earlier)%2 != 0 {
			r.failf("%d elements, want %d and a name and output per earlier step", len(res), earlier)
			return r.result(decoded{})
		}
		resumed := r.str(okResumed)
		if resumed != "0" && resumed != "1" && resumed != "interrupted" && resumed != "snoozed" {
			r.failf("element %d: %q is not 0, 1, interrupted or snoozed", okResumed, resumed)
		}
		st := &Started{Attempt: r.integer(okAttempt), Crashes: r.integer(okCrashes), Crashed: resumed == "1",
			Snoozed: resumed == "snoozed",
			Input:   r.str(okInput), Policy: r.str(okPolicy), Used: r.integer(okUsed), Deadline: r.instant(okDeadline)}
		if traced {
			st.Trace = r.str(okEarlier)
		}
		if r.word() == "comp" {
			// A compensation (sagas): the run's failure in the next step's
			// slots, and the compensated step last of the earlier ones.
			if len(res) < earlier+2 || !IsCompensation(index) {
				r.failf("a compensation's begin for step index %d", index)
				return r.result(decoded{})
			}
			st.Compensation = &CompensationOf{Step: res[len(res)-2], Output: res[len(res)-1],
				FailureCode: r.str(okNextName), FailureReason: r.str(okNextAttempt)}
		} else if name := r.str(okNextName); name != "" {
			st.Next = &Dispatch{Index: index + 1, Name: name, Attempt: r.integer(okNextAttempt) + 1,
				Timeout: r.millis(okNextTimeout)}
		}
		for i := earlier; i+1 < len(res); i += 2 {
			st.Earlier = append(st.Earlier, Checkpoint{Name: res[i], Output: res[i+1]})
		}
		return r.result(decoded{Outcome: OutcomeOK, Started: st})
	case "gone":
		r.want(1)
		return r.result(decoded{Outcome: OutcomeGone})
	case "ended":
		r.want(2)
		return r.result(decoded{Outcome: OutcomeEnded, RunStatus: RunStatus(r.str(replyField))})
	case "stale":
		if len(res) == 1 {
			return r.result(decoded{Outcome: OutcomeStale})
		}
		r.want(staleLen)
		return r.result(decoded{Outcome: OutcomeStale, Dispatch: r.dispatch(staleDispatch)})
	case "busy":
		r.want(2)
		return r.result(decoded{Outcome: OutcomeBusy, Wait: r.millis(replyField)})
	case "early":
		r.want(2)
		return r.result(decoded{Outcome: OutcomeEarly, Wait: r.millis(replyField)})
	case "failed":
		return decodeFailed(r)
	case "paused":
		r.want(1)
		return r.result(decoded{Outcome: OutcomePaused})
	case "wait", "wake":
		o, trace := OutcomeWait, ""
		if r.word() == "wake" {
			o = OutcomeWake
		}
		if traced {
			r.want(3)
			trace = r.str(replyField + 1)
		} else {
			r.want(2)
		}
		return r.result(decoded{Outcome: o, StepKind: r.stepKind(replyField), Trace: trace})
	case "deferred":
		r.want(7)
		return r.result(decoded{Outcome: OutcomeDeferred, Dispatch: r.dispatch(deferredDispatch)})
	}
	r.unknown()
	return r.result(decoded{})
}

// stepKind reads the kind of an await or a sleep.
func (r *reply) stepKind(i int) StepKind {
	switch k := StepKind(r.str(i)); k {
	case KindAwait, KindSleep, KindSleepUntil:
		return k
	default:
		r.failf("element %d: %q is not a step kind that waits", i, k)
		return ""
	}
}

// decodeWait decodes wait.lua's reply.
func decodeWait(res []string) (decoded, error) {
	r := newReply("wait", res)
	switch r.word() {
	case "waiting":
		r.want(waitingLen)
		reason := WaitReason(r.str(waitingReason))
		if reason != WaitSignal && reason != WaitTimer {
			r.failf("element %d: %q is not a reason a step waits for", waitingReason, reason)
		}
		return r.result(decoded{Outcome: OutcomeWaiting, WaitReason: reason, Dispatch: r.dispatch(waitingDispatch),
			Enqueued: r.flag(waitingEnqueued)})
	case "next":
		r.want(nextLen)
		return r.result(decoded{Outcome: OutcomeNext, Dispatch: r.dispatch(nextDispatch), Enqueued: r.flag(nextEnqueued)})
	case "succeeded":
		r.want(1)
		return r.result(decoded{Outcome: OutcomeRunSucceeded})
	case "failed":
		return decodeFailed(r)
	case "early":
		r.want(2)
		return r.result(decoded{Outcome: OutcomeEarly, Wait: r.millis(replyField)})
	case "noop":
		return decodeReason(r, OutcomeNoop)
	}
	r.unknown()
	return r.result(decoded{})
}

// decodeSignal decodes signal.lua's reply.
func decodeSignal(res []string) (decoded, error) {
	r := newReply("signal", res)
	switch r.word() {
	case "delivered":
		r.want(deliveredLen)
		return r.result(decoded{Outcome: OutcomeDelivered, Step: r.str(deliveredStep), Task: r.str(deliveredTask),
			Dispatch: r.dispatch(deliveredDispatch), Workflow: r.str(deliveredWorkflow)})
	case "succeeded":
		r.want(signalSucceededLen)
		return r.result(decoded{Outcome: OutcomeRunSucceeded, Step: r.str(deliveredStep), Task: r.str(deliveredTask)})
	case "queued":
		r.want(2)
		return r.result(decoded{Outcome: OutcomeQueued, Pending: r.integer(replyField)})
	case "duplicate":
		r.want(1)
		return r.result(decoded{Outcome: OutcomeDuplicate})
	case "refused":
		return decodeReason(r, outcomeRefused)
	case "full":
		r.want(2)
		return r.result(decoded{Outcome: outcomeMailboxFull, Pending: r.integer(replyField)})
	case "ended":
		r.want(2)
		return r.result(decoded{Outcome: OutcomeEnded, RunStatus: RunStatus(r.str(replyField))})
	case "gone":
		r.want(1)
		return r.result(decoded{Outcome: OutcomeGone})
	}
	r.unknown()
	return r.result(decoded{})
}

// decodeFailed decodes {"failed", code, reason, then}.
func decodeFailed(r *reply) (decoded, error) {
	r.want(failedLen)
	return r.result(decoded{Outcome: OutcomeRunFailed, Code: r.str(failedCode), Reason: r.str(failedReason),
		Then: r.then(failedThen)})
}

// then reads what follows a run's failure (a Then constant).
func (r *reply) then(i int) string {
	switch t := r.str(i); t {
	case ThenFailed, ThenCompensating, ThenCompensated, ThenContinued, ThenSucceeded:
		return t
	default:
		r.failf("element %d: %q is not what follows a failure", i, t)
		return ""
	}
}

// decodeFenced decodes {"fenced", why}.
func decodeFenced(r *reply) (decoded, error) {
	r.want(2)
	return r.result(decoded{Outcome: OutcomeFenced, Why: r.str(replyField)})
}

// decodeReason decodes {word, reason} as outcome o.
func decodeReason(r *reply, o Outcome) (decoded, error) {
	r.want(2)
	return r.result(decoded{Outcome: o, Reason: r.str(replyField)})
}

// ackedMark ends a reply of complete.lua or fail.lua that acknowledged the
// delivery's asynq task (CompleteParams.Ack, FailParams.Ack).
const ackedMark = "acked"

// The lengths of the replies that may end with ackedMark, by their word,
// without it.
var (
	completeAckedLens = map[string]int{"next": nextLen, "succeeded": 1, "fenced": 2, "done": 2}
	failAckedLens     = map[string]int{"retry": retryLen, "failed": failedLen, "fenced": 2, "done": 3}
)

// stripAcked returns res without the ackedMark that ends it, and whether
// it did: a reply one element longer than its word's in lens, ending with
// the mark.
func stripAcked(res []string, lens map[string]int) ([]string, bool) {
	if n := len(res); n > 1 && res[n-1] == ackedMark && lens[res[0]] == n-1 {
		return res[:n-1], true
	}
	return res, false
}

// decodeComplete decodes complete.lua's reply.
func decodeComplete(res []string) (decoded, error) {
	if res, ok := stripAcked(res, completeAckedLens); ok {
		d, err := decodeComplete(res)
		d.Acked = err == nil
		return d, err
	}
	r := newReply("complete", res)
	switch r.word() {
	case "next":
		r.want(nextLen)
		return r.result(decoded{Outcome: OutcomeNext, Dispatch: r.dispatch(nextDispatch), Enqueued: r.flag(nextEnqueued)})
	case "inline":
		r.want(inlineLen)
		d := r.dispatch(nextDispatch)
		st := &Started{Attempt: d.Attempt, Policy: r.str(inlinePolicy), Used: 1, Deadline: r.instant(inlineDeadline)}
		if name := r.str(inlineNextName); name != "" {
			st.Next = &Dispatch{Index: d.Index + 1, Name: name, Attempt: r.integer(inlineNextAttempt) + 1,
				Timeout: r.millis(inlineNextTimeout)}
		}
		return r.result(decoded{Outcome: OutcomeInline, Dispatch: d, Started: st})
	case "succeeded":
		r.want(1)
		return r.result(decoded{Outcome: OutcomeRunSucceeded})
	case "fenced":
		return decodeFenced(r)
	case "done":
		r.want(2)
		return r.result(decoded{Outcome: OutcomeDone, RunStatus: RunStatus(r.str(replyField))})
	}
	r.unknown()
	return r.result(decoded{})
}

// decodeCompDone decodes compdone.lua's reply: complete.lua's, where "next"
// is the next compensation (or the step after a rolled-back optional
// group), its task written by the script, and a saga's ends.
func decodeCompDone(res []string) (decoded, error) {
	r := newReply("compdone", res)
	switch r.word() {
	case "compensated":
		r.want(2)
		return r.result(decoded{Outcome: OutcomeCompensated, Code: r.str(failedCode)})
	case "failed":
		return decodeFailed(r)
	case "next", "succeeded", "fenced", "done":
		return decodeComplete(res) // (a malformed one is named complete's)
	}
	r.unknown()
	return r.result(decoded{})
}

// decodeFail decodes fail.lua's reply to a failure of step index.
func decodeFail(res []string, index int) (decoded, error) {
	if res, ok := stripAcked(res, failAckedLens); ok {
		d, err := decodeFail(res, index)
		d.Acked = err == nil
		return d, err
	}
	r := newReply("fail", res)
	switch r.word() {
	case "retry":
		r.want(retryLen)
		d := r.dispatch(retryDispatch)
		d.Index = index
		return r.result(decoded{Outcome: OutcomeRetry, Dispatch: d, Enqueued: r.flag(retryEnqueued)})
	case "failed":
		return decodeFailed(r)
	case "fenced":
		return decodeFenced(r)
	case "done":
		r.want(3)
		return r.result(decoded{Outcome: OutcomeDone, RunStatus: RunStatus(r.str(doneStatus)), Code: r.str(doneCode)})
	}
	r.unknown()
	return r.result(decoded{})
}

// decodeSnooze decodes snooze.lua's reply.
func decodeSnooze(res []string) (decoded, error) {
	r := newReply("snooze", res)
	switch r.word() {
	case "snoozed":
		r.want(snoozedLen)
		return r.result(decoded{Outcome: OutcomeSnoozed, Dispatch: r.dispatch(snoozedDispatch),
			Enqueued: r.flag(snoozedEnqueued)})
	case "failed":
		return decodeFailed(r)
	case "fenced":
		return decodeFenced(r)
	case "done":
		r.want(2)
		return r.result(decoded{Outcome: OutcomeDone, RunStatus: RunStatus(r.str(replyField))})
	}
	r.unknown()
	return r.result(decoded{})
}

// decodeGoto decodes goto.lua's reply.
func decodeGoto(res []string) (decoded, error) {
	r := newReply("goto", res)
	switch r.word() {
	case "goto":
		r.want(gotoLen)
		return r.result(decoded{Outcome: OutcomeGoto, Dispatch: r.dispatch(gotoDispatch), Enqueued: r.flag(gotoEnqueued)})
	case "failed":
		return decodeFailed(r)
	case "fenced":
		return decodeFenced(r)
	case "done":
		r.want(2)
		return r.result(decoded{Outcome: OutcomeDone, RunStatus: RunStatus(r.str(replyField))})
	}
	r.unknown()
	return r.result(decoded{})
}

// decodeRelease decodes release.lua's reply.
func decodeRelease(res []string) (decoded, error) {
	r := newReply("release", res)
	switch r.word() {
	case "released":
		r.want(releasedLen)
		return r.result(decoded{Outcome: OutcomeReleased, Dispatch: r.dispatch(releasedDispatch),
			Enqueued: r.flag(releasedEnqueued)})
	case "fenced":
		return decodeFenced(r)
	}
	r.unknown()
	return r.result(decoded{})
}

// decodeCancel decodes cancel.lua's reply.
func decodeCancel(res []string) (decoded, error) {
	r := newReply("cancel", res)
	switch r.word() {
	case "cancelled":
		r.want(3)
		return r.result(decoded{Outcome: OutcomeCancelled, Task: r.str(cancelledTask),
			StepStatus: StepStatus(r.str(cancelledStepStatus))})
	case "compensating":
		r.want(3)
		return r.result(decoded{Outcome: OutcomeCompensating, Task: r.str(cancelledTask),
			StepStatus: StepStatus(r.str(cancelledStepStatus))})
	case "already":
		r.want(2)
		return r.result(decoded{Outcome: OutcomeAlreadyCancelled, RunStatus: RunStatus(r.str(replyField))})
	case "refused":
		return decodeReason(r, outcomeRefused)
	case "ended":
		r.want(2)
		return r.result(decoded{Outcome: OutcomeEnded, RunStatus: RunStatus(r.str(replyField))})
	case "gone":
		r.want(1)
		return r.result(decoded{Outcome: OutcomeGone})
	}
	r.unknown()
	return r.result(decoded{})
}

// decodeRedispatch decodes redispatch.lua's reply.
func decodeRedispatch(res []string) (decoded, error) {
	const kind = "crashed_attempt"
	r := newReply("redispatch", res)
	switch r.word() {
	case "redispatched":
		r.want(redispatchedLen)
		return r.result(decoded{Outcome: OutcomeDispatch, Kind: kind, Dispatch: r.dispatch(redispatchedDispatch),
			Crashes: r.integer(redispatchedCrashes), Workflow: r.str(redispatchedWorkflow)})
	case "failed":
		out, err := decodeFailed(r)
		if err == nil {
			out.Kind = kind
		}
		return out, err
	case "attention":
		out, err := decodeReason(r, OutcomeAttention)
		if err == nil {
			out.Kind = kind
		}
		return out, err
	case "noop":
		return decodeReason(r, OutcomeNoop)
	}
	r.unknown()
	return r.result(decoded{})
}

// decodeRepair decodes repair.lua's reply.
func decodeRepair(res []string) (decoded, error) {
	r := newReply("repair", res)
	switch r.word() {
	case "repair":
		r.want(repairLen)
		return r.result(decoded{Outcome: OutcomeDispatch, Dispatch: r.dispatch(staleDispatch), Enqueued: true,
			Kind: r.str(repairKind), Workflow: r.str(repairWorkflow)})
	case "attention":
		return decodeReason(r, OutcomeAttention)
	case "noop":
		return decodeReason(r, OutcomeNoop)
	case "recheck":
		r.want(2)
		return r.result(decoded{Outcome: OutcomeRecheck, RecheckAt: r.instant(replyField)})
	case "crashed":
		r.want(1)
		return r.result(decoded{Outcome: OutcomeCrashed})
	}
	r.unknown()
	return r.result(decoded{})
}

// decodeTimeout decodes timeout.lua's reply.
func decodeTimeout(res []string) (decoded, error) {
	r := newReply("timeout", res)
	switch r.word() {
	case "failed":
		r.want(expiredLen)
		return r.result(decoded{Outcome: OutcomeRunFailed, Kind: "deadline", Code: CodeRunTimeout,
			Task: r.str(expiredTask), StepStatus: StepStatus(r.str(expiredStepStatus)), Reason: r.str(expiredReason),
			Then: r.then(expiredThen)})
	case "noop":
		return decodeReason(r, OutcomeNoop)
	}
	r.unknown()
	return r.result(decoded{})
}

// decodeAction decodes the reply of operate.lua (op: the action) or
// restore.lua (op "restore", which never replies "succeeded").
func decodeAction(res []string, op string) (decoded, error) {
	r := newReply(op, res)
	switch r.word() {
	case "dispatch":
		r.want(actionLen)
		return r.result(decoded{Outcome: OutcomeDispatch, Dispatch: r.dispatch(actionDispatch),
			Workflow: r.str(actionWorkflow)})
	case "succeeded":
		if op == ActionRestore {
			break
		}
		r.want(1)
		return r.result(decoded{Outcome: OutcomeRunSucceeded})
	case "refused":
		return decodeReason(r, outcomeRefused)
	case "waiting":
		return decodeWaiting(r)
	case "gone":
		r.want(1)
		return r.result(decoded{Outcome: OutcomeGone})
	}
	r.unknown()
	return r.result(decoded{})
}

// decodeWaiting decodes {"waiting", reason, position} (create, operate,
// restore).
func decodeWaiting(r *reply) (decoded, error) {
	r.want(3)
	reason := WaitReason(r.str(replyField))
	if reason != WaitOrderingKey && reason != WaitWorkflowLimit && r.err == nil {
		r.failf("element %d: %q is not a gate's wait reason", replyField, reason)
	}
	pos := r.integer(replyField + 1)
	if pos < 1 && r.err == nil {
		r.failf("element %d: position %d", replyField+1, pos)
	}
	return r.result(decoded{Outcome: OutcomeWaiting, WaitReason: reason, Position: pos})
}

// decodePeek decodes peek.lua's reply for a run that exists (it replies {}
// for one that does not).
func decodePeek(res []string) (Current, error) {
	r := newReply("peek", res)
	r.want(peekLen)
	if r.err != nil {
		return Current{}, r.err
	}
	c := Current{Status: RunStatus(r.str(peekStatus)), NeedsAttention: r.flag(peekAttention),
		UpdatedAt: r.instant(peekUpdated), StepStatus: StepStatus(r.str(peekStepState)), Task: r.str(peekTask),
		FenceExpiresAt: r.instant(peekFenceExpires), Dispatch: *r.dispatch(peekDispatch)}
	if r.err != nil {
		return Current{}, r.err
	}
	return c, nil
}

// decodeRenewal decodes renew.lua's reply: 1, 0 or -1.
func decodeRenewal(n int64) (Renewal, error) {
	switch r := Renewal(n); r {
	case Renewed, FenceLost, RunStopped:
		return r, nil
	}
	return FenceLost, fmt.Errorf("%w: renew: %d", ErrUnexpectedReply, n)
}

// decodeGate decodes gate.lua's reply: {"gate", dropped, started}.
func decodeGate(res []string) (dropped, started int, err error) {
	r := newReply("gate", res)
	if r.word() != "gate" {
		r.unknown()
		_, err := r.result(decoded{})
		return 0, 0, err
	}
	r.want(3)
	dropped, started = r.integer(1), r.integer(2)
	if r.err != nil {
		return 0, 0, r.err
	}
	return dropped, started, nil
}
