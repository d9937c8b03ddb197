package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/workflow"
)

// The chaos suite's checks of its saga runs (demo.Saga): how each run
// ended against what its injected failures say, the compensations' order
// and count from the journals and from the bodies' own audit, and the
// circuit breaker from the journals and the queue's notification stream.

// sagaProbeLease is how long a half-open breaker waits for its probe before
// it lets another attempt probe: the charge step's timeout plus a minute
// (retrystate/lua/lib/breaker.lua's "admit").
const sagaProbeLease = demo.SagaChargeTimeout + time.Minute

// sagaRuns is what checkSagas reads.
type sagaRuns struct {
	runs     map[string]*workflow.Run // the saga runs, by ID
	journals map[string][]workflow.Event
	audit    []demo.AuditEntry // every run's; only the saga runs' are read
	killedAt map[int]time.Time // pid -> when the suite killed it
	// breaker is the saga breaker's history from the notification stream,
	// oldest first; complete says the stream was not trimmed.
	breaker  []breakerEvent
	complete bool
	// opened and deferred are the breaker hash's totals.
	opened, deferred int64
}

// breakerEvent is a breaker_opened or breaker_closed notification.
type breakerEvent struct {
	id        streamID
	opened    bool
	at        time.Time // the script's clock, as a journal entry's At
	openUntil time.Time // breaker_opened
}

// streamID is a stream entry ID: entries of all streams written by Redis's
// scripts are in the order the scripts ran, up to entries of the same
// millisecond.
type streamID struct{ ms, seq uint64 }

func parseStreamID(s string) (streamID, bool) {
	a, b, ok := strings.Cut(s, "-")
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	return streamID{ms, seq}, ok && err1 == nil && err2 == nil
}

// sagaExpect is how a saga run must end, from its input: failStep is the
// step that fails it for good ("" when it succeeds), with code; compFail is
// the step whose compensation then fails for good ("" for none).
func sagaExpect(id string, in demo.SagaInput) (failStep, code, compFail string) {
	for _, step := range demo.SagaSteps {
		if _, permanent := demo.SagaStepFails(id, step, 1, in); permanent {
			failStep, code = step, workflow.CodePermanentError
			break
		}
		all := true
		for a := 1; a <= chaosBudget && all; a++ {
			f, _ := demo.SagaStepFails(id, step, a, in)
			all = f
		}
		if all {
			failStep, code = step, workflow.CodeRetriesExhausted
			break
		}
	}
	if failStep == "" {
		return "", "", ""
	}
	for i := slices.Index(demo.SagaSteps, failStep) - 1; i >= 0; i-- {
		step := demo.SagaSteps[i]
		if !demo.SagaCompensated(step) {
			continue
		}
		all := true
		for a := 1; a <= demo.SagaCompAttempts && all; a++ {
			all = demo.SagaCompFails(id, step, a, in)
		}
		if all {
			return failStep, code, step
		}
	}
	return failStep, code, ""
}

// sagaBudget is the max attempts of a saga step or compensation.
func sagaBudget(step string) int {
	if strings.HasPrefix(step, workflow.CompensationPrefix) {
		return demo.SagaCompAttempts
	}
	return chaosBudget
}

func isComp(step string) bool { return strings.HasPrefix(step, workflow.CompensationPrefix) }

// behindBreaker reports whether a saga step (or compensation) is behind
// the saga's circuit breaker.
func behindBreaker(step string) bool {
	return step == demo.SagaCharge || step == workflow.CompensationPrefix+demo.SagaCharge
}

// checkSagas checks the saga runs' invariants into c:
//   - every saga run ended as its injected failures say: succeeded,
//     compensated (keeping the failure's code), or failed with
//     compensation_failed exactly when a compensation was made to exhaust
//     its retries, at that compensation;
//   - compensations ran only for steps that succeeded (journal and audit),
//     each succeeded at most once (journal; audit: a second successful body
//     only from a worker killed before its success was recorded), in
//     reverse step order, each after the one before it had succeeded;
//   - a compensated run's succeeded steps that have compensations are all
//     compensated, and no other (the run record);
//   - no step attempt started, and no step body ran, after the run started
//     compensating;
//   - the circuit breaker let no attempt start while open, let one probe
//     at a time through while half-open, deferred only while open or
//     half-open, until its reopening; a deferral spent no attempt; its
//     totals match the journals and notifications.
func (c *chaosResult) checkSagas(s sagaRuns) {
	type key struct{ run, step string }
	succeededAt := map[key]time.Time{}   // attempt_succeeded of a step or compensation
	compSucceeded := map[key]time.Time{} // compensation_succeeded, by the compensated step
	compensatingAt := map[string]time.Time{}
	for id, r := range s.runs {
		c.sagaRuns++
		var in demo.SagaInput
		if err := json.Unmarshal(r.Input, &in); err != nil {
			c.violatef("saga run %s: input %s: %v", id, r.Input, err)
			continue
		}
		if !r.Terminal() {
			continue // checkChaos counts it lost
		}
		if r.FinishedAt != nil {
			c.longestSaga = max(c.longestSaga, r.FinishedAt.Sub(r.CreatedAt))
		}
		failStep, code, compFail := sagaExpect(id, in)
		fi := len(demo.SagaSteps)
		if failStep != "" {
			fi = slices.Index(demo.SagaSteps, failStep)
		}
		switch {
		case failStep == "" && r.Status == workflow.StatusSucceeded:
			c.sagaSucceeded++
		case failStep != "" && compFail == "" && r.Status == workflow.StatusCompensated && r.FailureCode == code:
			c.sagaCompensated++
		case compFail != "" && r.Status == workflow.StatusFailed && r.FailureCode == workflow.CodeCompensationFailed &&
			r.NeedsAttention && r.Compensating != nil && r.Compensating.FailedStep == failStep && r.Compensating.Code == code &&
			r.CurrentStep == workflow.CompensationPrefix+compFail:
			c.sagaCompFailed++
		default:
			want := "succeeded"
			switch {
			case compFail != "":
				want = fmt.Sprintf("failed with %s at the compensation of %s, after %s failed (%s)",
					workflow.CodeCompensationFailed, compFail, failStep, code)
			case failStep != "":
				want = fmt.Sprintf("compensated after %s failed (%s)", failStep, code)
			}
			c.violatef("saga run %s ended %s (%s: %s; current step %q); its injected failures say it should end %s",
				id, r.Status, r.FailureCode, r.FailureReason, r.CurrentStep, want)
		}

		// The run record: which steps are compensated.
		ci := -1 // the compensation that failed for good
		if compFail != "" {
			ci = slices.Index(demo.SagaSteps, compFail)
		}
		for i, step := range demo.SagaSteps {
			st := r.Step(step)
			if st == nil {
				c.violatef("saga run %s has no step %s", id, step)
				continue
			}
			want, wantComp := workflow.StepSucceeded, workflow.StepPending
			switch {
			case i > fi:
				want = workflow.StepPending
			case i == fi:
				want = workflow.StepFailed
			case !demo.SagaCompensated(step) || failStep == "":
			case i > ci:
				want, wantComp = workflow.StepCompensated, workflow.StepSucceeded
			case i == ci:
				wantComp = workflow.StepFailed
			}
			if st.Status != want {
				c.violatef("saga run %s (%s) step %s is %s, want %s", id, r.Status, step, st.Status, want)
			}
			if !demo.SagaCompensated(step) {
				if st.Compensation != nil {
					c.violatef("saga run %s step %s has a compensation record, and no compensation", id, step)
				}
				continue
			}
			switch cs := st.Compensation; {
			case cs == nil:
				c.violatef("saga run %s step %s has no compensation record", id, step)
			case cs.Status != wantComp:
				c.violatef("saga run %s (%s) step %s's compensation is %s, want %s", id, r.Status, step, cs.Status, wantComp)
			case cs.Attempts > demo.SagaCompAttempts:
				c.violatef("saga run %s step %s's compensation made %d attempts, over its budget of %d", id, step,
					cs.Attempts, demo.SagaCompAttempts)
			}
		}

		// The journal.
		var (
			compensating              bool
			started                   []string // compensation_started, in order
			stepSucceeded             = map[string]bool{}
			compDone                  = map[string]int{}
			crashes                   = map[string]int{}
			deferredAttempt           = map[string]int{} // step -> attempt deferred and not yet started
			runCompensating, runEnded int
		)
		for _, ev := range s.journals[id] {
			switch ev.Type {
			case workflow.EventRunCompensating:
				runCompensating++
				compensating = true
				compensatingAt[id] = ev.At
				if ev.Step != failStep {
					c.violatef("saga run %s started compensating after a failure of %s; its input makes %q fail", id, ev.Step, failStep)
				}
			case workflow.EventAttemptStarted:
				if compensating && !isComp(ev.Step) {
					c.violatef("saga run %s: step %s attempt %d started after the run started compensating", id, ev.Step, ev.Attempt)
				}
				if isComp(ev.Step) {
					if len(started) == 0 || workflow.CompensationPrefix+started[len(started)-1] != ev.Step {
						c.violatef("saga run %s: %s attempt %d started, and it is not the compensation started last (%v)",
							id, ev.Step, ev.Attempt, started)
					}
					if r := ev.Details["resumed"]; r != "1" && r != "interrupted" {
						c.compAttempts++
					}
				}
				if a, ok := deferredAttempt[ev.Step]; ok && a != ev.Attempt {
					c.violatef("saga run %s: %s attempt %d deferred by the breaker, then attempt %d started: the deferral spent an attempt",
						id, ev.Step, a, ev.Attempt)
				}
				delete(deferredAttempt, ev.Step)
			case "attempt_deferred":
				c.deferrals++
				if !behindBreaker(ev.Step) || ev.Details["breaker"] != demo.SagaBreaker {
					c.violatef("saga run %s: %s attempt %d deferred by breaker %q, which it is not behind", id, ev.Step, ev.Attempt,
						ev.Details["breaker"])
				}
				if a, ok := deferredAttempt[ev.Step]; ok && a != ev.Attempt {
					c.violatef("saga run %s: %s attempt %d deferred, then attempt %d deferred: a deferral spent an attempt",
						id, ev.Step, a, ev.Attempt)
				}
				deferredAttempt[ev.Step] = ev.Attempt
			case workflow.EventAttemptSucceeded:
				if !isComp(ev.Step) {
					stepSucceeded[ev.Step] = true
				}
				succeededAt[key{id, ev.Step}] = ev.At
			case workflow.EventAttemptCrashed:
				crashes[ev.Step]++
			case workflow.EventCompensationStarted:
				step := ev.Step
				if !stepSucceeded[step] {
					c.violatef("saga run %s: the compensation of %s started, and %s never succeeded", id, step, step)
				}
				if !compensating {
					c.violatef("saga run %s: the compensation of %s started before the run started compensating", id, step)
				}
				if !demo.SagaCompensated(step) {
					c.violatef("saga run %s: a compensation of %s, which has none, started", id, step)
				}
				if n := len(started); n > 0 {
					prev := started[n-1]
					if slices.Index(demo.SagaSteps, prev) <= slices.Index(demo.SagaSteps, step) {
						c.violatef("saga run %s: the compensation of %s started after that of %s: not in reverse order", id, step, prev)
					}
					if compDone[prev] == 0 {
						c.violatef("saga run %s: the compensation of %s started before that of %s had succeeded", id, step, prev)
					}
				}
				if slices.Contains(started, step) {
					c.violatef("saga run %s: the compensation of %s started twice", id, step)
				}
				started = append(started, step)
			case workflow.EventCompensationSucceeded:
				compDone[ev.Step]++
				compSucceeded[key{id, ev.Step}] = ev.At
				c.compensations++
				if compDone[ev.Step] > 1 {
					c.violatef("saga run %s: the compensation of %s succeeded %d times", id, ev.Step, compDone[ev.Step])
				}
				if len(started) == 0 || started[len(started)-1] != ev.Step {
					c.violatef("saga run %s: the compensation of %s succeeded, and it is not the one started last (%v)", id, ev.Step, started)
				}
			case workflow.EventCompensationFailed:
				if ev.Step != compFail {
					c.violatef("saga run %s: the compensation of %s failed for good; its input makes %q fail", id, ev.Step, compFail)
				}
			case workflow.EventRunCompensated, workflow.EventRunSucceeded, workflow.EventRunFailed:
				runEnded++
			}
		}
		// The compensations that should have started, last step first.
		var want []string
		if failStep != "" {
			for i := fi - 1; i >= 0; i-- {
				if step := demo.SagaSteps[i]; demo.SagaCompensated(step) {
					want = append(want, step)
					if step == compFail {
						break
					}
				}
			}
		}
		if !slices.Equal(started, want) {
			c.violatef("saga run %s: compensations started %v, want %v", id, started, want)
		}
		if wantComp := btoi(failStep != ""); runCompensating != wantComp {
			c.violatef("saga run %s: %d run_compensating entries, want %d", id, runCompensating, wantComp)
		}
		if runEnded != 1 {
			c.violatef("saga run %s: %d entries of the run's end, want 1", id, runEnded)
		}
		for step, n := range crashes {
			if st := r.Step(strings.TrimPrefix(step, workflow.CompensationPrefix)); st != nil {
				rec := st
				if isComp(step) {
					rec = st.Compensation
				}
				if rec != nil && rec.Crashes != n {
					c.violatef("saga run %s: %d crashes of %s journaled, its record says %d", id, n, step, rec.Crashes)
				}
			}
		}
	}

	// The bodies' own audit.
	oks := map[key][]demo.AuditEntry{}
	for _, a := range s.audit {
		r := s.runs[a.RunID]
		if r == nil {
			continue
		}
		k := key{a.RunID, a.Step}
		switch a.Phase {
		case "start":
			if !isComp(a.Step) {
				// A journal entry's At is in whole milliseconds, cut down:
				// the run started compensating within the millisecond after.
				if at, ok := compensatingAt[a.RunID]; ok && !a.At.Before(at.Add(time.Millisecond)) {
					c.violatef("saga run %s: a body of step %s started at %s, after the run started compensating at %s",
						a.RunID, a.Step, a.At.Format(tsFormat), at.Format(tsFormat))
				}
				continue
			}
			step := strings.TrimPrefix(a.Step, workflow.CompensationPrefix)
			if at, ok := succeededAt[key{a.RunID, step}]; !ok || a.At.Before(at) {
				c.violatef("saga run %s: a body of %s started at %s, and %s had not succeeded (succeeded: %v at %s)",
					a.RunID, a.Step, a.At.Format(tsFormat), step, ok, at.Format(tsFormat))
			}
			// Every later step's compensation had succeeded.
			for j := slices.Index(demo.SagaSteps, step) + 1; j < len(demo.SagaSteps); j++ {
				later := demo.SagaSteps[j]
				if _, ran := succeededAt[key{a.RunID, later}]; !ran || !demo.SagaCompensated(later) {
					continue
				}
				if done, ok := compSucceeded[key{a.RunID, later}]; !ok || !a.At.After(done) {
					c.violatef("saga run %s: a body of %s started at %s, before the compensation of %s had succeeded (%v at %s)",
						a.RunID, a.Step, a.At.Format(tsFormat), later, ok, done.Format(tsFormat))
				}
			}
		case "ok":
			oks[k] = append(oks[k], a)
		}
	}
	// A body that returned success more than once: only a worker killed
	// between its success and the record of it can leave one success
	// unrecorded, and another worker run the attempt again.
	for k, list := range oks {
		sort.Slice(list, func(i, j int) bool { return list[i].At.Before(list[j].At) })
		recorded, ok := succeededAt[k]
		extra := list
		if ok {
			extra = list[:len(list)-1]
		}
		for _, a := range extra {
			if kt, killed := s.killedAt[a.PID]; !killed || kt.Before(a.At) || (ok && kt.After(recorded.Add(time.Millisecond))) {
				c.violatef("saga run %s: a body of %s (attempt %d, pid %d) succeeded at %s, and its success is not the one recorded (%v at %s); its worker was not killed in between",
					k.run, k.step, a.Attempt, a.PID, a.At.Format(tsFormat), ok, recorded.Format(tsFormat))
				if isComp(k.step) {
					c.duplicateComps++
				}
			}
		}
	}

	c.checkBreaker(s)
}

const tsFormat = "15:04:05.000"

// checkBreaker checks the saga breaker's invariants against its openings
// and closings (breaker_opened and breaker_closed notifications): entries
// of the notification stream and of the journals are compared in the
// order Redis ran the scripts that wrote them (their stream IDs; entries of
// the same millisecond are not compared), and each attempt's clock (At)
// with the opening's open_until, as the breaker does.
func (c *chaosResult) checkBreaker(s sagaRuns) {
	c.breakerOpened = int(s.opened)
	type attempt struct {
		id            streamID
		at            time.Time
		run, step     string
		attempt       int
		typ           string
		until         time.Time // attempt_deferred
		permanentFail bool
	}
	var all []attempt
	for run, evs := range s.journals {
		for _, ev := range evs {
			if !behindBreaker(ev.Step) {
				continue
			}
			id, ok := parseStreamID(ev.ID)
			if !ok {
				c.violatef("saga run %s: journal entry ID %q", run, ev.ID)
				continue
			}
			a := attempt{id: id, at: ev.At, run: run, step: ev.Step, attempt: ev.Attempt, typ: ev.Type}
			switch ev.Type {
			case workflow.EventAttemptStarted, workflow.EventAttemptCrashed, workflow.EventAttemptInterrupted:
			case "attempt_deferred":
				t, err := time.Parse(time.RFC3339Nano, ev.Details["until"])
				if err != nil {
					c.violatef("saga run %s: attempt_deferred without until: %+v", run, ev)
				}
				a.until = t
			case workflow.EventAttemptFailed:
				if ev.Details["class"] != "permanent" {
					continue
				}
				a.permanentFail = true
			default:
				continue
			}
			all = append(all, a)
		}
	}
	// Stable: a run's entries of one millisecond stay in their journal's
	// order (begin.lua journals a crashed probe and its resumed attempt,
	// the new probe, in one script).
	sort.SliceStable(all, func(i, j int) bool { return all[i].id.ms < all[j].id.ms })
	// A probe's end without an answer (crashed, handed back, failed
	// permanently) frees it; entries of different runs in one millisecond
	// are in no known order, so an attempt that starts in the millisecond
	// of the probe's end is not taken for a second probe.
	type attemptKey struct {
		run, step string
		attempt   int
	}
	frees := func(a attempt) bool {
		return a.typ == workflow.EventAttemptCrashed || a.typ == workflow.EventAttemptInterrupted || a.permanentFail
	}
	freedAt := map[attemptKey][]uint64{}
	for _, a := range all {
		if frees(a) {
			k := attemptKey{a.run, a.step, a.attempt}
			freedAt[k] = append(freedAt[k], a.id.ms)
		}
	}
	deferred := 0
	// last returns the breaker's last change strictly before ms, and false
	// when one falls in that very millisecond (the order is unknown).
	last := func(ms uint64) (*breakerEvent, int, bool) {
		i := sort.Search(len(s.breaker), func(i int) bool { return s.breaker[i].id.ms >= ms })
		if i < len(s.breaker) && s.breaker[i].id.ms == ms {
			return nil, -1, false
		}
		if i == 0 {
			return nil, -1, true
		}
		return &s.breaker[i-1], i - 1, true
	}
	type probe struct {
		a        attempt
		released bool // failed permanently, crashed or handed back: the next attempt probes
	}
	probes := map[int]*probe{} // opening index -> its current probe
	for _, a := range all {
		if a.typ == "attempt_deferred" {
			deferred++
		}
		b, bi, ok := last(a.id.ms)
		if !ok {
			continue
		}
		switch {
		case frees(a):
			// The probe's end without an answer frees it: a crash
			// (breaker "crashed", in begin.lua and redispatch.lua, which
			// journal it), a hand-back (release.lua) or a permanent
			// failure. The resumed attempt, or another, probes next.
			if p := probes[bi]; b != nil && b.opened && p != nil && p.a.run == a.run && p.a.step == a.step && p.a.attempt == a.attempt {
				p.released = true
				if a.typ == workflow.EventAttemptCrashed {
					c.crashedProbes++
					c.notes = append(c.notes, fmt.Sprintf("the probe %s attempt %d of run %s (started %s) crashed; its journal: %s",
						a.step, a.attempt, a.run, p.a.at.Format(tsFormat), journalOf(s.journals[a.run], a.step)))
				}
			}
		case a.typ == workflow.EventAttemptStarted:
			if b == nil || !b.opened {
				continue // closed
			}
			if a.at.Before(b.openUntil) {
				c.violatef("saga run %s: %s attempt %d started at %s while breaker %s was open (opened at %s until %s)",
					a.run, a.step, a.attempt, a.at.Format(tsFormat), demo.SagaBreaker, b.at.Format(tsFormat), b.openUntil.Format(tsFormat))
				continue
			}
			// Half-open: this attempt probes, unless another is out.
			if p := probes[bi]; p != nil && !p.released && a.at.Before(p.a.at.Add(sagaProbeLease)) &&
				!slices.Contains(freedAt[attemptKey{p.a.run, p.a.step, p.a.attempt}], a.id.ms) {
				c.violatef("saga run %s: %s attempt %d started at %s while breaker %s was half-open and its probe (run %s %s attempt %d, at %s) was out",
					a.run, a.step, a.attempt, a.at.Format(tsFormat), demo.SagaBreaker, p.a.run, p.a.step, p.a.attempt, p.a.at.Format(tsFormat))
			}
			probes[bi] = &probe{a: a}
			c.probes++
		case a.typ == "attempt_deferred":
			switch {
			case b == nil || !b.opened:
				c.violatef("saga run %s: %s attempt %d deferred at %s while breaker %s was closed",
					a.run, a.step, a.attempt, a.at.Format(tsFormat), demo.SagaBreaker)
			case a.at.Before(b.openUntil) && !a.until.Equal(b.openUntil) && !halfOpenDeferral(a.at, a.until):
				// (Scripts run in Redis's order, each with its caller's
				// now: a worker whose now was read later may have taken
				// the probe first, and this attempt, by its own now still
				// in the open period, is then deferred as by a half-open
				// breaker whose probe is out. Either way it never starts
				// while the breaker is open, which attempt_started checks.)
				c.violatef("saga run %s: %s attempt %d deferred at %s until %s; the breaker was open until %s",
					a.run, a.step, a.attempt, a.at.Format(tsFormat), a.until.Format(tsFormat), b.openUntil.Format(tsFormat))
			case !a.at.Before(b.openUntil) && (!a.until.After(a.at) || a.until.After(a.at.Add(demo.SagaBreakerMaxCooldown))):
				c.violatef("saga run %s: %s attempt %d deferred at %s until %s by the half-open breaker; want within its cooldown (at most %s)",
					a.run, a.step, a.attempt, a.at.Format(tsFormat), a.until.Format(tsFormat), demo.SagaBreakerMaxCooldown)
			}
		}
	}
	if int64(deferred) != s.deferred {
		c.violatef("breaker %s counts %d deferrals; the journals have %d", demo.SagaBreaker, s.deferred, deferred)
	}
	opened := 0
	for _, b := range s.breaker {
		if b.opened {
			opened++
		}
	}
	if s.complete && int64(opened) != s.opened {
		c.violatef("breaker %s counts %d openings; the notification stream has %d", demo.SagaBreaker, s.opened, opened)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// halfOpenDeferral tells whether a deferral made at one time until another is one a
// half-open breaker whose probe is out makes: to the probe's lease or a
// cooldown from now, whichever comes first, so later than now and within
// the longest cooldown.
func halfOpenDeferral(at, until time.Time) bool {
	return until.After(at) && !until.After(at.Add(demo.SagaBreakerMaxCooldown))
}
