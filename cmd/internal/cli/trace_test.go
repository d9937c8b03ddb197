package cli_test

import (
	"context"
	"strings"
	"testing"
)

// TestStartJoinsTraceparent: `enqueue start` with TRACEPARENT (and
// TRACESTATE) in its environment, OpenTelemetry's carriers for a caller's
// trace, stores that trace context with the run, so the workers' attempt
// spans join it; with none, or an invalid one, the run has no trace.
func TestStartJoinsTraceparent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, c := range []struct {
		environ []string
		want    string
	}{
		{[]string{"TRACEPARENT=" + tp, "TRACESTATE=vendor=x"}, tp + "\nvendor=x"},
		{[]string{"TRACEPARENT=" + tp}, tp},
		{nil, ""},
		{[]string{"TRACEPARENT=00-zz-not-a-traceparent-01"}, ""},
	} {
		r := e.invoke(invocation{args: []string{"start", "demo"}, environ: e.environ(c.environ...)})
		mustSucceed(t, r)
		id := runID(t, r)
		got, err := e.rdb.HGet(context.Background(), "cairn:{"+e.queue+"}:run:"+id, "trace").Result()
		if c.want == "" {
			if err == nil {
				t.Errorf("%v: the run has trace %q, want none", c.environ, got)
			}
		} else if got != c.want {
			t.Errorf("%v: the run's trace %q (%v), want %q", c.environ, strings.ReplaceAll(got, "\n", `\n`), err, c.want)
		}
	}
}
