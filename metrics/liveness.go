package metrics

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

var (
	descInfo = prometheus.NewDesc("cairn_info",
		"Always 1. Its queue label is the queue this process's cairn_* metrics describe (Config.Queue): "+
			"join on it to break them down by queue, e.g. "+
			"cairn_runs_needing_attention * on (job, instance) group_left (queue) cairn_info.",
		[]string{"queue"}, nil)
	descWorkers = prometheus.NewDesc("cairn_workers",
		"Workers alive on the queue: those of its workers on Cairn's own dequeue (CAIRN_DEQUEUE=cairn, the default) "+
			"whose once-a-second heartbeat has not expired, read from Redis at scrape time.",
		[]string{"queue"}, nil)
	descRedisUp = prometheus.NewDesc("cairn_redis_up",
		"1 when this process's scrape-time read of Redis (cairn_workers) answered within Config.Timeout, 0 when it "+
			"failed, timed out or an earlier read is still out.",
		nil, nil)
)

// livenessCollector reports cairn_info, and with Redis, at scrape time,
// cairn_workers and cairn_redis_up: one ZCOUNT of the queue's heartbeat set
// per queue (cairn:{q}:fetchers, which every worker on Cairn's own dequeue
// renews once a second anyway), in one pipeline, bounded by Config.Timeout.
// Nothing on a step's path.
type livenessCollector struct {
	queue   string
	queues  []string
	rdb     redis.UniversalClient // nil: cairn_info only
	timeout time.Duration
	errors  *prometheus.CounterVec
	// busy: an earlier scrape's read has not returned yet; this one
	// reports Redis down rather than pile up reads.
	busy atomic.Bool
}

func (c *livenessCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descInfo
	if c.rdb != nil {
		ch <- descWorkers
		ch <- descRedisUp
	}
}

func (c *livenessCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, 1, c.queue)
	if c.rdb == nil {
		return
	}
	workers, ok := c.readWorkers()
	if !ok {
		c.errors.WithLabelValues("workers").Inc()
		ch <- prometheus.MustNewConstMetric(descRedisUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descRedisUp, prometheus.GaugeValue, 1)
	for i, q := range c.queues {
		ch <- prometheus.MustNewConstMetric(descWorkers, prometheus.GaugeValue, float64(workers[i]), q)
	}
}

// readWorkers counts the live heartbeats of each queue; ok is false when
// Redis did not answer within the timeout, or an earlier read is still out.
func (c *livenessCollector) readWorkers() (counts []int64, ok bool) {
	if !c.busy.CompareAndSwap(false, true) {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	done := make(chan []int64, 1)
	go func() {
		defer c.busy.Store(false)
		done <- c.count(ctx)
	}()
	select {
	case counts = <-done:
		return counts, counts != nil
	case <-ctx.Done():
		// go-redis may outlive the context (its own read timeout): the
		// read goes on in the background, and busy stays set until then.
		return nil, false
	}
}

// count is one pipeline of a ZCOUNT per queue; nil on an error.
func (c *livenessCollector) count(ctx context.Context) []int64 {
	// The heartbeat set scores each worker with the expiry of its
	// heartbeat in Unix ms: alive are those past now (the workers' clock
	// is the system's too, workflow.EngineConfig.Clock's default).
	alive := "(" + strconv.FormatInt(workflow.SystemClock.Now().UnixMilli(), 10)
	cmds := make([]*redis.IntCmd, len(c.queues))
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range c.queues {
			cmds[i] = p.ZCount(ctx, tasks.QueueKeys(q).Fetchers(), alive, "+inf")
		}
		return nil
	})
	if err != nil {
		return nil
	}
	out := make([]int64, len(cmds))
	for i, cmd := range cmds {
		out[i] = cmd.Val()
	}
	return out
}
