package dashboard

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/cairnhq/cairn/workflow"
)

// Paths of the activity and ordering pages.
const (
	ActivityPath = "/activity"
	OrderingPath = "/ordering"
)

// Bounds of the activity page's reads.
const (
	// activityScanLimit bounds the runs read to chart a user's runs (an
	// admin's chart counts the status indexes instead).
	activityScanLimit = 20000
	// activityNotifications bounds the notifications read for the retries
	// and failures chart.
	activityNotifications = 20000
)

// windowLink is a window the activity page offers, with its URL.
type windowLink struct {
	chartWindow
	URL     string
	Current bool
}

// activityData is the data of the activity page.
type activityData struct {
	Window  chartWindow
	Windows []windowLink
	Runs    runsChart
	Steps   stepsChart
	// Stats are every step's retries and failures (the chart shows the
	// first maxStepRows), for the table.
	Stats []stepStat
	// Scope says whose runs the charts count; RunsCapped: the runs chart
	// counts the newest activityScanLimit runs of the window only;
	// NotesCapped: the steps chart the newest activityNotifications
	// notifications.
	Scope       string
	RunsCapped  bool
	NotesCapped bool
}

// checkQuery refuses a query string that does not parse, or that gives a
// parameter twice or one not in allowed: pages take their parameters
// once each.
func checkQuery(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, problemf(http.StatusBadRequest, ProblemInvalidRequest, "malformed query string")
	}
	for k, vs := range q {
		ok := k == fragmentParam
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return nil, problemf(http.StatusBadRequest, ProblemInvalidRequest, "unknown query parameter %q", cut(k, 40))
		}
		if len(vs) != 1 {
			return nil, problemf(http.StatusBadRequest, ProblemInvalidRequest, "query parameter %q given %d times", cut(k, 40), len(vs))
		}
	}
	return q, nil
}

// activityPage charts the runs created over a window by their status, and
// the retries and failures of each workflow's steps. An admin's charts
// count every run; a user's only their own.
func (u *webUI) activityPage(w http.ResponseWriter, r *http.Request, p Principal) {
	q, err := checkQuery(r, "window")
	if err != nil {
		u.fail(w, r, p, err)
		return
	}
	win, ok := windowNamed(q.Get("window"))
	if !ok {
		u.renderError(w, r, p, http.StatusBadRequest, fmt.Sprintf("%q is not a window: use 1h or 24h.", cut(q.Get("window"), 20)))
		return
	}
	v := u.newView(r, p, "activity", "Activity")
	v.EventsAfter = u.eventsCursor(r)
	now := u.s.clock.Now()
	edges := bucketEdges(win, now)
	d := activityData{Window: win}
	for _, cw := range chartWindows {
		d.Windows = append(d.Windows, windowLink{chartWindow: cw, URL: ActivityPath + "?window=" + cw.Name,
			Current: cw.Name == win.Name})
	}
	ctx := r.Context()
	var counts map[workflow.RunStatus][]int64
	if p.IsAdmin() {
		d.Scope = "every run in the queue"
		counts, err = u.s.client.CountCreated(ctx, edges)
	} else {
		d.Scope = "your runs"
		var stamps []workflow.RunStamp
		stamps, d.RunsCapped, err = u.s.client.ScanRuns(ctx, edges[0], activityScanLimit)
		counts = bucketStamps(edges, stamps, func(s workflow.RunStamp) bool { return s.Owner == p.Subject })
	}
	if err != nil {
		u.fail(w, r, p, err)
		return
	}
	d.Runs = buildRunsChart(win, edges, counts)
	ns, more, err := u.s.client.RecentNotifications(ctx, now.Sub(edges[0]), activityNotifications)
	if err != nil {
		u.fail(w, r, p, err)
		return
	}
	d.NotesCapped = more
	var keep func(workflow.Notification) bool
	if !p.IsAdmin() {
		keep = func(n workflow.Notification) bool { return n.Owner == p.Subject }
	}
	d.Stats = stepStats(ns, keep)
	d.Steps = buildStepsChart(d.Stats)
	v.Live = ActivityPath + "?" + url.Values{"window": {win.Name}, fragmentParam: {"1"}}.Encode()
	v.Data = d
	u.render(w, r, http.StatusOK, v)
}

// orderingData is the data of the ordering page.
type orderingData struct {
	// Gates are the admission gates in use (admins only: ordering keys
	// name other subjects' business), GatesTotal how many there are.
	ShowGates  bool
	Gates      []workflow.GateUsage
	GatesTotal int64
	// Key is the ordering key looked up, Owner and Shared the line asked
	// for (an admin's form), Line its runs.
	Key    string
	Owner  string
	Shared bool
	Line   *workflow.KeyRuns
}

// maxGatesShown bounds the gates the ordering page lists.
const maxGatesShown = 200

// orderingPage shows the ordering keys and workflow limits in use (admins)
// and a line of one ordering key (?key=; the caller's own line, or, for an
// admin, another subject's with owner= or the shared one with shared=true,
// as the API answers).
func (u *webUI) orderingPage(w http.ResponseWriter, r *http.Request, p Principal) {
	q, err := checkQuery(r, "key", "owner", "shared")
	if err != nil {
		u.fail(w, r, p, err)
		return
	}
	v := u.newView(r, p, "ordering", "Ordering keys")
	v.EventsAfter = u.eventsCursor(r)
	d := orderingData{ShowGates: p.IsAdmin(), Key: q.Get("key"), Owner: q.Get("owner")}
	ctx := r.Context()
	if _, given := q["key"]; given {
		if err := workflow.CheckOrderingKey(d.Key); err != nil {
			u.renderError(w, r, p, http.StatusBadRequest, "That is not an ordering key: "+err.Error())
			return
		}
		line, err := keyLine(p, d.Key, q)
		if err != nil {
			u.fail(w, r, p, err)
			return
		}
		d.Shared = line.Shared
		if d.Line, err = u.s.client.OrderingKey(ctx, line, 200); err != nil {
			u.fail(w, r, p, err)
			return
		}
	}
	if d.ShowGates {
		d.Gates, d.GatesTotal, err = u.s.client.Gates(ctx, maxGatesShown)
		if err != nil {
			u.fail(w, r, p, err)
			return
		}
	}
	lq := url.Values{fragmentParam: {"1"}}
	for _, k := range []string{"key", "owner", "shared"} {
		if q.Get(k) != "" {
			lq.Set(k, q.Get(k))
		}
	}
	v.Live = OrderingPath + "?" + lq.Encode()
	v.Data = d
	u.render(w, r, http.StatusOK, v)
}

// orderingURL is the ordering page of a line of a key: owner's, or the
// shared one.
func orderingURL(key, owner string, shared bool) string {
	q := url.Values{"key": {key}}
	if shared {
		q.Set("shared", "true")
	} else if owner != "" {
		q.Set("owner", owner)
	}
	return OrderingPath + "?" + q.Encode()
}
