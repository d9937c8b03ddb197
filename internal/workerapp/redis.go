package workerapp

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/config"
	"github.com/cairnhq/cairn/metrics"
)

// connectRedis builds the client of the Redis deployment CAIRN_REDIS_URL
// names (one server, Sentinel or Cluster; the embedded store when unset),
// with the wait for replicas of CAIRN_REDIS_MIN_REPLICAS, and the metrics
// registry, which counts those waits.
func connectRedis(cfg config.Config, log *slog.Logger) (*config.RedisTarget, redis.UniversalClient, *prometheus.Registry, error) {
	target, err := cfg.Redis()
	if err != nil {
		return nil, nil, nil, err
	}
	rdb := target.NewClient()
	reg := metrics.NewRegistry()
	if rw := config.WaitForReplicas(rdb, cfg.RedisMinReplicas, cfg.RedisMinReplicasTimeout, log.With("component", "redis")); rw != nil {
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cairn_redis_replica_waits_total",
				Help: "Workflow-state writes that waited for replicas (CAIRN_REDIS_MIN_REPLICAS)."},
				func() float64 { return float64(rw.Waits()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cairn_redis_replica_wait_shortfalls_total",
				Help: "Workflow-state writes that fewer replicas than CAIRN_REDIS_MIN_REPLICAS confirmed within CAIRN_REDIS_MIN_REPLICAS_TIMEOUT."},
				func() float64 { return float64(rw.Shortfalls()) }),
		)
		log.Info("state writes wait for replicas", "min_replicas", cfg.RedisMinReplicas, "timeout", cfg.RedisMinReplicasTimeout)
	}
	return target, rdb, reg, nil
}
