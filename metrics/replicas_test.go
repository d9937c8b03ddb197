package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cairnhq/cairn/metrics"
)

type fakeWaits struct{ waits, shortfalls int64 }

func (f *fakeWaits) Waits() int64      { return f.waits }
func (f *fakeWaits) Shortfalls() int64 { return f.shortfalls }

// TestReplicaWaitCollectors: the worker's two counters, read at scrape
// time.
func TestReplicaWaitCollectors(t *testing.T) {
	t.Parallel()
	rw := &fakeWaits{}
	reg := metrics.NewRegistry()
	reg.MustRegister(metrics.ReplicaWaitCollectors(rw)...)
	rw.waits, rw.shortfalls = 7, 2
	want := `
# HELP cairn_redis_replica_wait_shortfalls_total Workflow-state writes that fewer replicas than CAIRN_REDIS_MIN_REPLICAS confirmed within CAIRN_REDIS_MIN_REPLICAS_TIMEOUT.
# TYPE cairn_redis_replica_wait_shortfalls_total counter
cairn_redis_replica_wait_shortfalls_total 2
# HELP cairn_redis_replica_waits_total Workflow-state writes that waited for replicas (CAIRN_REDIS_MIN_REPLICAS).
# TYPE cairn_redis_replica_waits_total counter
cairn_redis_replica_waits_total 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"cairn_redis_replica_waits_total", "cairn_redis_replica_wait_shortfalls_total"); err != nil {
		t.Error(err)
	}
}
