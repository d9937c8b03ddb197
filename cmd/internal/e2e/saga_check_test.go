package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/workflow"
)

// sagaSynth writes a made-up saga run as the engine and the bodies would:
// its record, journal and audit, one millisecond per entry, every body on
// pid 1.
type sagaSynth struct {
	id    string
	in    demo.SagaInput
	now   time.Time
	run   *workflow.Run
	evs   []workflow.Event
	audit []demo.AuditEntry
}

func (s *sagaSynth) tick() time.Time {
	s.now = s.now.Add(time.Millisecond)
	return s.now
}

func (s *sagaSynth) event(typ, step string, attempt int, details map[string]string) {
	at := s.tick()
	s.evs = append(s.evs, workflow.Event{ID: fmt.Sprintf("%d-0", at.UnixMilli()), Type: typ, At: at, Step: step,
		Attempt: attempt, Details: details})
}

func (s *sagaSynth) body(step string, attempt int, ok bool) {
	phase := "fail"
	if ok {
		phase = "ok"
	}
	for _, p := range []string{"start", phase, "end"} {
		s.audit = append(s.audit, demo.AuditEntry{Phase: p, RunID: s.id, Step: step, Attempt: attempt, At: s.tick(), PID: 1})
	}
}

// attempts runs step's attempts (a compensation's when comp) until one
// succeeds or the run fails; it reports whether the step succeeded, else
// the failure's code.
func (s *sagaSynth) attempts(step string, comp bool) (bool, string) {
	name, budget := step, chaosBudget
	if comp {
		name, budget = workflow.CompensationPrefix+step, demo.SagaCompAttempts
	}
	for a := 1; ; a++ {
		var fails, permanent bool
		if comp {
			fails = demo.SagaCompFails(s.id, step, a, s.in)
		} else {
			fails, permanent = demo.SagaStepFails(s.id, step, a, s.in)
		}
		s.event(workflow.EventAttemptStarted, name, a, map[string]string{"resumed": "0"})
		s.body(name, a, !fails)
		if !fails {
			s.event(workflow.EventAttemptSucceeded, name, a, nil)
			return true, ""
		}
		class := "transient"
		if permanent {
			class = "permanent"
		}
		s.event(workflow.EventAttemptFailed, name, a, map[string]string{"class": class})
		switch {
		case permanent:
			return false, workflow.CodePermanentError
		case a == budget:
			return false, workflow.CodeRetriesExhausted
		}
		s.event(workflow.EventRetryScheduled, name, a+1, map[string]string{"due_at": s.now.Format(time.RFC3339Nano)})
	}
}

// shift moves by d every journal entry and audit record at or after from.
func (s *sagaSynth) shift(from time.Time, d time.Duration) {
	for i := range s.evs {
		if ev := &s.evs[i]; !ev.At.Before(from) {
			ev.At = ev.At.Add(d)
			ev.ID = fmt.Sprintf("%d-0", ev.At.UnixMilli())
		}
	}
	for i := range s.audit {
		if a := &s.audit[i]; !a.At.Before(from) {
			a.At = a.At.Add(d)
		}
	}
	if f := s.run.FinishedAt; f != nil {
		t := f.Add(d)
		s.run.FinishedAt = &t
	}
}

// synthSaga makes a saga run that goes as its input says (its failure
// rates must be 0).
func synthSaga(t *testing.T, t0 time.Time, id string, in demo.SagaInput) *sagaSynth {
	t.Helper()
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	s := &sagaSynth{id: id, in: in, now: t0}
	r := &workflow.Run{ID: id, Workflow: demo.SagaName, Input: raw, CreatedAt: t0, OnFailure: workflow.FailureCompensate}
	for _, step := range demo.SagaSteps {
		st := workflow.StepState{Name: step, Status: workflow.StepPending}
		if demo.SagaCompensated(step) {
			st.Compensation = &workflow.StepState{Name: workflow.CompensationPrefix + step, Status: workflow.StepPending}
		}
		r.Steps = append(r.Steps, st)
	}
	s.run = r
	s.event(workflow.EventRunStarted, "", 0, nil)
	failed, code := -1, ""
	for i, step := range demo.SagaSteps {
		ok, c := s.attempts(step, false)
		if !ok {
			failed, code = i, c
			r.Steps[i].Status = workflow.StepFailed
			break
		}
		r.Steps[i].Status, r.Steps[i].Attempts = workflow.StepSucceeded, 1
	}
	if failed < 0 {
		r.Status = workflow.StatusSucceeded
		s.event(workflow.EventRunSucceeded, "", 0, nil)
	} else {
		r.FailureCode = code
		s.event(workflow.EventRunCompensating, demo.SagaSteps[failed], 0, nil)
		r.Status = workflow.StatusCompensated
		for i := failed - 1; i >= 0; i-- {
			step := demo.SagaSteps[i]
			if !demo.SagaCompensated(step) {
				continue
			}
			s.event(workflow.EventCompensationStarted, step, 1, nil)
			if ok, _ := s.attempts(step, true); !ok {
				s.event(workflow.EventCompensationFailed, step, 0, nil)
				s.event(workflow.EventRunFailed, "", 0, nil)
				r.Steps[i].Compensation.Status = workflow.StepFailed
				r.Status, r.FailureCode, r.NeedsAttention = workflow.StatusFailed, workflow.CodeCompensationFailed, true
				r.Compensating = &workflow.Compensating{FailedStep: demo.SagaSteps[failed], Code: code}
				r.CurrentStep = workflow.CompensationPrefix + step
				break
			}
			s.event(workflow.EventCompensationSucceeded, step, 1, nil)
			r.Steps[i].Status, r.Steps[i].Compensation.Status = workflow.StepCompensated, workflow.StepSucceeded
		}
		if r.Status == workflow.StatusCompensated {
			s.event(workflow.EventRunCompensated, "", 0, nil)
		}
	}
	end := s.tick()
	r.FinishedAt = &end
	return s
}

// check runs the saga checks on the synthetic runs, with the breaker's
// history and totals.
func checkSynth(runs []*sagaSynth, killedAt map[int]time.Time, breaker []breakerEvent, deferred int64) *chaosResult {
	s := sagaRuns{runs: map[string]*workflow.Run{}, journals: map[string][]workflow.Event{}, killedAt: killedAt,
		breaker: breaker, complete: true, deferred: deferred}
	for _, r := range runs {
		s.runs[r.id], s.journals[r.id] = r.run, r.evs
		s.audit = append(s.audit, r.audit...)
	}
	for _, b := range breaker {
		s.opened += int64(btoi(b.opened))
	}
	c := &chaosResult{}
	c.checkSagas(s)
	return c
}

// TestCheckSagasCatches: the chaos suite's saga checker passes made-up runs
// that went right (succeeded, compensated, compensation_failed, a body run
// again after its worker was killed, a breaker that deferred and probed as
// it should) and reports each kind of violation it exists for.
func TestCheckSagasCatches(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(t time.Time) uint64 { return uint64(t.UnixMilli()) }
	// indexOf returns the index of the journal entry of typ for step.
	indexOf := func(s *sagaSynth, typ, step string) int {
		return slices.IndexFunc(s.evs, func(ev workflow.Event) bool { return ev.Type == typ && ev.Step == step })
	}
	insert := func(s *sagaSynth, i int, ev workflow.Event) {
		s.evs = slices.Insert(s.evs, i, ev)
	}
	// opening is a breaker opening at the entry before the charge's first
	// attempt, open for 300ms.
	opening := func(s *sagaSynth, openFor time.Duration) []breakerEvent {
		ev := s.evs[indexOf(s, workflow.EventAttemptStarted, demo.SagaCharge)]
		at := ev.At.Add(-time.Millisecond)
		return []breakerEvent{{id: streamID{ms(at), 0}, opened: true, at: at, openUntil: at.Add(openFor)}}
	}
	compensated := demo.SagaInput{PermanentStep: demo.SagaShip}
	// probeEnds makes charge's attempt 1 the probe of the half-open
	// breaker and ends it without an answer, by end, that many after its
	// start: crashed (its worker, pid 2, killed: begin.lua and
	// redispatch.lua free the probe) or interrupted (its worker could not
	// renew the fence and handed it back: release.lua frees it). The same
	// attempt begins again, again after the probe's start, probes,
	// succeeds and closes the breaker. startFirst lists the new start
	// before the end, as another run's entry of the same millisecond
	// could come.
	probeEnds := func(s *sagaSynth, end string, endAfter, again time.Duration, startFirst bool) ([]breakerEvent, int64, map[int]time.Time) {
		b := opening(s, 0)
		i := indexOf(s, workflow.EventAttemptStarted, demo.SagaCharge)
		probe := s.evs[i].At
		s.shift(probe.Add(time.Nanosecond), 10*time.Millisecond)
		var killed map[int]time.Time
		resumed := "interrupted"
		if end == workflow.EventAttemptCrashed {
			s.audit = append(s.audit, demo.AuditEntry{Phase: "start", RunID: s.id, Step: demo.SagaCharge, Attempt: 1,
				At: probe.Add(time.Millisecond), PID: 2})
			killed = map[int]time.Time{2: probe.Add(2 * time.Millisecond)}
			s.run.Step(demo.SagaCharge).Crashes = 1
			resumed = "1"
		} else {
			for n, phase := range []string{"start", "fail", "end"} {
				s.audit = append(s.audit, demo.AuditEntry{Phase: phase, RunID: s.id, Step: demo.SagaCharge, Attempt: 1,
					At: probe.Add(time.Duration(n+1) * 100 * time.Microsecond), PID: 1})
			}
		}
		endAt, startAt := probe.Add(endAfter), probe.Add(again)
		evs := []workflow.Event{
			{ID: fmt.Sprintf("%d-0", ms(endAt)), Type: end, At: endAt, Step: demo.SagaCharge, Attempt: 1},
			{ID: fmt.Sprintf("%d-0", ms(startAt)), Type: workflow.EventAttemptStarted, At: startAt, Step: demo.SagaCharge,
				Attempt: 1, Details: map[string]string{"resumed": resumed}},
		}
		if startFirst {
			evs[0], evs[1] = evs[1], evs[0]
		}
		insert(s, i+1, evs[0])
		insert(s, i+2, evs[1])
		ok := s.evs[indexOf(s, workflow.EventAttemptSucceeded, demo.SagaCharge)]
		return append(b, breakerEvent{id: streamID{ms(ok.At), 1}, at: ok.At}), 0, killed
	}
	for _, tc := range []struct {
		name     string
		in       demo.SagaInput
		mutate   func(s *sagaSynth) (breaker []breakerEvent, deferred int64, killedAt map[int]time.Time)
		want     []string // "" for no violation
		counters func(c *chaosResult) bool
	}{
		{name: "succeeded", in: demo.SagaInput{},
			counters: func(c *chaosResult) bool { return c.sagaSucceeded == 1 }},
		{name: "compensated", in: compensated,
			counters: func(c *chaosResult) bool { return c.sagaCompensated == 1 && c.compensations == 2 }},
		{name: "compensated-exhausted", in: demo.SagaInput{ExhaustStep: demo.SagaCharge},
			counters: func(c *chaosResult) bool { return c.sagaCompensated == 1 && c.compensations == 1 }},
		{name: "nothing-to-undo", in: demo.SagaInput{PermanentStep: demo.SagaReserve},
			counters: func(c *chaosResult) bool { return c.sagaCompensated == 1 && c.compensations == 0 }},
		{name: "compensation-failed", in: demo.SagaInput{PermanentStep: demo.SagaShip, CompExhaustStep: demo.SagaReserve},
			counters: func(c *chaosResult) bool { return c.sagaCompFailed == 1 && c.compensations == 1 }},
		{name: "body-again-after-kill", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				// The first execution of charge's compensation, on pid 2,
				// returned success and its worker was killed before the
				// success was recorded.
				i := slices.IndexFunc(s.audit, func(a demo.AuditEntry) bool { return a.Step == "compensate:charge" })
				first := s.audit[i]
				first.PID, first.Phase, first.At = 2, "ok", first.At.Add(-time.Microsecond)
				s.audit = append(s.audit, first)
				return nil, 0, map[int]time.Time{2: first.At.Add(time.Microsecond / 2)}
			}},
		{name: "breaker-ok", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				// The breaker opens for 300ms just before charge's attempt
				// 1, which is deferred, then probes once the cooldown is
				// over, and its success closes the breaker; charge's
				// compensation starts after.
				b := opening(s, 300*time.Millisecond)
				i := indexOf(s, workflow.EventAttemptStarted, demo.SagaCharge)
				s.shift(s.evs[i].At, 400*time.Millisecond)
				insert(s, i, workflow.Event{ID: fmt.Sprintf("%d-0", ms(b[0].at)+1), Type: "attempt_deferred", At: b[0].at,
					Step: demo.SagaCharge, Attempt: 1, Details: map[string]string{"breaker": demo.SagaBreaker,
						"until": b[0].openUntil.Format(time.RFC3339Nano)}})
				ok := s.evs[indexOf(s, workflow.EventAttemptSucceeded, demo.SagaCharge)]
				b = append(b, breakerEvent{id: streamID{ms(ok.At), 1}, at: ok.At})
				return b, 1, nil
			},
			counters: func(c *chaosResult) bool { return c.probes == 1 && c.deferrals == 1 && c.breakerOpened == 1 }},
		{name: "same-millisecond", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				// The failing body's start, by its clock, falls in the
				// millisecond of the run_compensating entry (whose At is
				// cut down to the millisecond).
				at := s.evs[indexOf(s, workflow.EventRunCompensating, demo.SagaShip)].At
				i := slices.IndexFunc(s.audit, func(a demo.AuditEntry) bool { return a.Step == demo.SagaShip && a.Phase == "start" })
				s.audit[i].At = at.Add(999 * time.Microsecond)
				return nil, 0, nil
			}},
		{name: "wrong-end", in: demo.SagaInput{PermanentStep: demo.SagaShip, CompExhaustStep: demo.SagaReserve},
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				s.run.Status, s.run.FailureCode = workflow.StatusCompensated, workflow.CodePermanentError
				return nil, 0, nil
			}, want: []string{"its injected failures say it should end failed with compensation_failed"}},
		{name: "not-compensated", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				s.run.Step(demo.SagaCharge).Status = workflow.StepSucceeded
				return nil, 0, nil
			}, want: []string{"step charge is succeeded, want compensated"}},
		{name: "comp-of-unsucceeded", in: demo.SagaInput{PermanentStep: demo.SagaCharge},
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				i := indexOf(s, workflow.EventCompensationStarted, demo.SagaReserve)
				at := s.evs[i].At.Add(-time.Microsecond)
				insert(s, i, workflow.Event{ID: "1-0", Type: workflow.EventCompensationStarted, At: at, Step: demo.SagaCharge})
				insert(s, i+1, workflow.Event{ID: "1-0", Type: workflow.EventCompensationSucceeded, At: at, Step: demo.SagaCharge})
				s.audit = append(s.audit, demo.AuditEntry{Phase: "start", RunID: s.id, Step: "compensate:charge", Attempt: 1, At: at, PID: 1})
				return nil, 0, nil
			}, want: []string{"the compensation of charge started, and charge never succeeded",
				"a body of compensate:charge started", "compensations started [charge reserve], want [reserve]"}},
		{name: "forward-order", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				// reserve's compensation journaled and run before charge's.
				i := indexOf(s, workflow.EventCompensationStarted, demo.SagaCharge)
				at := s.evs[i].At.Add(-time.Microsecond)
				insert(s, i, workflow.Event{ID: "1-0", Type: workflow.EventCompensationStarted, At: at, Step: demo.SagaReserve})
				insert(s, i+1, workflow.Event{ID: "1-0", Type: workflow.EventCompensationSucceeded, At: at, Step: demo.SagaReserve})
				s.audit = append(s.audit, demo.AuditEntry{Phase: "start", RunID: s.id, Step: "compensate:reserve", Attempt: 1, At: at, PID: 1})
				return nil, 0, nil
			}, want: []string{"started after that of reserve: not in reverse order",
				"the compensation of reserve started twice", "before the compensation of charge had succeeded",
				"the compensation of reserve succeeded 2 times"}},
		{name: "comp-twice", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				i := indexOf(s, workflow.EventCompensationSucceeded, demo.SagaCharge)
				insert(s, i, s.evs[i])
				return nil, 0, nil
			}, want: []string{"the compensation of charge succeeded 2 times"}},
		{name: "comp-body-twice", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				// A second successful body of charge's compensation, by a
				// worker that was not killed.
				i := slices.IndexFunc(s.audit, func(a demo.AuditEntry) bool { return a.Step == "compensate:charge" })
				again := s.audit[i]
				again.PID, again.Phase, again.At = 2, "ok", again.At.Add(-time.Microsecond)
				s.audit = append(s.audit, again)
				return nil, 0, nil
			}, want: []string{"succeeded at", "its worker was not killed in between"}},
		{name: "step-after-compensating", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				i := indexOf(s, workflow.EventRunCompensating, demo.SagaShip)
				at := s.evs[i].At.Add(time.Millisecond)
				insert(s, i+1, workflow.Event{ID: "1-0", Type: workflow.EventAttemptStarted, At: at, Step: demo.SagaShip, Attempt: 2})
				s.audit = append(s.audit, demo.AuditEntry{Phase: "start", RunID: s.id, Step: demo.SagaShip, Attempt: 2, At: at, PID: 1})
				return nil, 0, nil
			}, want: []string{"step ship attempt 2 started after the run started compensating",
				"a body of step ship started at"}},
		{name: "started-while-open", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				return opening(s, 300*time.Millisecond), 0, nil
			}, want: []string{"charge attempt 1 started at", "while breaker chaos-payments was open"}},
		{name: "second-probe", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				// The breaker was open for a moment before charge's attempt
				// 1 (the probe); charge's compensation starts while it is
				// out (the breaker never closed).
				return opening(s, 0), 0, nil
			}, want: []string{"compensate:charge attempt 1 started at", "was half-open and its probe (run saga-second-probe charge attempt 1"}},
		{name: "probe-crashed", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				return probeEnds(s, workflow.EventAttemptCrashed, 3*time.Millisecond, 5*time.Millisecond, false)
			},
			counters: func(c *chaosResult) bool { return c.crashedProbes == 1 && c.probes == 2 }},
		{name: "probe-crashed-same-millisecond", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				// Found by the resumed attempt's begin, which journals the
				// crash and the new probe's start in one script, in one
				// millisecond.
				return probeEnds(s, workflow.EventAttemptCrashed, 5*time.Millisecond, 5*time.Millisecond, false)
			},
			counters: func(c *chaosResult) bool { return c.crashedProbes == 1 && c.probes == 2 }},
		{name: "probe-freed-same-millisecond", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				// Entries of different runs in one millisecond are in no
				// known order: an attempt that starts in the millisecond
				// of the probe's crash is not taken for a second probe,
				// whichever comes first (here the start, as another run's
				// could).
				return probeEnds(s, workflow.EventAttemptCrashed, 5*time.Millisecond, 5*time.Millisecond, true)
			},
			counters: func(c *chaosResult) bool { return c.probes == 2 }},
		{name: "probe-handed-back", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				return probeEnds(s, workflow.EventAttemptInterrupted, 3*time.Millisecond, 5*time.Millisecond, false)
			},
			counters: func(c *chaosResult) bool { return c.crashedProbes == 0 && c.probes == 2 }},
		{name: "deferred-while-closed", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				i := indexOf(s, workflow.EventAttemptStarted, demo.SagaCharge)
				at := s.evs[i].At.Add(-time.Microsecond)
				insert(s, i, workflow.Event{ID: fmt.Sprintf("%d-0", ms(at)), Type: "attempt_deferred", At: at, Step: demo.SagaCharge,
					Attempt: 1, Details: map[string]string{"breaker": demo.SagaBreaker, "until": at.Add(time.Second).Format(time.RFC3339Nano)}})
				return nil, 1, nil
			}, want: []string{"charge attempt 1 deferred at", "while breaker chaos-payments was closed"}},
		{name: "deferral-spends", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				b := opening(s, 300*time.Millisecond)
				i := indexOf(s, workflow.EventAttemptStarted, demo.SagaCharge)
				s.shift(s.evs[i].At, 400*time.Millisecond)
				insert(s, i, workflow.Event{ID: fmt.Sprintf("%d-0", ms(b[0].at)+1), Type: "attempt_deferred", At: b[0].at,
					Step: demo.SagaCharge, Attempt: 1, Details: map[string]string{"breaker": demo.SagaBreaker,
						"until": b[0].openUntil.Format(time.RFC3339Nano)}})
				s.evs[i+1].Attempt = 2
				ok := s.evs[indexOf(s, workflow.EventAttemptSucceeded, demo.SagaCharge)]
				return append(b, breakerEvent{id: streamID{ms(ok.At), 1}, at: ok.At}), 1, nil
			}, want: []string{"charge attempt 1 deferred by the breaker, then attempt 2 started: the deferral spent an attempt"}},
		{name: "deferred-too-long", in: compensated,
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				b := opening(s, 300*time.Millisecond)
				i := indexOf(s, workflow.EventAttemptStarted, demo.SagaCharge)
				s.shift(s.evs[i].At, 400*time.Millisecond)
				insert(s, i, workflow.Event{ID: fmt.Sprintf("%d-0", ms(b[0].at)+1), Type: "attempt_deferred", At: b[0].at,
					Step: demo.SagaCharge, Attempt: 1, Details: map[string]string{"breaker": demo.SagaBreaker,
						"until": b[0].openUntil.Add(time.Second).Format(time.RFC3339Nano)}})
				ok := s.evs[indexOf(s, workflow.EventAttemptSucceeded, demo.SagaCharge)]
				return append(b, breakerEvent{id: streamID{ms(ok.At), 1}, at: ok.At}), 1, nil
			}, want: []string{"charge attempt 1 deferred at 00:00:00.011 until 00:00:01.311; the breaker was open until 00:00:00.311"}},
		{name: "deferred-behind-a-probe-by-a-later-clock", in: compensated,
			// The breaker's cooldown ended by another worker's now, which
			// took the probe first; this attempt, by its own now still in
			// the open period, waits a cooldown as for a probe that is out.
			mutate: func(s *sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				b := opening(s, 300*time.Millisecond)
				i := indexOf(s, workflow.EventAttemptStarted, demo.SagaCharge)
				s.shift(s.evs[i].At, 400*time.Millisecond)
				insert(s, i, workflow.Event{ID: fmt.Sprintf("%d-0", ms(b[0].at)+1), Type: "attempt_deferred", At: b[0].at,
					Step: demo.SagaCharge, Attempt: 1, Details: map[string]string{"breaker": demo.SagaBreaker,
						"until": b[0].at.Add(2 * demo.SagaBreakerCooldown).Format(time.RFC3339Nano)}})
				ok := s.evs[indexOf(s, workflow.EventAttemptSucceeded, demo.SagaCharge)]
				return append(b, breakerEvent{id: streamID{ms(ok.At), 1}, at: ok.At}), 1, nil
			}},
		{name: "deferral-count", in: compensated,
			mutate: func(*sagaSynth) ([]breakerEvent, int64, map[int]time.Time) {
				return nil, 5, nil
			}, want: []string{"breaker chaos-payments counts 5 deferrals; the journals have 0"}},
	} {
		s := synthSaga(t, t0, "saga-"+tc.name, tc.in)
		var (
			breaker  []breakerEvent
			deferred int64
			killedAt map[int]time.Time
		)
		if tc.mutate != nil {
			breaker, deferred, killedAt = tc.mutate(s)
		}
		c := checkSynth([]*sagaSynth{s}, killedAt, breaker, deferred)
		got := strings.Join(c.violations, "\n")
		if len(tc.want) == 0 && got != "" {
			t.Errorf("%s: violations for a correct run:\n%s", tc.name, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: violations %q; want one saying %q", tc.name, got, w)
			}
		}
		if tc.counters != nil && !tc.counters(c) {
			t.Errorf("%s: counters %+v", tc.name, *c)
		}
	}
}
