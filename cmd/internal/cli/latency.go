package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/cairnhq/cairn/workflow"
)

// latencyWindows are the windows "latency --window" takes, as the HTTP
// API's GET /api/v1/latency does.
var latencyWindows = map[string]time.Duration{"1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour}

// latencyWindowNames are latencyWindows' names, for help and completion.
var latencyWindowNames = []string{"1h", "24h", "7d"}

// parseLatency parses "latency [--window 1h|24h|7d] [--workflow W] [--json]".
func parseLatency(_ *CLI, fs *pflag.FlagSet) parseFunc {
	window := fs.String("window", "24h", "")
	wf := fs.String("workflow", "", "")
	asJSON := fs.Bool("json", false, "")
	return func(_ context.Context, pos []string) (action, error) {
		if len(pos) != 0 {
			return nil, usageErrorf("latency takes no arguments")
		}
		d, ok := latencyWindows[*window]
		if !ok {
			return nil, usageErrorf("latency --window %q: want 1h, 24h or 7d", *window)
		}
		return func(ctx context.Context, s *session) error {
			rep, err := s.client.Latency(ctx, d, *wf)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(s.stdout(), rep)
			}
			if len(rep.Series) == 0 {
				_, err := fmt.Fprintf(s.stdout(), "no step attempt counted since %s\n", fmtTime(&rep.From))
				return err
			}
			t := newTable(s.cli.layout())
			t.head = true
			t.add("WORKFLOW", "STEP", "RUNS", "RUN P50", "RUN P90", "RUN P99", "WAITS", "WAIT P50", "WAIT P90", "WAIT P99")
			for _, x := range rep.Series {
				t.add(append(append([]string{cell(x.Workflow), cell(x.Step)}, latencyCells(x.Duration)...),
					latencyCells(x.Wait)...)...)
			}
			if err := t.write(s.stdout()); err != nil {
				return err
			}
			_, err = fmt.Fprintf(s.stdout(), "counted since %s; each percentile is its bucket's upper bound (at most 19%% above)\n",
				fmtTime(&rep.From))
			return err
		}, nil
	}
}

// latencyCells are a latency's count and percentiles, "-" for none.
func latencyCells(st workflow.LatencyStats) []string {
	if st.Count == 0 {
		return []string{"0", "-", "-", "-"}
	}
	return []string{strconv.FormatInt(st.Count, 10), fmtLatency(st.P50), fmtLatency(st.P90), fmtLatency(st.P99)}
}

// fmtLatency shows a percentile: two decimals of milliseconds under 10ms,
// then as fmtDuration.
func fmtLatency(d time.Duration) string {
	if d < 10*time.Millisecond {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
	}
	return fmtDuration(d)
}
