package retrystate

import (
	"errors"
	"slices"
	"testing"
)

// everyOutcome lists every Outcome constant.
var everyOutcome = []Outcome{OutcomeOK, OutcomeGone, OutcomeEnded, OutcomeStale, OutcomeBusy, OutcomeDeferred,
	OutcomeEarly, OutcomeRunFailed, OutcomeCreated, OutcomeExists, OutcomeNext, OutcomeInline, OutcomeRunSucceeded,
	OutcomeFenced, OutcomeDone, OutcomeRetry, OutcomeReleased, OutcomeCancelled, OutcomeAlreadyCancelled,
	OutcomeDispatch, OutcomeAttention, OutcomeNoop, OutcomeRecheck, OutcomeCrashed, outcomeRefused, OutcomeWait,
	OutcomeWake, OutcomeWaiting, OutcomeDelivered, OutcomeQueued, OutcomeDuplicate, outcomeMailboxFull,
	OutcomeSnoozed, OutcomeGoto, OutcomeCompensated, OutcomeCompensating, OutcomeDue}

// TestResultsRefuseOtherOutcomes: each operation's typed result takes the
// outcomes that operation answers, and only those: a decoded reply with
// any other (a script and its Go side that disagree) is an error wrapping
// ErrUnexpectedReply, not a result the caller would misread. (The
// refusals of cancel, operate, restore and signal are errors before the
// conversion: TestRefusalsAreErrors.)
func TestResultsRefuseOtherOutcomes(t *testing.T) {
	t.Parallel()
	ops := []struct {
		op      string
		answers []Outcome
		convert func(decoded, error) error
	}{
		{"begin", []Outcome{OutcomeOK, OutcomeGone, OutcomeEnded, OutcomeStale, OutcomeBusy, OutcomeEarly,
			OutcomeDeferred, OutcomeRunFailed, OutcomeWait, OutcomeWake},
			func(d decoded, err error) error { _, err = beginResult(d, err); return err }},
		{"complete", []Outcome{OutcomeNext, OutcomeInline, OutcomeRunSucceeded, OutcomeFenced, OutcomeDone,
			OutcomeCompensated, OutcomeRunFailed},
			func(d decoded, err error) error { _, err = completeResult(d, err); return err }},
		{"fail", []Outcome{OutcomeRetry, OutcomeRunFailed, OutcomeFenced, OutcomeDone},
			func(d decoded, err error) error { _, err = failResult(d, err); return err }},
		{"release", []Outcome{OutcomeReleased, OutcomeFenced},
			func(d decoded, err error) error { _, err = releaseResult(d, err); return err }},
		{"create", []Outcome{OutcomeCreated, OutcomeWaiting, OutcomeExists, OutcomeStale},
			func(d decoded, err error) error { _, err = createResult(d, err); return err }},
		{"cancel", []Outcome{OutcomeCancelled, OutcomeCompensating, OutcomeAlreadyCancelled},
			func(d decoded, err error) error { _, err = cancelResult(d, err); return err }},
		{"operate", []Outcome{OutcomeDispatch, OutcomeRunSucceeded, OutcomeWaiting},
			func(d decoded, err error) error { _, err = operateResult(ActionRecover, d, err); return err }},
		{"restore", []Outcome{OutcomeDispatch, OutcomeWaiting},
			func(d decoded, err error) error { _, err = restoreResult(d, err); return err }},
		{"expire", []Outcome{OutcomeRunFailed, OutcomeNoop},
			func(d decoded, err error) error { _, err = expireResult(d, err); return err }},
		{"redispatch", []Outcome{OutcomeDispatch, OutcomeRunFailed, OutcomeAttention, OutcomeNoop},
			func(d decoded, err error) error { _, err = redispatchResult(d, err); return err }},
		{"repair", []Outcome{OutcomeDispatch, OutcomeAttention, OutcomeNoop},
			func(d decoded, err error) error { _, err = repairResult(d, err); return err }},
		{"check", []Outcome{OutcomeDispatch, OutcomeAttention, OutcomeNoop, OutcomeRecheck, OutcomeCrashed},
			func(d decoded, err error) error { _, err = checkResult(d, err); return err }},
		{"signal", []Outcome{OutcomeDelivered, OutcomeRunSucceeded, OutcomeQueued, OutcomeDuplicate},
			func(d decoded, err error) error { _, err = signalResult(d, err); return err }},
		{"wait", []Outcome{OutcomeWaiting, OutcomeNext, OutcomeRunSucceeded, OutcomeRunFailed, OutcomeEarly, OutcomeNoop},
			func(d decoded, err error) error { _, err = waitResult(d, err); return err }},
		{"snooze", []Outcome{OutcomeSnoozed, OutcomeRunFailed, OutcomeFenced, OutcomeDone},
			func(d decoded, err error) error { _, err = snoozeResult(d, err); return err }},
		{"goto", []Outcome{OutcomeGoto, OutcomeRunFailed, OutcomeFenced, OutcomeDone},
			func(d decoded, err error) error { _, err = gotoResult(d, err); return err }},
		{"retry now", []Outcome{OutcomeDue, OutcomeNoop},
			func(d decoded, err error) error { _, err = retryNowResult(d, err); return err }},
	}
	for _, op := range ops {
		for _, o := range everyOutcome {
			err := op.convert(decoded{Outcome: o}, nil)
			switch {
			case slices.Contains(op.answers, o) && err != nil:
				t.Errorf("%s: %s: %v", op.op, o, err)
			case !slices.Contains(op.answers, o) && !errors.Is(err, ErrUnexpectedReply):
				t.Errorf("%s: %s: %v; want ErrUnexpectedReply", op.op, o, err)
			}
		}
		// The decoder's error passes through.
		if err := op.convert(decoded{}, errUnknownOutcome); !errors.Is(err, errUnknownOutcome) {
			t.Errorf("%s: a decoder's error: %v", op.op, err)
		}
	}
}

// TestRefusalsAreErrors: the outcomes a caller of cancel, operate, restore
// or signal can only report are errors, which say why.
func TestRefusalsAreErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    decoded
		want error
		is   error
	}{
		{decoded{Outcome: OutcomeGone}, ErrRunNotFound, ErrRunNotFound},
		{decoded{Outcome: outcomeRefused, Reason: "no"}, &RefusedError{Reason: "no"}, ErrRefused},
		{decoded{Outcome: OutcomeEnded, RunStatus: StatusFailed}, &RunEndedError{Status: StatusFailed}, ErrRunEnded},
		{decoded{Outcome: outcomeMailboxFull, Pending: 100}, &MailboxFullError{Pending: 100}, ErrMailboxFull},
	} {
		d, err := refusal(c.d, nil)
		if !errors.Is(err, c.want) || !errors.Is(err, c.is) || d.Outcome != "" {
			t.Errorf("%s: %+v, %v; want %v", c.d.Outcome, d, err, c.want)
		}
	}
	if errors.Is(&RefusedError{Reason: "a"}, &RefusedError{Reason: "b"}) {
		t.Error("refusals for different reasons are the same error")
	}
	if d, err := refusal(decoded{Outcome: OutcomeQueued, Pending: 2}, nil); err != nil || d.Pending != 2 {
		t.Errorf("queued: %+v, %v", d, err)
	}
}
