package retrystate

import (
	"context"
	"fmt"
	"time"
)

// Pause and resume (lua/pause.lua): a paused run begins no new attempt.
const (
	// ActionPause is the action of Pause, as journaled ("paused").
	ActionPause = "pause"
	// ActionResume is the action of Resume, as journaled ("resumed").
	ActionResume = "resume"
)

// Outcomes of pause.lua (and OutcomePaused of begin.lua).
const (
	// OutcomePaused (pause): the run is paused now. (begin): the run is
	// paused: the delivery's dispatch is parked, for the resume to write
	// again; acknowledge.
	OutcomePaused Outcome = "paused"
	// OutcomeResumed (pause's resume): the run is no longer paused;
	// Dispatch, when set, is the parked dispatch whose task the script
	// wrote again.
	OutcomeResumed Outcome = "resumed"
)

// Journal entries of pause and resume.
const (
	// EventPaused: an operator paused the run (actor).
	EventPaused = "paused"
	// EventResumed: an operator resumed it (actor; step, attempt, task and
	// due_at when a parked dispatch was written again).
	EventResumed = "resumed"
	// EventDispatchParked: a delivery of the paused run's current step
	// (task) was acknowledged without beginning; the resume writes it
	// again.
	EventDispatchParked = "dispatch_parked"
)

// paused indexes the paused runs by creation time (pause.lua); the entry
// of a run that ended while paused stays until a reopen or the trim.
func (k keys) paused() string { return k.prefix + "idx:paused" }

// pauseLua is pause.lua's.
type pauseLua struct {
	runArgs
	Action string `arg:"action"`
	Actor  string `arg:"actor"`
}

func (a pauseLua) args() ([]string, []any) {
	return []string{a.Run}, []any{a.RunID, a.Prefix, a.Now, a.Action, a.Actor}
}

// PauseParams asks to pause or resume a run (lua/pause.lua).
type PauseParams struct {
	RunID string
	// Action is ActionPause or ActionResume.
	Action string
	// Actor is who acts, as journaled.
	Actor string
	Now   time.Time
}

// PauseResult is what Pause did. Its Outcome is one of:
//
//   - OutcomePaused: the run is paused now.
//   - OutcomeResumed: the run is no longer paused. TaskID, when not "",
//     is the task of its current step the script wrote again (a parked
//     dispatch, or one asynq lacked), due at DueAt (zero: now).
//   - OutcomeNoop: nothing to do: Reason says "already paused" or "not
//     paused".
//
// (A run that ended is a *RunEndedError, an unknown one ErrRunNotFound.)
type PauseResult struct {
	Outcome Outcome
	TaskID  string
	DueAt   time.Time
	Reason  string
}

// Pause pauses (ActionPause) or resumes (ActionResume) a run. It returns
// ErrRunNotFound for an unknown run and a *RunEndedError for one that
// ended: nothing is written then.
func (s *Store) Pause(ctx context.Context, a PauseParams) (PauseResult, error) {
	if a.Action != ActionPause && a.Action != ActionResume {
		return PauseResult{}, fmt.Errorf("pause: unknown action %q", a.Action)
	}
	res, err := s.run(ctx, s.scripts.pause, pauseLua{runArgs: s.runArgs(a.RunID, a.Now), Action: a.Action,
		Actor: a.Actor})
	if err != nil {
		return PauseResult{}, fmt.Errorf("%s: %w", a.Action, err)
	}
	d, err := refusal(decodePause(res, a.Action))
	if d, err = accept(a.Action, d, err, []Outcome{OutcomePaused, OutcomeResumed, OutcomeNoop}); err != nil {
		return PauseResult{}, err
	}
	out := PauseResult{Outcome: d.Outcome, Reason: d.Reason, TaskID: d.Task}
	if d.Dispatch != nil && !d.Dispatch.DueAt.IsZero() {
		out.DueAt = d.Dispatch.DueAt
	}
	return out, nil
}

// decodePause decodes pause.lua's reply.
func decodePause(res []string, op string) (decoded, error) {
	r := newReply(op, res)
	switch r.word() {
	case "paused":
		r.want(1)
		return r.result(decoded{Outcome: OutcomePaused})
	case "resumed":
		r.want(3)
		d := decoded{Outcome: OutcomeResumed, Task: r.str(replyField)}
		if due := r.integer(replyField + 1); due > 0 {
			d.Dispatch = &Dispatch{DueAt: time.UnixMilli(int64(due))}
		}
		return r.result(d)
	case "noop":
		return decodeReason(r, OutcomeNoop)
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

// listPaused is ListRuns of the paused runs: idx:paused, whose entries of
// runs that ended while paused are left out (a page may then hold fewer
// runs than its limit).
func (s *Store) listPaused(ctx context.Context, q ListQuery) (Page, error) {
	p, err := s.scanRuns(ctx, s.keys.paused(), q)
	if err != nil {
		return Page{}, err
	}
	out := p.Runs[:0]
	for _, r := range p.Runs {
		if r.Paused && (q.Status == "" || r.Status == q.Status) {
			out = append(out, r)
		}
	}
	p.Runs = out
	return p, nil
}
