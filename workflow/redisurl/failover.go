package redisurl

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/redis/go-redis/v9"
)

// followFailovers makes cc reload its slot map as soon as a node does not
// answer, so that its commands follow a Redis Cluster failover within a
// moment of the replica's promotion.
//
// go-redis reloads the map lazily: on a MOVED or ASK reply, on a READONLY
// error, and when a command finds it older than ClusterStateReloadInterval
// (60s by default). A master killed outright sends none of those: it
// refuses connections (or times out), and the cluster client retries the
// master its stale map names, then routes to it again, until that minute
// is up. Every client of a worker (asynq's processor, forwarder,
// heartbeater and recoverer, Cairn's scripts and their retries, the
// reconciler, /readyz, metrics) went on dialling the dead master for up to
// a minute after its replica had taken over.
//
// The hook, on every node's client (installed through OnNewNode before the
// first command, so every node has it, masters and replicas, and commands
// sent straight to a node, like /readyz's, count too), asks for a reload
// (ReloadState) after each command or pipeline that failed because the
// node did not answer (nodeUnreachable). go-redis runs one reload at a
// time, each asking one node for CLUSTER SLOTS (the next node when one
// does not answer), and at most one more, 200ms after it, for all the
// requests made meanwhile. So while a master is down, its clients reload
// about every 200ms (plus a CLUSTER SLOTS): before the promotion the map
// still names the dead master, and the first reload after it names the
// promoted replica, and commands go there. The happy path is unchanged: no
// command is added, and a successful command, or a Redis error reply, asks
// for nothing.
func followFailovers(cc *redis.ClusterClient) {
	h := reloadHook{reload: func() { cc.ReloadState(context.Background()) }}
	cc.OnNewNode(func(node *redis.Client) { node.AddHook(h) })
}

// reloadHook calls reload after each command or pipeline of a node's
// client that failed with nodeUnreachable.
type reloadHook struct{ reload func() }

func (h reloadHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil && nodeUnreachable(err) {
			h.reload()
		}
		return err
	}
}

func (h reloadHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err != nil && nodeUnreachable(err) {
			h.reload()
		}
		return err
	}
}

// nodeUnreachable reports whether err says that a node did not answer: a
// network error (a refused or reset connection, a dial or read timeout,
// which includes a context deadline) or a connection closed under a
// command (EOF). Not a reply of the node (a Redis error, including
// redis.Nil, MOVED and CLUSTERDOWN, which go-redis handles itself), a
// cancelled context or a closed client.
func nodeUnreachable(err error) bool {
	if _, ok := errors.AsType[redis.Error](err); ok {
		return false
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
