package metrics

import "github.com/prometheus/client_golang/prometheus"

// ReplicaWaits is what a wait for replicas counts (a
// *redisurl.ReplicaWait of package workflow/redisurl, the worker's
// CAIRN_REDIS_MIN_REPLICAS).
type ReplicaWaits interface {
	// Waits is how many workflow-state writes waited for replicas.
	Waits() int64
	// Shortfalls is how many of them fewer replicas confirmed in time.
	Shortfalls() int64
}

// ReplicaWaitCollectors returns the worker's counters of rw,
// cairn_redis_replica_waits_total and
// cairn_redis_replica_wait_shortfalls_total, to register on the registry
// of New.
func ReplicaWaitCollectors(rw ReplicaWaits) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cairn_redis_replica_waits_total",
			Help: "Workflow-state writes that waited for replicas (CAIRN_REDIS_MIN_REPLICAS)."},
			func() float64 { return float64(rw.Waits()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cairn_redis_replica_wait_shortfalls_total",
			Help: "Workflow-state writes that fewer replicas than CAIRN_REDIS_MIN_REPLICAS confirmed within CAIRN_REDIS_MIN_REPLICAS_TIMEOUT."},
			func() float64 { return float64(rw.Shortfalls()) }),
	}
}
