package redisurl_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/workflow/redisurl"
)

// TestClusterClientFollowsFailover: a cluster client of NewClient serves a
// slot again soon after the slot's master is killed and its replica
// promoted, both through the cluster client (asynq's and Cairn's commands)
// and on the node MasterForKey names (/readyz), with no other traffic to
// make it reload. go-redis alone reloads its map on MOVED and once it is a
// minute old, so it kept sending both to the dead master for most of that
// minute.
//
// The ceiling: the failing commands ask for a reload at once; go-redis
// runs one at a time, 200ms apart, each a CLUSTER SLOTS that may first try
// the dead node (5 dials 100ms apart); and each attempt of the loop below
// waits 10ms. Under a second is expected; 10s allows for a loaded machine,
// and is well under the minute of go-redis's own reload.
func TestClusterClientFollowsFailover(t *testing.T) {
	t.Parallel()
	const ceiling = 10 * time.Second
	ctx := context.Background()
	c := redistest.StartCluster(t, &redistest.ClusterOptions{Replicas: 1})
	target, err := redisurl.Parse(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	const key = "cairn:{failover}:k"
	victim := c.MasterFor(key)
	heir := c.Replicas[indexOfServer(c.Masters, victim)]
	// Two clients, each with its slot map loaded: one sends commands through
	// the cluster client, the other only to the node MasterForKey names.
	newClient := func() *redis.ClusterClient {
		cc, ok := target.NewClient().(*redis.ClusterClient)
		if !ok {
			t.Fatalf("NewClient of %s is not a cluster client", c.URL())
		}
		t.Cleanup(func() { _ = cc.Close() })
		return cc
	}
	cmds, node := newClient(), newClient()
	if err := cmds.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	readyz := func() error {
		m, err := node.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		return m.Exists(ctx, key).Err()
	}
	if err := readyz(); err != nil {
		t.Fatal(err)
	}

	victim.Kill(t)
	promoted := c.WaitPromoted(t, heir)
	for name, try := range map[string]func() error{
		"a command through the cluster client": func() error { return cmds.Incr(ctx, "cairn:{failover}:n").Err() },
		"a command on the slot's master":       readyz,
	} {
		var err error
		for err = try(); err != nil && time.Since(promoted) < ceiling; err = try() {
			time.Sleep(10 * time.Millisecond) // between attempts, as a busy worker's would come
		}
		if err != nil {
			t.Errorf("%s still fails %s after the promotion: %v", name, ceiling, err)
			continue
		}
		t.Logf("%s succeeded %s after the promotion", name, time.Since(promoted).Round(time.Millisecond))
	}
	if m, err := node.MasterForKey(ctx, key); err != nil || m.Options().Addr != heir.Addr() {
		t.Errorf("MasterForKey: %v, %v; want the promoted replica %s", m, err, heir.Addr())
	}
}

func indexOfServer(servers []*redistest.Server, s *redistest.Server) int {
	for i, x := range servers {
		if x == s {
			return i
		}
	}
	return -1
}
