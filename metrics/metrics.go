package metrics

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/workflow"
)

// RunCounter counts runs by status, with "needs_attention" for the runs an
// operator must look at; *workflow.Client is one.
type RunCounter interface {
	Counts(ctx context.Context) (map[string]int64, error)
}

// BreakerReader reads the queue's circuit breakers; *workflow.Client is
// one.
type BreakerReader interface {
	Breakers(ctx context.Context) ([]workflow.BreakerState, error)
}

// OutboxReader reads the size of a client's outbox; a *workflow.Client
// opened with an outbox (workflow.ClientConfig.Outbox) is one.
type OutboxReader interface {
	OutboxStats() (workflow.OutboxStats, error)
}

// Config configures the collectors that read Redis at scrape time. A zero
// field takes the default given in its comment.
type Config struct {
	// Redis and Queue: the runs gauges read the queue's workflow state, and
	// the asynq metrics its asynq queue. Nil Redis: only the counters and
	// histograms of the Observer (unless Runs or Inspector are set).
	Redis redis.UniversalClient
	// Queue is the workers' queue. Default workflow.DefaultQueue.
	Queue string
	// Runs overrides the source of the runs gauges. Default: a
	// workflow.Client of Queue on Redis.
	Runs RunCounter
	// Inspector overrides the source of the asynq metrics. Default: an
	// asynq.Inspector on Redis.
	Inspector *asynq.Inspector
	// Queues are the asynq queues to report. Default: Queue.
	Queues []string
	// Breakers overrides the source of the circuit breaker metrics.
	// Default: Runs, when it is a BreakerReader (a *workflow.Client is).
	Breakers BreakerReader
	// Timeout bounds the Redis reads of one scrape. Default 2s.
	Timeout time.Duration
	// Outbox, when set, is the client whose outbox the cairn_outbox_*
	// metrics describe (read from its local file at scrape time, without
	// Redis).
	Outbox OutboxReader
}

// Metrics holds Cairn's collectors. It implements workflow.Observer; its
// methods are safe for concurrent use and do not allocate.
type Metrics struct {
	gatherer prometheus.Gatherer

	runsStarted   *prometheus.CounterVec
	runsFinished  *prometheus.CounterVec
	attempts      *prometheus.CounterVec
	retries       *prometheus.CounterVec
	retryDelay    *prometheus.HistogramVec
	stepDuration  *prometheus.HistogramVec
	repairs       *prometheus.CounterVec
	collectErrors *prometheus.CounterVec
}

var _ workflow.Observer = (*Metrics)(nil)

// New creates Cairn's collectors and registers them with reg (which is also
// what Handler serves when it is a prometheus.Gatherer, like a
// *prometheus.Registry; otherwise Handler serves prometheus.DefaultGatherer).
func New(reg prometheus.Registerer, cfg Config) (*Metrics, error) {
	if cfg.Queue == "" {
		cfg.Queue = workflow.DefaultQueue
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if len(cfg.Queues) == 0 {
		cfg.Queues = []string{cfg.Queue}
	}
	if cfg.Redis != nil {
		if cfg.Runs == nil {
			cfg.Runs = workflow.NewClient(cfg.Redis, workflow.ClientConfig{Queue: cfg.Queue})
		}
		if cfg.Inspector == nil {
			cfg.Inspector = asynq.NewInspectorFromRedisClient(cfg.Redis)
		}
	}
	if br, ok := cfg.Runs.(BreakerReader); ok && cfg.Breakers == nil {
		cfg.Breakers = br
	}
	m := &Metrics{
		gatherer: prometheus.DefaultGatherer,
		runsStarted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_runs_started_total", Help: "Runs whose first attempt began.",
		}, []string{"workflow"}),
		runsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_runs_finished_total",
			Help: "Runs that ended, by status (succeeded, failed, cancelled, compensated) and failure code " +
				"(of a compensated run: the failure that started its compensations; compensation_failed: " +
				"a compensation failed for good).",
		}, []string{"workflow", "status", "code"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_step_attempts_total",
			Help: "Step attempt deliveries by outcome: succeeded, failed_transient, failed_permanent, exhausted, " +
				"crashed, ignored (stale or duplicate delivery), discarded (result of an attempt that lost its step), " +
				"interrupted (handed back by a worker that could not renew its fence), deferred (its circuit breaker was open), " +
				"snoozed (Snooze: runs again later), " +
				"goto (Goto: continues at a step). A compensation's attempts count under step compensate:<step>.",
		}, []string{"workflow", "step", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_retries_scheduled_total",
			Help: "Retries scheduled after a transient failure (a compensation's under step compensate:<step>).",
		}, []string{"workflow", "step"}),
		retryDelay: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cairn_retry_delay_seconds",
			Help:    "Delay of the scheduled retries.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600},
		}, []string{"workflow"}),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cairn_step_duration_seconds",
			Help:    "Run time of step bodies (attempts that ran; a compensation's under step compensate:<step>).",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900},
		}, []string{"workflow", "step"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_reconciler_repairs_total", Help: "Reconciler repairs by kind.",
		}, []string{"kind"}),
		collectErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_metrics_collect_errors_total",
			Help: "Scrape-time reads of Redis that failed or timed out (their metrics were left out), by source.",
		}, []string{"source"}),
	}
	if g, ok := reg.(prometheus.Gatherer); ok {
		m.gatherer = g
	}
	cs := []prometheus.Collector{m.runsStarted, m.runsFinished, m.attempts, m.retries, m.retryDelay,
		m.stepDuration, m.repairs, m.collectErrors}
	if cfg.Runs != nil || cfg.Inspector != nil {
		cs = append(cs, &stateCollector{cfg: cfg, errors: m.collectErrors})
	}
	if cfg.Outbox != nil {
		cs = append(cs, &outboxCollector{src: cfg.Outbox, errors: m.collectErrors})
	}
	cs = append(cs, &livenessCollector{queue: cfg.Queue, queues: cfg.Queues, rdb: cfg.Redis, timeout: cfg.Timeout,
		errors: m.collectErrors})
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// NewRegistry returns a registry with the Go runtime and process collectors,
// for New.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// RunStarted implements workflow.Observer.
func (m *Metrics) RunStarted(_ context.Context, _, wf string) {
	m.runsStarted.WithLabelValues(wf).Inc()
}

// RunFinished implements workflow.Observer.
func (m *Metrics) RunFinished(_ context.Context, _, wf string, status workflow.RunStatus, code string) {
	if wf == "" {
		wf = "unknown"
	}
	m.runsFinished.WithLabelValues(wf, string(status), code).Inc()
}

// StepAttempt implements workflow.Observer. The duration of an attempt whose
// body ran goes into cairn_step_duration_seconds.
func (m *Metrics) StepAttempt(_ context.Context, _, wf, step string, outcome workflow.AttemptOutcome, d time.Duration) {
	m.attempts.WithLabelValues(wf, step, string(outcome)).Inc()
	switch outcome {
	case workflow.OutcomeSucceeded, workflow.OutcomeFailedTransient, workflow.OutcomeFailedPermanent,
		workflow.OutcomeExhausted, workflow.OutcomeDiscarded, workflow.OutcomeSnoozed, workflow.OutcomeGoto:
		m.stepDuration.WithLabelValues(wf, step).Observe(d.Seconds())
	case workflow.OutcomeCrashed, workflow.OutcomeIgnored, workflow.OutcomeInterrupted, workflow.OutcomeDeferred:
		// No duration: the body did not run, or did not run to its end.
	}
}

// RetryScheduled implements workflow.Observer.
func (m *Metrics) RetryScheduled(_ context.Context, _, wf, step string, delay time.Duration) {
	m.retries.WithLabelValues(wf, step).Inc()
	m.retryDelay.WithLabelValues(wf).Observe(delay.Seconds())
}

// Repair implements workflow.Observer.
func (m *Metrics) Repair(kind string) { m.repairs.WithLabelValues(kind).Inc() }

// stateCollector reads run counts and asynq queue state at scrape time.
type stateCollector struct {
	cfg    Config
	errors *prometheus.CounterVec
	// busy: a read of an earlier scrape has not returned yet (Redis is
	// slow); this scrape leaves the gauges out rather than pile up reads.
	busy atomic.Bool
}

var (
	descRuns = prometheus.NewDesc("cairn_runs",
		"Runs retained in Redis, by status: "+strings.Join(statusNames(), ", ")+".", []string{"status"}, nil)
	descWaiting = prometheus.NewDesc("cairn_runs_waiting",
		"Runs waiting without a worker slot, by what they wait for: ordering_key, workflow_limit, signal, timer.",
		[]string{"reason"}, nil)
	descBreakerState = prometheus.NewDesc("cairn_breaker_state",
		"State of each circuit breaker: 0 closed, 1 open, 2 half-open (a probe is out).", []string{"breaker"}, nil)
	descBreakerOpened = prometheus.NewDesc("cairn_breaker_openings_total",
		"Times each circuit breaker opened.", []string{"breaker"}, nil)
	descBreakerDeferred = prometheus.NewDesc("cairn_breaker_deferrals_total",
		"Step attempts each circuit breaker deferred.", []string{"breaker"}, nil)
	descAttention = prometheus.NewDesc("cairn_runs_needing_attention",
		"Runs that need an operator (failed, or repaired automatically too often).", nil, nil)
	descEnqueued = prometheus.NewDesc("asynq_tasks_enqueued_total",
		"Number of tasks enqueued; broken down by queue and state.", []string{"queue", "state"}, nil)
	descSize    = prometheus.NewDesc("asynq_queue_size", "Number of tasks in a queue.", []string{"queue"}, nil)
	descLatency = prometheus.NewDesc("asynq_queue_latency_seconds",
		"Number of seconds the oldest pending task is waiting in pending state to be processed.", []string{"queue"}, nil)
	descMemory = prometheus.NewDesc("asynq_queue_memory_usage_approx_bytes",
		"Number of memory used by a given queue (approximated number by sampling).", []string{"queue"}, nil)
	descProcessed = prometheus.NewDesc("asynq_tasks_processed_total",
		"Number of processed tasks (both succeeded and failed); broken down by queue.", []string{"queue"}, nil)
	descFailed = prometheus.NewDesc("asynq_tasks_failed_total",
		"Number of failed tasks; broken down by queue.", []string{"queue"}, nil)
	descPaused = prometheus.NewDesc("asynq_queue_paused_total",
		"Number of queues paused.", []string{"queue"}, nil)
)

var runStatuses = workflow.RunStatuses

// statusNames are the run statuses cairn_runs reports.
func statusNames() []string {
	out := make([]string, len(runStatuses))
	for i, s := range runStatuses {
		out[i] = string(s)
	}
	return out
}

var waitReasons = []workflow.WaitReason{workflow.WaitOrderingKey, workflow.WaitWorkflowLimit, workflow.WaitSignal,
	workflow.WaitTimer}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRuns, descWaiting, descBreakerState, descBreakerOpened, descBreakerDeferred,
		descAttention, descEnqueued, descSize, descLatency, descMemory,
		descProcessed, descFailed, descPaused} {
		ch <- d
	}
}

// snapshot is what one scrape read.
type snapshot struct {
	counts      map[string]int64
	countsErr   error
	breakers    []workflow.BreakerState
	breakersErr error
	queues      []*asynq.QueueInfo
	queuesErr   error
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.busy.CompareAndSwap(false, true) {
		c.errors.WithLabelValues("busy").Inc()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	done := make(chan snapshot, 1)
	go func() {
		defer c.busy.Store(false)
		done <- c.read(ctx)
	}()
	var s snapshot
	select {
	case s = <-done:
	case <-ctx.Done():
		// asynq's Inspector takes no context: its read goes on (bounded
		// by the Redis client's timeouts) and this scrape goes without.
		c.errors.WithLabelValues("timeout").Inc()
		return
	}
	if c.cfg.Runs != nil {
		if s.countsErr != nil {
			c.errors.WithLabelValues("runs").Inc()
		} else {
			for _, st := range runStatuses {
				ch <- prometheus.MustNewConstMetric(descRuns, prometheus.GaugeValue, float64(s.counts[string(st)]), string(st))
			}
			ch <- prometheus.MustNewConstMetric(descAttention, prometheus.GaugeValue, float64(s.counts["needs_attention"]))
			for _, r := range waitReasons {
				ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(s.counts["waiting:"+string(r)]),
					string(r))
			}
		}
	}
	if s.breakersErr != nil {
		c.errors.WithLabelValues("breakers").Inc()
	}
	for _, b := range s.breakers {
		state := 0.0
		switch b.State {
		case "open":
			state = 1
		case "half_open":
			state = 2
		}
		ch <- prometheus.MustNewConstMetric(descBreakerState, prometheus.GaugeValue, state, b.Name)
		ch <- prometheus.MustNewConstMetric(descBreakerOpened, prometheus.CounterValue, float64(b.Opened), b.Name)
		ch <- prometheus.MustNewConstMetric(descBreakerDeferred, prometheus.CounterValue, float64(b.Deferred), b.Name)
	}
	if s.queuesErr != nil {
		c.errors.WithLabelValues("asynq").Inc()
	}
	for _, q := range s.queues {
		gauge := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{q.Queue}, labels...)...)
		}
		gauge(descEnqueued, float64(q.Pending), "pending")
		gauge(descEnqueued, float64(q.Active), "active")
		gauge(descEnqueued, float64(q.Scheduled), "scheduled")
		gauge(descEnqueued, float64(q.Retry), "retry")
		gauge(descEnqueued, float64(q.Archived), "archived")
		gauge(descEnqueued, float64(q.Completed), "completed")
		gauge(descSize, float64(q.Size))
		gauge(descLatency, q.Latency.Seconds())
		gauge(descMemory, float64(q.MemoryUsage))
		paused := 0.0
		if q.Paused {
			paused = 1
		}
		gauge(descPaused, paused)
		ch <- prometheus.MustNewConstMetric(descProcessed, prometheus.CounterValue, float64(q.ProcessedTotal), q.Queue)
		ch <- prometheus.MustNewConstMetric(descFailed, prometheus.CounterValue, float64(q.FailedTotal), q.Queue)
	}
}

func (c *stateCollector) read(ctx context.Context) snapshot {
	var s snapshot
	if c.cfg.Runs != nil {
		s.counts, s.countsErr = c.cfg.Runs.Counts(ctx)
	}
	if c.cfg.Breakers != nil {
		s.breakers, s.breakersErr = c.cfg.Breakers.Breakers(ctx)
	}
	if c.cfg.Inspector == nil {
		return s
	}
	known, err := c.cfg.Inspector.Queues()
	if err != nil {
		s.queuesErr = err
		return s
	}
	for _, q := range c.cfg.Queues {
		if ctx.Err() != nil {
			s.queuesErr = ctx.Err()
			break
		}
		if !slices.Contains(known, q) {
			continue // no task was ever enqueued there
		}
		info, err := c.cfg.Inspector.GetQueueInfo(q)
		if err != nil {
			s.queuesErr = err
			continue
		}
		s.queues = append(s.queues, info)
	}
	return s
}
