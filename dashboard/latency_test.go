package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/workflow"
)

// hostileStep is a step name no definition may have, written straight to
// Redis: the API and the page must show it as text.
const hostileStep = `<img src=x onerror="alert(1)">'&`

// seedLatency writes latency counts as the workers' flushes do, into the
// current hour's hash and the one 30 hours ago: demo/fetch ran 9 times in
// bucket 27 ([90.5ms, 107.6ms)) and once in bucket 60 ([27.6s, 32.8s)),
// and waited 10 times in bucket 5 ([2ms, 2.38ms)); 30 hours ago, 4 more
// runs of bucket 27; a hostile step name once.
func (e *env) seedLatency() {
	e.t.Helper()
	ctx := context.Background()
	h := time.Now().Unix() / 3600
	key := func(hour int64) string { return fmt.Sprintf("cairn:{%s}:lat:%d", e.queue, hour) }
	if err := e.rdb.HSet(ctx, key(h), "d|demo|fetch|27", 9, "d|demo|fetch|60", 1, "w|demo|fetch|5", 10,
		"d|other|"+hostileStep+"|10", 1).Err(); err != nil {
		e.t.Fatal(err)
	}
	if err := e.rdb.HSet(ctx, key(h-30), "d|demo|fetch|27", 4).Err(); err != nil {
		e.t.Fatal(err)
	}
}

// TestLatencyAPI: GET /api/v1/latency answers the percentiles of the
// window's hours per workflow and step (the upper bounds of their
// buckets, in ms), for one workflow or all, and refuses a window or a
// workflow it does not know with a 400 problem.
func TestLatencyAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true})
	e.seedLatency()
	get := func(query string) workflow.LatencyReport {
		t.Helper()
		resp := e.do(req{method: "GET", path: "/api/v1/latency" + query, token: bobToken})
		if resp.status != http.StatusOK {
			t.Fatalf("%s: %d %s", query, resp.status, resp.body)
		}
		var rep workflow.LatencyReport
		resp.decode(t, &rep)
		return rep
	}
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	fetch := workflow.LatencySeries{Workflow: "demo", Step: "fetch",
		Duration: workflow.LatencyStats{Count: 10, P50: ms(107.634741), P90: ms(107.634741), P99: ms(32768)},
		Wait:     workflow.LatencyStats{Count: 10, P50: ms(2.378414), P90: ms(2.378414), P99: ms(2.378414)}}
	rep := get("?window=1h")
	if rep.WindowName != "1h" || len(rep.Series) != 2 || rep.Series[0] != fetch || rep.Series[1].Step != hostileStep {
		t.Errorf("1h: %+v, want demo/fetch %+v and the hostile step", rep, fetch)
	}
	if rep := get("?window=1h&workflow=demo"); len(rep.Series) != 1 || rep.Series[0] != fetch {
		t.Errorf("1h of demo: %+v, want %+v", rep.Series, fetch)
	}
	// 24h: the default window; the hour 30 hours ago is not in it.
	if rep := get(""); rep.WindowName != "24h" || len(rep.Series) != 2 || rep.Series[0].Duration.Count != 10 {
		t.Errorf("24h: %+v", rep)
	}
	fetch.Duration.Count = 14
	if rep := get("?window=7d&workflow=demo"); len(rep.Series) != 1 || rep.Series[0] != fetch {
		t.Errorf("7d of demo: %+v, want %+v", rep.Series, fetch)
	}
	if rep := get("?window=7d&workflow=nothing"); len(rep.Series) != 0 || rep.Series == nil {
		t.Errorf("7d of a workflow without counts: %+v, want an empty list", rep)
	}
	// The hostile name is a JSON string like any other, in a document no
	// browser sniffs as HTML.
	if resp := e.do(req{method: "GET", path: "/api/v1/latency?window=1h", token: aliceToken}); resp.header.Get("Content-Type") != "application/json" ||
		resp.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers %v", resp.header)
	}
	for _, q := range []string{"?window=2h", "?window=", "?window=24h&workflow=" + strings.Repeat("w", 65),
		"?workflow=a%7Cb", "?workflow=%3Cscript%3E"} {
		resp := e.do(req{method: "GET", path: "/api/v1/latency" + q, token: aliceToken})
		if q == "?window=" {
			// An empty window is the default.
			if resp.status != http.StatusOK {
				t.Errorf("%s: %d %s", q, resp.status, resp.body)
			}
			continue
		}
		if resp.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", q, resp.status, resp.body)
			continue
		}
		if p := resp.problem(t); !strings.HasPrefix(p.Type, dashboard.ProblemType("invalid-")) || len(p.Detail) > 200 {
			t.Errorf("%s: problem %+v", q, p)
		}
	}
}

// TestUILatencyPage: every signed-in user sees the latency table, without
// script, the hostile step name as text; the windows are links; a bad
// window is a 400 page; without a cookie the page sends to sign in.
func TestUILatencyPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{ui: true, noWorker: true})
	e.seedLatency()
	for _, tok := range []string{aliceToken, bobToken, rootToken} {
		resp := e.page("/latency?window=1h", tok)
		if resp.status != http.StatusOK {
			t.Fatalf("latency page: %d %s", resp.status, resp.body)
		}
		h := resp.html()
		for _, want := range []string{`id="latency-table"`, `<td data-label="Step" class="mono">fetch</td>`,
			`<td data-label="Run time p50">107ms</td>`, `<td data-label="Run time p99">32.77s</td>`,
			`<td data-label="Wait p50">2.38ms</td>`, `href="/latency?window=7d"`, `aria-current="true" data-window="1h"`,
			`&lt;img src=x onerror=&#34;alert(1)&#34;&gt;&#39;&amp;`} {
			if !strings.Contains(h, want) {
				t.Errorf("the page lacks %s:\n%s", want, h)
			}
		}
		if strings.Contains(h, "<img src=x") {
			t.Errorf("the hostile step name is markup:\n%s", h)
		}
	}
	if resp := e.page("/latency?window=1h&workflow=demo", aliceToken); strings.Contains(resp.html(), "onerror") ||
		!strings.Contains(resp.html(), `href="/latency?window=24h&amp;workflow=demo"`) {
		t.Errorf("the page of demo shows another workflow, or its links forget the filter:\n%s", resp.html())
	}
	if resp := e.page("/latency?window=5m", aliceToken); resp.status != http.StatusBadRequest {
		t.Errorf("bad window: %d, want 400", resp.status)
	}
	if resp := e.page("/latency", ""); resp.status != http.StatusSeeOther ||
		!strings.HasPrefix(resp.header.Get("Location"), dashboard.SignInPath) {
		t.Errorf("without a cookie: %d %s, want a redirect to sign in", resp.status, resp.header.Get("Location"))
	}
}
