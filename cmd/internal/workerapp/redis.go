package workerapp

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/cmd/internal/config"
	"github.com/cairnhq/cairn/internal/embedded"
	"github.com/cairnhq/cairn/metrics"
	"github.com/cairnhq/cairn/workflow/redisurl"
)

// redisConn is the Redis the worker talks to.
type redisConn struct {
	// target is the deployment CAIRN_REDIS_URL names, for asynqmon and the
	// log (its String has no credentials).
	target *config.RedisTarget
	// rdb is the client of target.
	rdb redis.UniversalClient
	// reg is the metrics registry, which counts the waits for replicas.
	reg *prometheus.Registry
}

// connectRedis builds the client of the Redis deployment CAIRN_REDIS_URL
// names (one server, Sentinel or Cluster; the embedded store when unset),
// with the wait for replicas of CAIRN_REDIS_MIN_REPLICAS, and the metrics
// registry, which counts those waits: workflow/redisurl and
// metrics.ReplicaWaitCollectors, as a service that embeds Cairn does.
func connectRedis(cfg config.Config, log *slog.Logger) (redisConn, error) {
	target, err := cfg.Redis()
	if err != nil {
		return redisConn{}, err
	}
	rdb := target.NewClient()
	reg := metrics.NewRegistry()
	if rw := redisurl.WaitForReplicas(rdb, cfg.RedisMinReplicas, cfg.RedisMinReplicasTimeout, log.With("component", "redis")); rw != nil {
		reg.MustRegister(metrics.ReplicaWaitCollectors(rw)...)
		log.Info("state writes wait for replicas", "min_replicas", cfg.RedisMinReplicas, "timeout", cfg.RedisMinReplicasTimeout)
	}
	return redisConn{target: target, rdb: rdb, reg: reg}, nil
}

// openRedis is the worker's Redis: with CAIRN_REDIS_URL unset it first
// starts the embedded store (startEmbedded), then connects (connectRedis).
// closeRedis closes the client, then the store.
func openRedis(cfg config.Config, stderr io.Writer, log *slog.Logger) (conn redisConn, closeRedis func(), err error) {
	closeStore := func() {}
	if cfg.Embedded() {
		store, err := startEmbedded(cfg, stderr, log)
		if err != nil {
			return redisConn{}, nil, err
		}
		closeStore = store.Close
	}
	conn, err = connectRedis(cfg, log)
	if err != nil {
		closeStore()
		return redisConn{}, nil, err
	}
	return conn, func() { _ = conn.rdb.Close(); closeStore() }, nil
}

// startEmbedded starts the embedded, non-durable store on
// CAIRN_EMBEDDED_ADDR and says so, in a banner on stderr that tells how to
// reach it, and in the log.
func startEmbedded(cfg config.Config, stderr io.Writer, log *slog.Logger) (*embedded.Store, error) {
	store, err := embedded.Start(cfg.EmbeddedAddr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, `
  ***********************************************************************
  *  EMBEDDED STORE: CAIRN_REDIS_URL is unset, so workflow state lives  *
  *  in this process's memory. It is NOT durable: it is lost when the   *
  *  worker stops. Set CAIRN_REDIS_URL to a Redis server for real use.  *
  ***********************************************************************
  The CLI finds this store by default; from another shell:
    export CAIRN_REDIS_URL=%s
    go run ./cmd/enqueue start demo --wait

`, store.URL())
	log.Warn("using the embedded store: state is not durable", "redis_url", store.URL())
	return store, nil
}

// newLogger is the log on stderr that CAIRN_LOG_FORMAT and CAIRN_LOG_LEVEL
// ask for; go-redis's own messages go to it too (redis.SetLogger is
// process-wide: the last Main to start wins).
func newLogger(cfg config.Config, stderr io.Writer) *slog.Logger {
	log := cfg.Logger(stderr)
	redis.SetLogger(redisLogger{log.With("component", "go-redis")})
	return log
}

// redisLogger routes go-redis's own messages (connection pool errors) to
// the structured log.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.WarnContext(ctx, fmt.Sprintf(format, v...))
}
