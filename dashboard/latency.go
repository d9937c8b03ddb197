package dashboard

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// LatencyPath is the web UI's page of step latencies.
const LatencyPath = "/latency"

// latencyWindows are the windows GET /api/v1/latency and the Latency page
// offer, by name, in the order the page lists them.
var latencyWindows = []struct {
	Name string
	D    time.Duration
}{{"1h", time.Hour}, {"24h", 24 * time.Hour}, {"7d", 7 * 24 * time.Hour}}

// latencyQuery reads the window (default 24h) and workflow ("": all) of a
// latency request; anything else is a 400.
func latencyQuery(r *http.Request) (name string, d time.Duration, wf string, err error) {
	q := r.URL.Query()
	name = q.Get("window")
	if name == "" {
		name = "24h"
	}
	for _, w := range latencyWindows {
		if w.Name == name {
			d = w.D
		}
	}
	if d == 0 {
		return "", 0, "", problemf(http.StatusBadRequest, ProblemInvalidRequest, "window %q: want 1h, 24h or 7d",
			truncate(name, 40))
	}
	wf = q.Get("workflow")
	if len(wf) > 64 {
		// (Client.Latency checks the rest of the name.)
		return "", 0, "", problemf(http.StatusBadRequest, ProblemInvalidRequest,
			"workflow %q: longer than a workflow name (64 bytes)", truncate(wf, 64))
	}
	return name, d, wf, nil
}

// truncate cuts s to at most n bytes, for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// latency answers GET /api/v1/latency: the percentiles of step run times
// and waits for a worker per workflow and step over a window. Every user
// sees them, as they see /metrics (whose cairn_step_duration_seconds
// holds the same run times): names of workflows and steps are not run
// data, and the counts are summed over every owner's runs, naming none.
func (s *Server) latency(w http.ResponseWriter, r *http.Request) {
	_, d, wf, err := latencyQuery(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rep, err := s.client.Latency(r.Context(), d, wf)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// latencyData is the Latency page's data.
type latencyData struct {
	// Windows link to the page over each window (the current one marked).
	Windows []latencyWindowLink
	Window  string
	// Workflow is the workflow the page is limited to ("": all).
	Workflow string
	Report   *workflow.LatencyReport
}

type latencyWindowLink struct {
	Name, URL string
	Current   bool
}

// latencyPage shows the step latencies (the data of GET /api/v1/latency)
// as a table, one row per workflow and step; the windows are links and the
// workflow filter a GET form, so it reads without JavaScript.
func (u *webUI) latencyPage(w http.ResponseWriter, r *http.Request, p Principal) {
	name, d, wf, err := latencyQuery(r)
	if err != nil {
		u.fail(w, r, p, err)
		return
	}
	rep, err := u.s.client.Latency(r.Context(), d, wf)
	if err != nil {
		u.fail(w, r, p, err)
		return
	}
	v := u.newView(r, p, "latency", "Latency")
	data := latencyData{Window: name, Workflow: wf, Report: rep}
	for _, lw := range latencyWindows {
		q := url.Values{"window": {lw.Name}}
		if wf != "" {
			q.Set("workflow", wf)
		}
		data.Windows = append(data.Windows, latencyWindowLink{Name: lw.Name, URL: LatencyPath + "?" + q.Encode(),
			Current: lw.Name == name})
	}
	v.Data = data
	u.render(w, r, http.StatusOK, v)
}

// latencyText writes a percentile: milliseconds with two decimals under
// 10ms, whole ones under a second, seconds with two decimals under a
// minute, then as humanDuration.
func latencyText(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	}
	return humanDuration(d)
}
