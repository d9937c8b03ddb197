package dashboard

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// The runs list's time columns and counts: each run's current step,
// attempts, next retry and duration, and a bar of counts by status.

// runRow is a run of the runs list, with its current step's progress when
// it was read (Detailed).
type runRow struct {
	*workflow.Run
	Detailed bool
	// Step is the run's current step (or its last, once it ended), with
	// its status and attempts (MaxAttempts 0: not known).
	Step        string
	StepStatus  workflow.StepStatus
	Attempts    int
	MaxAttempts int
	// NextAt is when the step's scheduled retry (or snoozed visit) is due;
	// Snoozed tells which.
	NextAt  *time.Time
	Snoozed bool
	// Waits says what the run waits for, if anything but a retry.
	Waits string
	// Duration is from creation to the end (or now); Since, for a run not
	// ended, the start of the duration the script keeps ticking.
	Duration string
	Since    *time.Time
	// CanRecover and CanCancel tell which bulk actions apply to the run.
	CanRecover, CanCancel bool
}

// maxRowDetails bounds the runs of one list page whose steps are read;
// rows beyond show their status alone.
const maxRowDetails = 100

// rowReaders is how many runs a list page reads at once.
const rowReaders = 8

// runRows reads the current step of up to maxRowDetails runs of a list
// page, rowReaders at a time. A run that cannot be read shows without.
func (u *webUI) runRows(ctx context.Context, runs []*workflow.Run, now time.Time) []runRow {
	rows := make([]runRow, len(runs))
	sem := make(chan struct{}, rowReaders)
	var wg sync.WaitGroup
	for i, run := range runs {
		rows[i] = runRow{Run: run, CanRecover: canRecover(run), CanCancel: canCancel(run)}
		rows[i].setDuration(now)
		if i >= maxRowDetails {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			full, err := u.s.client.Get(ctx, run.ID)
			if err != nil {
				return // expired meanwhile, or Redis: the row shows what the list read
			}
			rows[i].fill(full)
		})
	}
	wg.Wait()
	return rows
}

// setDuration sets the row's duration as of now.
func (r *runRow) setDuration(now time.Time) {
	end := now
	if r.FinishedAt != nil {
		end = *r.FinishedAt
	} else {
		since := r.CreatedAt
		r.Since = &since
	}
	r.Duration = humanDuration(end.Sub(r.CreatedAt))
}

// currentStep returns the run's current step (a compensation's record
// for "compensate:<step>"), nil when it has none.
func currentStep(run *workflow.Run) *workflow.StepState {
	name := run.CurrentStep
	if name == "" {
		return nil
	}
	if st, ok := strings.CutPrefix(name, workflow.CompensationPrefix); ok {
		if s := run.Step(st); s != nil && s.Compensation != nil {
			return s.Compensation
		}
		return nil
	}
	return run.Step(name)
}

// fill sets the row's step columns from the run read with its steps.
func (r *runRow) fill(full *workflow.Run) {
	r.Detailed = true
	r.Step = full.CurrentStep
	st := currentStep(full)
	if st == nil {
		return
	}
	r.StepStatus = st.Status
	r.Attempts = st.Attempts
	if st.EffectivePolicy != nil {
		r.MaxAttempts = st.EffectivePolicy.MaxAttempts
	}
	if !full.Terminal() && st.RetryState == workflow.RetryScheduled && st.NextAttemptAt != nil {
		r.NextAt = st.NextAttemptAt
		r.Snoozed = st.Snoozed
	}
	if wf := full.WaitingFor; wf != nil && !full.Terminal() {
		switch wf.Reason() {
		case workflow.WaitSignal:
			r.Waits = "signal " + wf.Signal
		case workflow.WaitOrderingKey:
			r.Waits = "its turn (ordering key)"
		case workflow.WaitWorkflowLimit:
			r.Waits = "a slot (max_running)"
		case workflow.WaitTimer:
			r.Waits = "a timer"
		}
		if wf.Position > 0 {
			r.Waits += ", #" + strconv.Itoa(wf.Position)
		}
	}
}

// countsBar is the bar of run counts by status above the runs list; each
// count links to the list filtered by its status.
type countsBar struct {
	Items []countItem
	Total int64
	// AllURL lists every status (the other filters kept); AllCurrent: no
	// status filter is in use.
	AllURL     string
	AllCurrent bool
	// Scope says what is counted; Capped: only the newest runs were.
	Scope  string
	Capped bool
	// Attention counts the runs needing an operator (admins, when known).
	Attention int64
}

// countItem is one status of the bar.
type countItem struct {
	Status  workflow.RunStatus
	N       int64
	URL     string
	Current bool
}

// maxCountScan bounds the runs read to count a filtered list (a user's
// runs, or a workflow's or owner's).
const maxCountScan = 5000

// listURL is the runs list's URL with the filters of q (status replaced).
func listURL(q url.Values, status string) string {
	nq := url.Values{}
	for _, k := range []string{"workflow", "owner", "limit"} {
		if v := q.Get(k); v != "" {
			nq.Set(k, v)
		}
	}
	for _, k := range searchParamNames { // a status link narrows the search
		for _, v := range q[k] {
			if v != "" {
				nq.Add(k, v)
			}
		}
	}
	if status != "" {
		nq.Set("status", status)
	}
	if len(nq) == 0 {
		return "/"
	}
	return "/?" + nq.Encode()
}

// countRuns returns the counts bar of the runs list: exact counts of the
// whole queue for an admin without a workflow or owner filter, else the
// counts among the newest maxCountScan runs of the ones the list shows.
func (u *webUI) countRuns(ctx context.Context, p Principal, q url.Values, status, wf, owner string) (countsBar, error) {
	b := countsBar{AllURL: listURL(q, ""), AllCurrent: status == ""}
	counts := map[workflow.RunStatus]int64{}
	if p.IsAdmin() && wf == "" && owner == "" {
		m, err := u.s.client.Counts(ctx)
		if err != nil {
			return b, err
		}
		for _, st := range workflow.RunStatuses {
			counts[st] = m[string(st)]
		}
		b.Attention = m["needs_attention"]
		b.Scope = "every run in the queue"
	} else {
		stamps, more, err := u.s.client.ScanRuns(ctx, time.Time{}, maxCountScan)
		if err != nil {
			return b, err
		}
		if !p.IsAdmin() {
			owner = p.Subject
		}
		for _, s := range stamps {
			if (owner != "" && s.Owner != owner) || (wf != "" && s.Workflow != wf) {
				continue
			}
			counts[s.Status]++
		}
		b.Capped = more
		switch {
		case !p.IsAdmin():
			b.Scope = "your runs"
		case owner != "":
			b.Scope = owner + "'s runs"
		default:
			b.Scope = "the runs"
		}
		if wf != "" {
			b.Scope += " of workflow " + wf
		}
		if more {
			b.Scope += ", among the newest 5,000 in the queue"
		}
	}
	for _, st := range workflow.RunStatuses {
		b.Items = append(b.Items, countItem{Status: st, N: counts[st], URL: listURL(q, string(st)), Current: string(st) == status})
		b.Total += counts[st]
	}
	return b, nil
}
