// Package redisurl turns a Redis URL into the client Cairn's worker
// would make of it, so that a Go service that embeds Cairn reaches one
// server, a Sentinel-managed master or a Redis Cluster from the same
// CAIRN_REDIS_URL its operators already write for cmd/worker:
//
//	redis://:PASSWORD@10.0.0.1:6379/0                                   (rediss:// for TLS)
//	redis-sentinel://:PASSWORD@10.0.0.1:26379,10.0.0.2:26379/0?master=mymaster
//	redis-cluster://:PASSWORD@10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379
//
// [Parse] checks the URL as the worker does, with the same errors (one
// line, never the password). [Target.NewClient] makes the
// redis.UniversalClient for workflow.NewWorker, workflow.NewClient and
// the rest: RESP2, 3s read and write timeouts unless the URL sets them,
// and on a Cluster a client that reloads its slot map as soon as a node
// does not answer, so it follows a failover within half a second rather
// than a minute. [Target.AsynqConnOpt] is the same for asynqmon
// (dashboard.Config.Monitoring). [WaitForReplicas] is the worker's
// CAIRN_REDIS_MIN_REPLICAS: state writes that wait until replicas have
// them.
//
// cmd/worker and cmd/enqueue use this package themselves; docs/redis.md
// says what each topology needs and what a failover can lose, and
// docs/embedding.md shows a service's main built on it.
package redisurl
