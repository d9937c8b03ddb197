package config

import (
	"time"

	"github.com/cairnhq/cairn/workflow/redisurl"
)

// RedisTarget is the Redis deployment the binaries talk to
// (redisurl.Target: one server, a Sentinel-managed master or a Cluster).
// Build it with [ParseRedisURL] or [Config.Redis].
type RedisTarget = redisurl.Target

// RedisTopology is the kind of Redis deployment CAIRN_REDIS_URL names.
type RedisTopology = redisurl.Topology

// The topologies, by URL scheme (TopologySingle is also the embedded
// store's).
const (
	TopologySingle   = redisurl.TopologySingle
	TopologySentinel = redisurl.TopologySentinel
	TopologyCluster  = redisurl.TopologyCluster
)

// Timeouts are connection settings a program may default
// (RedisTarget.DefaultTimeouts).
type Timeouts = redisurl.Timeouts

// ReplicaWait is the wait for replicas of CAIRN_REDIS_MIN_REPLICAS.
type ReplicaWait = redisurl.ReplicaWait

// WaitForReplicas installs the wait for replicas of
// CAIRN_REDIS_MIN_REPLICAS on rdb (redisurl.WaitForReplicas).
var WaitForReplicas = redisurl.WaitForReplicas

// Redis returns the Redis deployment in force: the one CAIRN_REDIS_URL
// names, or the embedded store when it is unset (see EffectiveRedisURL).
// Its error is a *Error naming CAIRN_REDIS_URL (Load has checked it
// already).
func (c Config) Redis() (*RedisTarget, error) {
	return ParseRedisURL(c.EffectiveRedisURL())
}

// ParseRedisURL parses CAIRN_REDIS_URL with redisurl.Parse, which
// documents the forms (and docs/redis.md). The error is a *Error naming
// CAIRN_REDIS_URL; neither it nor anything else ParseRedisURL says
// contains the URL's password.
func ParseRedisURL(raw string) (*RedisTarget, error) {
	t, err := redisurl.Parse(raw)
	if err != nil {
		return nil, &Error{Var: "CAIRN_REDIS_URL", Msg: err.Error()}
	}
	return t, nil
}

// validateRedis checks CAIRN_REDIS_URL and CAIRN_REDIS_MIN_REPLICAS(_TIMEOUT).
func (c Config) validateRedis(bad func(v, format string, args ...any)) {
	var target *RedisTarget
	if c.RedisURL != "" {
		t, err := redisurl.Parse(c.RedisURL)
		if err != nil {
			bad("CAIRN_REDIS_URL", "%v", err)
		}
		target = t
	}
	switch {
	case c.RedisMinReplicas < 0 || c.RedisMinReplicas > 100:
		bad("CAIRN_REDIS_MIN_REPLICAS", "%d: want 0 (do not wait) to 100", c.RedisMinReplicas)
	case c.RedisMinReplicas > 0 && c.RedisURL == "":
		bad("CAIRN_REDIS_MIN_REPLICAS", "%d, but CAIRN_REDIS_URL is unset: the embedded store has no replicas", c.RedisMinReplicas)
	}
	switch {
	case c.RedisMinReplicasTimeout < time.Millisecond:
		bad("CAIRN_REDIS_MIN_REPLICAS_TIMEOUT", "%s: want at least 1ms", c.RedisMinReplicasTimeout)
	case target != nil && target.ReadTimeout() > 0 && c.RedisMinReplicasTimeout >= target.ReadTimeout():
		bad("CAIRN_REDIS_MIN_REPLICAS_TIMEOUT", "%s: want less than the Redis read timeout (%s; read_timeout in CAIRN_REDIS_URL), or a reply that waits for replicas times out and is sent again",
			c.RedisMinReplicasTimeout, target.ReadTimeout())
	}
}
