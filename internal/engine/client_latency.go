package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
)

// MaxLatencyWindow is the longest window Client.Latency reads: the
// workers keep 8 days of hourly counts (retrystate.LatencyRetention).
const MaxLatencyWindow = 7 * 24 * time.Hour

// Latency returns the step latencies the workers counted over window (at
// most MaxLatencyWindow), of workflow's steps ("": every workflow's): for
// each step, the percentiles of its attempts' run time and of their wait
// for a worker. The counts are by hour, so the hours read are those that
// overlap the window, the current one included (LatencyReport.From says
// where they start); counts a worker has not flushed yet
// (EngineConfig.LatencyFlushInterval) are not in it. An invalid workflow
// name or window is ErrInvalidInput.
func (c *Client) Latency(ctx context.Context, window time.Duration, workflow string) (*core.LatencyReport, error) {
	if window <= 0 || window > MaxLatencyWindow {
		return nil, fmt.Errorf("%w: latency window %s: want more than 0 and at most %s", core.ErrInvalidInput, window,
			MaxLatencyWindow)
	}
	if workflow != "" && !core.NameRE.MatchString(workflow) {
		return nil, fmt.Errorf("%w: workflow name %q", core.ErrInvalidInput, workflow)
	}
	now := c.cfg.Clock.Now()
	from, to := retrystate.LatencyHour(now.Add(-window)), retrystate.LatencyHour(now)
	series, err := c.store.LatencyRead(ctx, from, to, workflow)
	if err != nil {
		return nil, err
	}
	rep := &core.LatencyReport{Window: window, WindowName: latencyWindowName(window), From: time.Unix(from*3600, 0).UTC(),
		To: now, Series: make([]core.LatencySeries, 0, len(series))}
	for _, s := range series {
		rep.Series = append(rep.Series, core.LatencySeries{Workflow: s.Workflow, Step: s.Step,
			Duration: latencyStats(&s.Duration), Wait: latencyStats(&s.Wait)})
	}
	slices.SortFunc(rep.Series, func(a, b core.LatencySeries) int {
		return cmp.Or(cmp.Compare(a.Workflow, b.Workflow), cmp.Compare(a.Step, b.Step))
	})
	return rep, nil
}

// latencyStats reads the count and percentiles of a series' buckets.
func latencyStats(b *[retrystate.LatencyBuckets]int64) core.LatencyStats {
	var s core.LatencyStats
	s.P50, s.Count = retrystate.LatencyQuantile(b, 0.50)
	s.P90, _ = retrystate.LatencyQuantile(b, 0.90)
	s.P99, _ = retrystate.LatencyQuantile(b, 0.99)
	return s
}

// latencyWindowName names a window as the HTTP API does (1h, 24h, 7d), or
// as time.Duration writes it.
func latencyWindowName(d time.Duration) string {
	for _, w := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "1h"}, {24 * time.Hour, "24h"}, {7 * 24 * time.Hour, "7d"}} {
		if d == w.d {
			return w.name
		}
	}
	return d.String()
}
