package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

var (
	descOutboxEntries = prometheus.NewDesc("cairn_outbox_entries",
		"Starts and signals queued in the client's outbox while Redis was unreachable, not yet sent.", nil, nil)
	descOutboxBytes = prometheus.NewDesc("cairn_outbox_bytes",
		"Size of the entries queued in the client's outbox.", nil, nil)
	descOutboxCapacity = prometheus.NewDesc("cairn_outbox_capacity_entries",
		"The most entries the client's outbox holds (a start or signal past it fails with ErrOutboxFull).", nil, nil)
	descOutboxOldest = prometheus.NewDesc("cairn_outbox_oldest_age_seconds",
		"Age of the oldest entry queued in the client's outbox (0 when it is empty).", nil, nil)
	descOutboxDead = prometheus.NewDesc("cairn_outbox_dead_letters",
		"Outbox entries Redis refused when they were sent, kept as dead letters.", nil, nil)
	descOutboxFlushed = prometheus.NewDesc("cairn_outbox_flushed_total",
		"Outbox entries applied by this client since it opened its outbox.", nil, nil)
	descOutboxDeadLettered = prometheus.NewDesc("cairn_outbox_dead_lettered_total",
		"Outbox entries this client moved to the dead letters since it opened its outbox.", nil, nil)
)

// outboxCollector reports a client's outbox at scrape time: a read of a
// local file, no Redis.
type outboxCollector struct {
	src    OutboxReader
	errors *prometheus.CounterVec
}

func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descOutboxEntries, descOutboxBytes, descOutboxCapacity, descOutboxOldest,
		descOutboxDead, descOutboxFlushed, descOutboxDeadLettered} {
		ch <- d
	}
}

func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := c.src.OutboxStats()
	if err != nil {
		c.errors.WithLabelValues("outbox").Inc()
		return
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	gauge(descOutboxEntries, float64(st.Entries))
	gauge(descOutboxBytes, float64(st.Bytes))
	gauge(descOutboxCapacity, float64(st.MaxEntries))
	gauge(descOutboxDead, float64(st.DeadLetters))
	gauge(descOutboxOldest, max(st.OldestAge.Seconds(), 0))
	ch <- prometheus.MustNewConstMetric(descOutboxFlushed, prometheus.CounterValue, float64(st.Flushed))
	ch <- prometheus.MustNewConstMetric(descOutboxDeadLettered, prometheus.CounterValue, float64(st.DeadLettered))
}
