package core

import (
	"encoding/json"
	"time"
)

// LatencyReport is the step latencies of a window (Client.Latency): per
// workflow and step, how long step bodies ran and how long due attempts
// waited for a worker. The workers count them in hourly buckets, so a
// window covers whole hours: From is the start of the oldest hour read
// (up to an hour before the window's start), To the time of the read.
type LatencyReport struct {
	// Window is the window asked for.
	Window time.Duration `json:"-"`
	// WindowName is the window as the API names it (1h, 24h, 7d; another
	// as time.Duration writes it).
	WindowName string `json:"window"`
	// From is the start of the oldest hour read; To is when it was read.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Series holds one entry per workflow and step with data, by workflow
	// then step name.
	Series []LatencySeries `json:"series"`
}

// LatencySeries is one workflow's step's latencies.
type LatencySeries struct {
	Workflow string `json:"workflow"`
	Step     string `json:"step"`
	// Duration is the run time of the step's attempts whose body ran.
	Duration LatencyStats `json:"duration"`
	// Wait is the time from an attempt's due time to its begin, for the
	// attempts whose due time the task carried (first steps, steps after
	// a step that completed on a worker, retries).
	Wait LatencyStats `json:"wait"`
}

// LatencyStats is the count and percentiles of a latency. A percentile is
// the upper bound of the bucket that holds it (buckets are 19% wide: the
// true value is at most that much below); zero when Count is.
type LatencyStats struct {
	Count int64         `json:"count"`
	P50   time.Duration `json:"-"`
	P90   time.Duration `json:"-"`
	P99   time.Duration `json:"-"`
}

// latencyStatsJSON is LatencyStats on the wire: milliseconds.
type latencyStatsJSON struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// MarshalJSON writes the stats with their percentiles in milliseconds
// (p50_ms, p90_ms, p99_ms).
func (s LatencyStats) MarshalJSON() ([]byte, error) {
	return json.Marshal(latencyStatsJSON{Count: s.Count, P50: ms(s.P50), P90: ms(s.P90), P99: ms(s.P99)})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (s *LatencyStats) UnmarshalJSON(b []byte) error {
	var j latencyStatsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	fromMS := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	*s = LatencyStats{Count: j.Count, P50: fromMS(j.P50), P90: fromMS(j.P90), P99: fromMS(j.P99)}
	return nil
}
