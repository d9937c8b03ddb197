package redistest_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/tasks"
)

// TestCluster: a cluster of three masters with a replica each comes up,
// KeySlot agrees with CLUSTER KEYSLOT, the queues of
// QueuesOnDistinctMasters land on the three masters, and a master killed
// with SIGKILL (appendonly, fsync always) is flagged failed by the others
// and replaced by its replica; restarted on its port, it comes back as a
// replica, and its data is served.
func TestCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.StartCluster(t, &redistest.ClusterOptions{Replicas: 1, AppendOnly: true, AppendFsync: "always"})
	if len(c.Masters) != 3 || len(c.Replicas) != 3 {
		t.Fatalf("%d masters, %d replicas", len(c.Masters), len(c.Replicas))
	}
	if want := "redis-cluster://" + strings.Join(c.Addrs(), ","); c.URL() != want {
		t.Errorf("URL() = %q, want %q", c.URL(), want)
	}
	cc := c.Client(t)
	for _, key := range []string{"a", "foo", "{user1000}.following", "x{}y", "{}{a}", "cairn:{workflows}:run:1", "naïve"} {
		want, err := cc.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := redistest.KeySlot(key); int64(got) != want {
			t.Errorf("KeySlot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
		}
	}
	queues := c.QueuesOnDistinctMasters("q")
	for i, q := range queues {
		key := tasks.QueueKeys(q).Pending()
		if err := cc.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if got := c.MasterFor(key); got != c.Masters[i] {
			t.Errorf("queue %s: MasterFor says %s, want master %d", q, got.Addr(), i)
		}
		n, err := c.Masters[i].Client(t).Exists(ctx, key).Result()
		if err != nil || n != 1 {
			t.Errorf("queue %s: %s is not on master %d (%s): %d, %v", q, key, i, c.Masters[i].Addr(), n, err)
		}
	}

	victim := c.Masters[1]
	victim.Kill(t)
	c.WaitPromoted(t, c.Replicas[1])
	c.WaitNodeFailed(t, victim)
	victim.Restart(t)
	c.WaitHealthy(t)
	key := tasks.QueueKeys(queues[1]).Pending()
	if got, err := cc.Get(ctx, key).Result(); err != nil || got != "1" {
		t.Errorf("after the master's restart %s = %q, %v; want 1", key, got, err)
	}
	// Its replica took over its slots meanwhile; it came back as a
	// replica of its former replica.
	if got := role(t, victim); got != "slave" {
		t.Errorf("the restarted master is a %q; want a replica of the one promoted", got)
	}
	if got := role(t, c.Replicas[1]); got != "master" {
		t.Errorf("the killed master's replica is a %q; want promoted", got)
	}
}

// role returns the role INFO replication gives s: master or slave.
func role(t *testing.T, s *redistest.Server) string {
	t.Helper()
	for line := range strings.SplitSeq(s.Client(t).Info(context.Background(), "replication").Val(), "\r\n") {
		if v, ok := strings.CutPrefix(line, "role:"); ok {
			return v
		}
	}
	return ""
}

// TestSentinel: a master, a replica and three sentinels come up; the
// master is killed with SIGKILL; the sentinels promote the replica, and a
// Sentinel-backed client writes to it.
func TestSentinel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := redistest.StartSentinel(t, nil)
	if want := fmt.Sprintf("redis-sentinel://%s/0?master=mymaster", strings.Join(d.SentinelAddrs(), ",")); d.URL() != want {
		t.Errorf("URL() = %q, want %q", d.URL(), want)
	}
	rdb := d.Client(t)
	if err := rdb.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Wait(ctx, 1, time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}
	if addr, why := d.MasterAddr(ctx); addr != d.Master.Addr() {
		t.Fatalf("the sentinels name %q (%s), want %s", addr, why, d.Master.Addr())
	}
	d.Master.Kill(t)
	d.WaitMaster(t, d.Replicas[0])
	deadline := time.Now().Add(20 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = rdb.Set(ctx, "after", "1", 0).Err(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("the failover client cannot write after the failover: %v", err)
	}
	got, err := d.Replicas[0].Client(t).MGet(ctx, "before", "after").Result()
	if err != nil || !slices.Equal(got, []any{"1", "1"}) {
		t.Errorf("on the promoted replica: %v, %v", got, err)
	}
}

// TestClusterNodeChecksScriptKeys: a cluster node that serves the slot of
// one hash tag runs a script that touches undeclared keys of that slot
// (Cairn's scripts derive keys from KEYS[1] and the queue's hash tag), and
// refuses one that touches a key of another slot: so a script test that
// passes on StartClusterNode(t, nil, key) keeps to the slot of key.
func TestClusterNodeChecksScriptKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.StartClusterNode(t, nil, "{q}").Client(t)
	const script = `redis.call("SET", KEYS[1], "1"); return redis.call("INCR", ARGV[1])`
	if n, err := rdb.Eval(ctx, script, []string{"cairn:{q}:run:1"}, "asynq:{q}:undeclared").Int(); err != nil || n != 1 {
		t.Errorf("an undeclared key of the same slot: %d, %v; want 1", n, err)
	}
	err := rdb.Eval(ctx, script, []string{"cairn:{q}:run:1"}, "cairn:{other}:undeclared").Err()
	if err == nil || !strings.Contains(err.Error(), "non local key") {
		t.Errorf("an undeclared key of another slot: %v; want a non-local-key error", err)
	}
	if err := rdb.Set(ctx, "cairn:{other}:plain", 1, 0).Err(); err == nil || !strings.Contains(err.Error(), "CLUSTERDOWN") {
		t.Errorf("a key of a slot no node serves: %v; want CLUSTERDOWN", err)
	}
	all := redistest.StartClusterNode(t, nil).Client(t)
	if err := all.Set(ctx, "cairn:{other}:plain", 1, 0).Err(); err != nil {
		t.Errorf("a node of every slot: %v", err)
	}
}
