package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

const (
	// topologyTimeout bounds each wait of the cluster and Sentinel helpers
	// (StartCluster, WaitHealthy, StartSentinel, WaitMaster, ...) for the
	// servers to agree.
	topologyTimeout = 30 * time.Second
	// defaultNodeTimeout is the cluster-node-timeout of StartCluster.
	defaultNodeTimeout = 2 * time.Second
	// adminTimeout bounds one administrative command to a node.
	adminTimeout = 2 * time.Second
)

// ClusterOptions configures a cluster started with [StartCluster]. The
// zero value (or nil) gives three masters without replicas or
// persistence.
type ClusterOptions struct {
	// Masters is the number of masters; default 3. Master i serves the
	// slots from i*Slots/Masters to (i+1)*Slots/Masters-1.
	Masters int
	// Replicas is the number of replicas of each master; default 0.
	Replicas int
	// AppendOnly and AppendFsync are every node's (see Options).
	AppendOnly  bool
	AppendFsync string
	// NodeTimeout is the cluster-node-timeout: how long a node may not
	// answer before the others count it as failing. Default 2s.
	NodeTimeout time.Duration
	// Args are extra redis-server arguments of every node.
	Args []string
}

// Cluster is a Redis Cluster of redis-server processes on loopback, each
// a [Server] the test may kill, stop, restart or freeze. A t.Cleanup kills
// them all.
type Cluster struct {
	// Masters are the masters as the cluster was made: Masters[i] serves
	// the slots of MasterSlots(i), until a failover promotes one of its
	// replicas.
	Masters []*Server
	// Replicas are the replicas: Replicas[i*r+j] is replica j of Masters[i]
	// (r replicas per master).
	Replicas []*Server
}

// StartCluster starts a Redis Cluster: the masters and replicas
// opts asks for, each a redis-server on a free loopback port with its
// cluster bus 10000 above it, joined with CLUSTER MEET, given their slots with
// CLUSTER ADDSLOTS and their masters with CLUSTER REPLICATE. It returns
// once every node says cluster_state:ok and sees every slot served. It
// fails the test (never skips) if redis-server cannot be found or the
// cluster does not come up within 30s.
func StartCluster(t testing.TB, opts *ClusterOptions) *Cluster {
	t.Helper()
	var o ClusterOptions
	if opts != nil {
		o = *opts
	}
	if o.Masters <= 0 {
		o.Masters = 3
	}
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = defaultNodeTimeout
	}
	nodeOpts := &Options{AppendOnly: o.AppendOnly, AppendFsync: o.AppendFsync, Cluster: true,
		Args: append([]string{"--cluster-node-timeout", strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10),
			"--repl-diskless-sync-delay", "0"}, o.Args...)}
	c := &Cluster{}
	// Start the processes in parallel: each waits for its server to answer.
	n := o.Masters * (1 + o.Replicas)
	servers := make([]*Server, n)
	errs := make([]error, n)
	bin, err := findServer()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range servers {
		servers[i] = newServer(bin, t.TempDir(), nodeOpts)
		srv := servers[i]
		t.Cleanup(func() {
			if err := srv.kill(); err != nil {
				t.Errorf("redistest: cleanup: %v", err)
			}
		})
		wg.Go(func() { errs[i] = srv.startFreePort() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	c.Masters, c.Replicas = servers[:o.Masters], servers[o.Masters:]

	ctx := context.Background()
	ids := make([]string, n)
	for i, s := range servers {
		id, err := s.admin(ctx, "cluster", "myid").Text()
		if err != nil {
			t.Fatalf("redistest: CLUSTER MYID on %s: %v", s.Addr(), err)
		}
		ids[i] = id
	}
	for i, m := range c.Masters {
		lo, hi := c.MasterSlots(i)
		if err := m.admin(ctx, addSlots(lo, hi)...).Err(); err != nil {
			t.Fatalf("redistest: CLUSTER ADDSLOTS %d-%d on %s: %v", lo, hi, m.Addr(), err)
		}
	}
	for _, s := range servers[1:] {
		if err := servers[0].admin(ctx, "cluster", "meet", "127.0.0.1", s.Port()).Err(); err != nil {
			t.Fatalf("redistest: CLUSTER MEET %s: %v", s.Addr(), err)
		}
	}
	for j, r := range c.Replicas {
		master := ids[j/max(o.Replicas, 1)]
		// A node can replicate a master only once it knows it.
		waitFor(t, fmt.Sprintf("%s to replicate %s", r.Addr(), master), func() (bool, string) {
			err := r.admin(ctx, "cluster", "replicate", master).Err()
			return err == nil, fmt.Sprint(err)
		})
	}
	c.WaitHealthy(t)
	return c
}

// addSlots is CLUSTER ADDSLOTS of the slots from lo to hi (ADDSLOTSRANGE
// is Redis 7's).
func addSlots(lo, hi int) []any {
	args := []any{"cluster", "addslots"}
	for slot := lo; slot <= hi; slot++ {
		args = append(args, slot)
	}
	return args
}

// MasterSlots returns the first and last slot master i was given.
func (c *Cluster) MasterSlots(i int) (lo, hi int) {
	n := len(c.Masters)
	return i * Slots / n, (i+1)*Slots/n - 1
}

// Nodes returns every node, masters first.
func (c *Cluster) Nodes() []*Server {
	return append(append([]*Server(nil), c.Masters...), c.Replicas...)
}

// Addrs returns the masters' addresses, "127.0.0.1:PORT".
func (c *Cluster) Addrs() []string {
	var out []string
	for _, m := range c.Masters {
		out = append(out, m.Addr())
	}
	return out
}

// URL returns the cluster's Cairn URL, redis-cluster://HOST:PORT,...
// listing the masters.
func (c *Cluster) URL() string { return "redis-cluster://" + strings.Join(c.Addrs(), ",") }

// Client returns a new cluster client of the cluster, closed by a
// t.Cleanup.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// MasterFor returns the master that was given the slot of key.
func (c *Cluster) MasterFor(key string) *Server {
	return c.Masters[KeySlot(key)*len(c.Masters)/Slots]
}

// QueuesOnDistinctMasters returns one queue name per master, prefix
// followed by a number: the i-th name's hash tag, and so every key of
// that queue (cairn:{q}:... and asynq:{q}:...), is in a slot of
// Masters[i].
func (c *Cluster) QueuesOnDistinctMasters(prefix string) []string {
	out := make([]string, len(c.Masters))
	found := 0
	for k := 0; found < len(out); k++ {
		q := prefix + strconv.Itoa(k)
		i := KeySlot("{"+q+"}") * len(c.Masters) / Slots
		if out[i] == "" {
			out[i] = q
			found++
		}
	}
	return out
}

// WaitHealthy waits until every running node says cluster_state:ok and
// counts all 16384 slots served (cluster_slots_ok), and every running
// replica is linked to its master; it fails the test after 30s.
func (c *Cluster) WaitHealthy(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, "the cluster to be healthy", func() (bool, string) {
		for _, s := range c.Nodes() {
			if !s.Running() {
				continue
			}
			info, err := s.admin(ctx, "cluster", "info").Text()
			if err != nil {
				return false, fmt.Sprintf("%s: %v", s.Addr(), err)
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
				return false, fmt.Sprintf("%s: %s", s.Addr(), oneLineInfo(info))
			}
			if repl, err := s.admin(ctx, "info", "replication").Text(); err != nil {
				return false, fmt.Sprintf("%s: %v", s.Addr(), err)
			} else if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
				return false, fmt.Sprintf("%s: replica not linked: %s", s.Addr(), oneLineInfo(repl))
			}
		}
		return true, ""
	})
}

// WaitNodeFailed waits until every other running master flags s as
// failed (CLUSTER NODES shows "fail" for it, not just "fail?"), as it
// does once a majority of masters has not heard from s for the node
// timeout; it fails the test after 30s.
func (c *Cluster) WaitNodeFailed(t testing.TB, s *Server) {
	t.Helper()
	ctx := context.Background()
	needle := " 127.0.0.1:" + strconv.Itoa(s.Port()) + "@"
	waitFor(t, s.Addr()+" to be flagged failed", func() (bool, string) {
		for _, m := range c.Masters {
			if m == s || !m.Running() {
				continue
			}
			nodes, err := m.admin(ctx, "cluster", "nodes").Text()
			if err != nil {
				return false, fmt.Sprintf("%s: %v", m.Addr(), err)
			}
			flagged := false
			for line := range strings.SplitSeq(nodes, "\n") {
				if !strings.Contains(line, needle) {
					continue
				}
				for flag := range strings.SplitSeq(strings.Fields(line)[2], ",") {
					flagged = flagged || flag == "fail"
				}
			}
			if !flagged {
				return false, fmt.Sprintf("%s does not flag it failed yet", m.Addr())
			}
		}
		return true, ""
	})
}

// WaitPromoted waits until s, a replica, says it is a master (ROLE), as it
// does once it has won the election that follows its master's failure,
// and returns when the poll that first found it so was sent: the
// promotion came within one poll period (10ms) and a round trip of that
// time. It fails the test after 30s.
func (c *Cluster) WaitPromoted(t testing.TB, s *Server) time.Time {
	t.Helper()
	ctx := context.Background()
	node := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: adminTimeout,
		ReadTimeout: adminTimeout, WriteTimeout: adminTimeout})
	defer node.Close()
	deadline := time.Now().Add(topologyTimeout)
	for {
		asked := time.Now()
		role, err := node.Do(ctx, "role").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			return asked
		}
		if asked.After(deadline) {
			t.Fatalf("redistest: timed out after %s waiting for %s to be promoted: ROLE says %v, %v", topologyTimeout, s.Addr(), role, err)
		}
		time.Sleep(10 * time.Millisecond) // the poll's period, which bounds the answer's error
	}
}

// admin runs one command on s alone (not through a cluster client).
func (s *Server) admin(ctx context.Context, args ...any) *redis.Cmd {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: adminTimeout,
		ReadTimeout: adminTimeout, WriteTimeout: adminTimeout})
	defer c.Close()
	return c.Do(ctx, args...)
}

// waitFor polls cond until it holds, backing off from 5ms to 100ms, and
// fails the test after topologyTimeout with cond's last explanation.
func waitFor(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(topologyTimeout)
	pause := 5 * time.Millisecond
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: timed out after %s waiting for %s: %s", topologyTimeout, what, why)
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// oneLineInfo folds an INFO reply onto one line.
func oneLineInfo(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// KeySlot returns the Redis Cluster hash slot of key, as Redis computes
// it: CRC16 (XMODEM) of the key's hash tag (the text between the first
// "{" and the next "}", when not empty) or else of the whole key, modulo
// 16384.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % Slots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), Redis
// Cluster's.
func crc16(s string) uint16 {
	var crc uint16
	for i := range len(s) {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// StartClusterNode starts a Redis Cluster of one node (a [Server] with
// opts, cluster mode added) and waits until it says cluster_state:ok. The
// node serves the slots of keys, or every slot when keys is empty; the
// cluster runs with cluster-require-full-coverage no, so it is up though
// other slots have no node. A command, or a script, that touches a key of
// a slot the node does not serve fails (MOVED, CLUSTERDOWN, or "Script
// attempted to access a non local key"), as it would on a cluster whose
// other nodes serve those slots: tests of code that must keep to the slot
// of one hash tag per command (scripts that derive keys from KEYS[1]) run
// on it with that tag's key. Note that a script without flags may touch
// undeclared keys of other slots the node serves: Redis refuses only keys
// that are not local.
//
// A node accepts writes about 2s after it starts (Redis's
// CLUSTER_WRITABLE_DELAY); see [StartClusterNodeLater] to overlap that
// wait with other tests'.
func StartClusterNode(t testing.TB, opts *Options, keys ...string) *Server {
	t.Helper()
	return StartClusterNodeLater(t, opts, keys...)(t)
}

// StartClusterNodeLater starts the node [StartClusterNode] starts and
// gives it its slots, and returns a function that waits until it is up and
// returns it. Tests that each call it before t.Parallel() and the function
// after start their nodes together and wait out their 2s delays at once.
func StartClusterNodeLater(t testing.TB, opts *Options, keys ...string) (wait func(testing.TB) *Server) {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Cluster = true
	o.Args = append([]string{"--cluster-require-full-coverage", "no"}, o.Args...)
	s := Start(t, &o)
	ctx := context.Background()
	args := addSlots(0, Slots-1)
	if len(keys) > 0 {
		args = []any{"cluster", "addslots"}
		seen := map[int]bool{}
		for _, k := range keys {
			if slot := KeySlot(k); !seen[slot] {
				seen[slot] = true
				args = append(args, slot)
			}
		}
	}
	if err := s.admin(ctx, args...).Err(); err != nil {
		t.Fatalf("redistest: CLUSTER ADDSLOTS on %s: %v", s.Addr(), err)
	}
	return func(t testing.TB) *Server {
		t.Helper()
		waitFor(t, "the one-node cluster to be up", func() (bool, string) {
			info, err := s.admin(ctx, "cluster", "info").Text()
			return err == nil && strings.Contains(info, "cluster_state:ok"), fmt.Sprint(info, err)
		})
		return s
	}
}
