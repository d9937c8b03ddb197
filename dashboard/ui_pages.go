package dashboard

import (
	"errors"
	"fmt"
	"html/template"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// funcs are the template functions of the pages.
func (u *webUI) funcs() template.FuncMap {
	return template.FuncMap{
		"asset": u.assetURL,
		"ts":    formatTime,
		"iso": func(t any) string {
			if tt, ok := timeOf(t); ok {
				return tt.Format(time.RFC3339Nano)
			}
			return ""
		},
		"dur":         stepDuration,
		"until":       secondsUntil,
		"details":     sortedDetails,
		"runURL":      func(id string) string { return "/runs/" + url.PathEscape(id) },
		"apiRun":      func(id string) string { return "/api/v1/workflows/" + url.PathEscape(id) },
		"stepAPI":     stepActionURL,
		"thenText":    compensationThen,
		"human":       humanDuration,
		"orderingURL": orderingURL,
		"tsShort":     shortTime,
		"latency":     latencyText,
	}
}

func timeOf(v any) (time.Time, bool) {
	switch t := v.(type) {
	case time.Time:
		return t, !t.IsZero()
	case *time.Time:
		if t != nil && !t.IsZero() {
			return *t, true
		}
	}
	return time.Time{}, false
}

// formatTime shows a time in UTC to the second, "—" for none.
func formatTime(v any) string {
	t, ok := timeOf(v)
	if !ok {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
}

// shortTime shows a time in UTC briefly: the time of day alone on now's
// day, else with the month and day too.
func shortTime(t time.Time, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	if t.IsZero() {
		return "—"
	}
	if t.Year() == now.Year() && t.YearDay() == now.YearDay() {
		return t.Format("15:04:05")
	}
	return t.Format("Jan 2 15:04")
}

// stepDuration is how long a step took (or has been running, until now).
func stepDuration(start, end *time.Time, now time.Time) string {
	if start == nil {
		return ""
	}
	stop := now
	if end != nil {
		stop = *end
	}
	d := stop.Sub(*start)
	switch {
	case d < 0:
		return ""
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// secondsUntil is the whole seconds from now to t, rounded up, at least 0:
// the server's first rendering of a countdown the script then ticks.
func secondsUntil(t *time.Time, now time.Time) int {
	if t == nil {
		return 0
	}
	return max(0, int(math.Ceil(t.Sub(now).Seconds())))
}

// detail is one key and value of a journal entry's details.
type detail struct{ Key, Value string }

func sortedDetails(m map[string]string) []detail {
	out := make([]detail, 0, len(m))
	for k, v := range m {
		out = append(out, detail{k, v})
	}
	slices.SortFunc(out, func(a, b detail) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return out
}

// compensationThen says what follows a run's compensations
// (Compensating.Then).
func compensationThen(c *workflow.Compensating) string {
	switch c.Then {
	case "compensated":
		return "then the run ends compensated"
	case "failed":
		return "then the run fails (its required group " + c.Group + " was rolled back)"
	case "continue":
		return "then the run goes on after its optional group " + c.Group
	}
	return "then: " + c.Then
}

func stepActionURL(id, step, action string) string {
	return "/api/v1/workflows/" + url.PathEscape(id) + "/steps/" + url.PathEscape(step) + "/" + action
}

// eventsCursor is where the page's event stream starts: the last
// notification before the page's data is read, so that no transition after
// it is missed. "" (the stream's own start) when Redis does not say.
func (u *webUI) eventsCursor(r *http.Request) string {
	if isFragment(r) {
		return ""
	}
	_, cursor, err := u.s.client.WatchNotifications(r.Context(), "", 0)
	if err != nil {
		return ""
	}
	if _, err := parseStreamID(cursor); err != nil {
		return ""
	}
	return cursor
}

// runsData is the data of the runs list.
type runsData struct {
	Runs []*workflow.Run
	// Filters, as given.
	Status, Workflow, Owner string
	// Paused: only the paused runs (the filter paused=true).
	Paused    bool
	Statuses  []workflow.RunStatus
	Workflows []string
	// Cursor is this page's; NextURL the next page's ("" after the last).
	Cursor  string
	NextURL string
	// Rows are the runs with their current steps; Counts the bar of counts
	// by status (nil when they could not be read).
	Rows   []runRow
	Counts *countsBar
	// Bulk offers the admins' bulk actions; FilterText describes the
	// filters in use, for their confirmation.
	Bulk       bool
	FilterText string
	// NoWorker names the queue when a run of the page waits for a worker
	// and no live worker serves the queue ("" otherwise).
	NoWorker string
	// Search is the search as given (echoed in the form); SearchError
	// why it was refused ("" when it was not). Scanned is the number of
	// runs the page examined, ScanLimited whether the bound of the scan
	// ended the page (NextURL then goes on searching).
	Search      searchForm
	SearchError string
	Scanned     int
	ScanLimited bool
}

// runsPage lists the caller's runs (an admin's: every run, or one owner's),
// newest first, filtered by status and workflow.
func (u *webUI) runsPage(w http.ResponseWriter, r *http.Request, p Principal) {
	cursor, limit, err := pageParams(r)
	if err != nil {
		u.fail(w, r, p, err)
		return
	}
	q := r.URL.Query()
	d := runsData{Status: q.Get("status"), Workflow: q.Get("workflow"), Cursor: cursor,
		Statuses: workflow.RunStatuses}
	opts := workflow.ListOptions{Status: workflow.RunStatus(d.Status), Workflow: d.Workflow, Cursor: cursor, Limit: limit,
		Owner: p.Subject}
	if p.IsAdmin() {
		d.Owner = q.Get("owner")
		opts.Owner = d.Owner
	}
	switch v := q.Get("paused"); v {
	case "", "false", "0":
	case "true", "1":
		d.Paused, opts.Paused = true, true
	default:
		u.renderError(w, r, p, http.StatusBadRequest, fmt.Sprintf("paused=%q: want true or false.", cut(v, 32)))
		return
	}
	if d.Workflow != "" && !workflowNameRE.MatchString(d.Workflow) {
		u.renderError(w, r, p, http.StatusBadRequest, fmt.Sprintf("%q is not a workflow name.", cut(d.Workflow, 80)))
		return
	}
	if len(d.Owner) > 128 {
		u.renderError(w, r, p, http.StatusBadRequest, "The owner filter is longer than 128 bytes.")
		return
	}
	v := u.newView(r, p, "runs", "Runs")
	v.EventsAfter = u.eventsCursor(r)
	status := http.StatusOK
	search, serr := u.s.searchParams(q, &opts, p.IsAdmin())
	d.Search = search
	var page workflow.ListPage
	if ae, ok := errors.AsType[*apiError](serr); ok {
		status, d.SearchError = ae.status, ae.detail
	} else {
		page, err = u.s.client.ListPage(r.Context(), opts)
		if err != nil {
			u.fail(w, r, p, err)
			return
		}
	}
	runs, next := page.Runs, page.Next
	d.Runs, d.ScanLimited = runs, page.Limited
	if p.IsAdmin() {
		d.Scanned = page.Scanned // a user's counts other owners' runs too
	}
	d.Rows = u.runRows(r.Context(), runs, v.Now)
	d.NoWorker = u.s.noWorker(r, runs...)
	if cb, err := u.countRuns(r.Context(), p, q, d.Status, d.Workflow, d.Owner); err == nil {
		if d.Search.Active() {
			cb.Scope += " (without the search)"
		}
		d.Counts = &cb
	} else {
		reqLog(r).Warn("runs page: cannot count the runs", "error", err)
	}
	// (The bulk actions' filters know no paused filter: a bulk action on
	// "every run matching" would reach more runs than the page lists.)
	d.Bulk = p.IsAdmin() && !d.Paused
	d.FilterText = bulkFilterText(d.Status, d.Workflow, d.Owner)
	if next != "" {
		nq := url.Values{}
		for _, k := range []string{"status", "workflow", "owner", "paused", "limit"} {
			if x := q.Get(k); x != "" {
				nq.Set(k, x)
			}
		}
		for _, k := range searchParamNames {
			for _, x := range q[k] {
				if x != "" {
					nq.Add(k, x)
				}
			}
		}
		nq.Set("cursor", next)
		d.NextURL = "/?" + nq.Encode()
	}
	if names, err := u.s.client.Workflows(r.Context()); err == nil {
		for name := range names {
			d.Workflows = append(d.Workflows, name)
		}
		slices.Sort(d.Workflows)
	} else {
		reqLog(r).Warn("runs page: cannot list the workflows for the filter", "error", err)
	}
	if d.Workflow != "" && !slices.Contains(d.Workflows, d.Workflow) {
		d.Workflows = append(d.Workflows, d.Workflow)
	}
	lq := url.Values{}
	maps.Copy(lq, q)
	lq.Set(fragmentParam, "1")
	if serr == nil { // a refused search has nothing to update
		v.Live = "/?" + lq.Encode()
	}
	v.Data = d
	u.render(w, r, status, v)
}

// stepView is a step of the run page, with the actions it allows.
type stepView struct {
	workflow.StepState
	Index    int
	Current  bool
	CanRetry bool
	CanSkip  bool
	// MaxAttempts is the step's attempt budget (0: not known).
	MaxAttempts int
	// Comp is the step's compensation, when the page shows it: once it
	// has started, and while the run's compensations are to undo the step
	// (nil otherwise; Compensable then tells whether the step has one).
	Comp        *compView
	Compensable bool
	// CurrentError: the step's last error is why it is where it is (it
	// failed, or waits to retry); History its earlier failed attempts (all
	// of them once it succeeded, was skipped or undone: errors it got past
	// are history, not a current error).
	CurrentError bool
	History      []stepError
	// Output is the step's output as the page shows it (nil: none).
	Output *jsonBlock
	// RetryNowURL is where the step's "Retry now" form posts, when its
	// scheduled retry may be made due now ("": no form; ui_retrynow.go).
	RetryNowURL string
}

// stepDone tells whether a step status is one the step's errors are
// behind: it succeeded, was skipped, undone or cancelled.
func stepDone(st workflow.StepStatus) bool {
	switch st {
	case workflow.StepSucceeded, workflow.StepSkipped, workflow.StepCompensated, workflow.StepRolledBack,
		workflow.StepCancelled:
		return true
	default:
		return false
	}
}

// setStepErrors sets a step's current error and history from its failed
// attempts in the journal (oldest first).
func setStepErrors(s *stepView, errs []stepError) {
	s.CurrentError = s.LastError != "" && !stepDone(s.Status)
	s.History = errs
	switch {
	case s.CurrentError && len(errs) > 0:
		s.History = errs[:len(errs)-1] // the last one is shown as current
	case !s.CurrentError && len(errs) == 0 && s.LastError != "":
		// The journal no longer has it (trimmed): the record's last error.
		s.History = []stepError{{Attempt: s.Attempts, Class: s.LastErrorClass, Code: s.LastErrorCode, Error: s.LastError}}
	}
}

// Scheduled reports whether the step waits for a scheduled retry.
func (s stepView) Scheduled() bool {
	return s.RetryState == workflow.RetryScheduled && s.NextAttemptAt != nil
}

// compView is the compensation of a step on the run page (its name is
// "compensate:<step>").
type compView struct {
	workflow.StepState
	Current bool
	// CanRetry: the compensation failed for good and the run waits for it
	// to be retried (POST .../steps/compensate:<step>/retry).
	CanRetry bool
	// Output is the compensation's output as the page shows it (nil:
	// none).
	Output *jsonBlock
}

// Scheduled reports whether the compensation waits for a scheduled retry.
func (c compView) Scheduled() bool {
	return c.RetryState == workflow.RetryScheduled && c.NextAttemptAt != nil
}

// runData is the data of the run page.
type runData struct {
	Run        *workflow.Run
	Steps      []stepView
	Events     []workflow.Event // newest first
	MoreEvents int              // older entries not shown
	CanRecover bool
	CanCancel  bool
	// CanPause and CanResume: the run has not ended and is not paused;
	// it is paused (POST .../pause, .../resume).
	CanPause, CanResume bool
	// CanCompensate: the run can be cancelled (or, failed, given up) and
	// its succeeded steps compensated (POST .../cancel?compensate=true):
	// it is pending, running or failed, not stopped at a failed
	// compensation, and a succeeded step has a compensation.
	CanCompensate bool
	// CompensationStopped: the run failed at its compensation of a step
	// (workflow.CodeCompensationFailed), named here; retrying it, or
	// recovering the run, goes on with the saga.
	CompensationStopped string
	// Next is the step (or compensation) waiting for a scheduled retry,
	// if any.
	Next *workflow.StepState
	// Waiting is what the run waits for while its current step awaits a
	// signal or sleeps (nil otherwise), and WaitLeft how long until it
	// times out or fires. Signal is the signal the page's form sends (the
	// caller may see the run: its owner or an admin).
	Waiting  *workflow.WaitingFor
	WaitLeft string
	Signal   string
	// Timeline is the run's attempts and waits, drawn to scale.
	Timeline timelineView
	// HeldBy are the runs that hold the line the run waits in, under its
	// ordering key (those the caller may see), to act on when one blocks
	// the key.
	HeldBy []*workflow.Run
	// Input is the run's input as the page shows it (nil: none).
	Input *jsonBlock
	// RestoreURL is where an admin's restore form of a finished run posts
	// ("": no form), RestoreFrom the steps it may start again from
	// (ui_retrynow.go).
	RestoreURL  string
	RestoreFrom []string
	// NoWorker names the run's queue when the run waits for a worker and
	// no live worker serves the queue ("" otherwise).
	NoWorker string
}

// heldBy reads the runs that hold the ordering key's line run waits in,
// those p may see (a user's own line holds only their runs; in a shared
// line visibleRun left them out for a user).
func (u *webUI) heldBy(r *http.Request, p Principal, run *workflow.Run) ([]*workflow.Run, error) {
	if run.WaitingFor == nil {
		return nil, nil
	}
	var out []*workflow.Run
	for _, id := range run.WaitingFor.HeldBy {
		h, err := u.s.client.Get(r.Context(), id)
		if errors.Is(err, workflow.ErrRunNotFound) {
			continue // it ended and expired since
		}
		if err != nil {
			return nil, err
		}
		if p.CanSee(h.Owner) {
			out = append(out, h)
		}
	}
	return out, nil
}

// maxJournalRows bounds the journal entries the run page shows; the API
// has them all.
const maxJournalRows = 200

// runPage shows one run, if the caller may see it (else 404, as the API).
func (u *webUI) runPage(w http.ResponseWriter, r *http.Request, p Principal) {
	v := u.newView(r, p, "run", "Run")
	v.EventsAfter = u.eventsCursor(r)
	run, err := u.s.loadRun(r)
	if err != nil {
		u.fail(w, r, p, err)
		return
	}
	evs, err := u.s.client.Events(r.Context(), run.ID)
	if err != nil {
		u.fail(w, r, p, err)
		return
	}
	d := runData{Run: run,
		CanRecover: run.Status == workflow.StatusFailed || (run.NeedsAttention && !run.Terminal()),
		CanCancel: run.Status == workflow.StatusPending || run.Status == workflow.StatusRunning ||
			run.Status == workflow.StatusCompensating,
		CanPause: !run.Terminal() && run.Paused == nil, CanResume: run.Paused != nil}
	now := u.s.clock.Now()
	d.Timeline = layoutTimeline(buildTimeline(run, evs, now))
	if d.HeldBy, err = u.heldBy(r, p, run); err != nil {
		u.fail(w, r, p, err)
		return
	}
	errs := stepErrors(evs)
	atCompensation := strings.HasPrefix(run.CurrentStep, workflow.CompensationPrefix)
	if run.Status == workflow.StatusFailed && atCompensation {
		d.CompensationStopped = strings.TrimPrefix(run.CurrentStep, workflow.CompensationPrefix)
	}
	// The outputs and the input are those of the run loadRun returned:
	// what GET /api/v1/workflows/{id} shows this caller, which has them
	// whole.
	api := "/api/v1/workflows/" + url.PathEscape(run.ID)
	d.Input = newJSONBlock("input", "Input", api, run.Input)
	for i, st := range run.Steps {
		sv := stepView{StepState: st, Index: i, Current: st.Name == run.CurrentStep && !run.Terminal(),
			Output: newJSONBlock("step:"+st.Name, "Output", api, st.Output)}
		if st.EffectivePolicy != nil {
			sv.MaxAttempts = st.EffectivePolicy.MaxAttempts
		}
		setStepErrors(&sv, errs[st.Name])
		sv.CanRetry = run.Status == workflow.StatusFailed && st.Status == workflow.StepFailed && !atCompensation
		sv.CanSkip = sv.CanRetry && st.Optional
		if c := st.Compensation; c != nil {
			sv.Compensable = true
			if run.CompensationInPlay(i) {
				sv.Comp = &compView{StepState: *c, Current: c.Name == run.CurrentStep && !run.Terminal(),
					CanRetry: run.Status == workflow.StatusFailed && c.Name == run.CurrentStep && c.Status == workflow.StepFailed,
					Output:   newJSONBlock("comp:"+st.Name, "Output", api, c.Output)}
			}
			if st.Status == workflow.StepSucceeded && !atCompensation &&
				(run.Status == workflow.StatusPending || run.Status == workflow.StatusRunning || run.Status == workflow.StatusFailed) {
				d.CanCompensate = true
			}
		}
		d.Steps = append(d.Steps, sv)
	}
	for i := range d.Steps {
		if d.Steps[i].Scheduled() {
			d.Next = &d.Steps[i].StepState
			break
		}
		if c := d.Steps[i].Comp; c != nil && c.Scheduled() {
			d.Next = &c.StepState
			break
		}
	}
	waitView(&d, now)
	retryNowView(&d, p)
	d.NoWorker = u.s.noWorker(r, run)
	slices.Reverse(evs)
	if len(evs) > maxJournalRows {
		d.MoreEvents = len(evs) - maxJournalRows
		evs = evs[:maxJournalRows]
	}
	d.Events = evs
	v.Title = "Run " + run.ID
	v.RunID = run.ID
	v.Live = "/runs/" + url.PathEscape(run.ID) + "?" + fragmentParam + "=1"
	v.Data = d
	u.render(w, r, http.StatusOK, v)
}

// attentionData is the data of the needs-attention page.
type attentionData struct {
	Runs    []*workflow.Run
	Cursor  string
	NextURL string
}

// breakersPage lists the queue's circuit breakers (the data of GET
// /api/v1/breakers), with a reset button for admins.
func (u *webUI) breakersPage(w http.ResponseWriter, r *http.Request, p Principal) {
	v := u.newView(r, p, "breakers", "Circuit breakers")
	bs, err := u.s.client.Breakers(r.Context())
	if err != nil {
		u.fail(w, r, p, err)
		return
	}
	lq := r.URL.Query()
	lq.Set(fragmentParam, "1")
	v.Live = BreakersPath + "?" + lq.Encode()
	v.Data = BreakerList{Breakers: bs}
	u.render(w, r, http.StatusOK, v)
}

// attentionPage lists, for admins, the runs that need an operator (the
// data of GET /api/v1/admin/workflows/failed).
func (u *webUI) attentionPage(w http.ResponseWriter, r *http.Request, p Principal) {
	cursor, limit, err := pageParams(r)
	if err != nil {
		u.fail(w, r, p, err)
		return
	}
	v := u.newView(r, p, "attention", "Needs attention")
	v.EventsAfter = u.eventsCursor(r)
	runs, next, err := u.s.client.NeedingAttention(r.Context(), cursor, limit)
	if err != nil {
		u.fail(w, r, p, err)
		return
	}
	d := attentionData{Runs: runs, Cursor: cursor}
	if next != "" {
		d.NextURL = AttentionPath + "?" + url.Values{"cursor": {next}}.Encode()
	}
	lq := r.URL.Query()
	lq.Set(fragmentParam, "1")
	v.Live = AttentionPath + "?" + lq.Encode()
	v.Data = d
	u.render(w, r, http.StatusOK, v)
}
