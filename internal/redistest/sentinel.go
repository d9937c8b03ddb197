package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelOptions configures the deployment [StartSentinel] starts. The
// zero value (or nil) gives a master with one replica watched by three
// sentinels with a quorum of two.
type SentinelOptions struct {
	// MasterName is the name the sentinels monitor; default "mymaster".
	MasterName string
	// Replicas is the number of replicas; default 1.
	Replicas int
	// Sentinels is the number of sentinels; default 3. Quorum is how many
	// must agree that the master is down; default a majority.
	Sentinels int
	Quorum    int
	// DownAfter is how long the master may not answer before a sentinel
	// counts it as down (down-after-milliseconds); default 1.5s.
	DownAfter time.Duration
	// AppendOnly and AppendFsync are the master's and the replicas' (see
	// Options).
	AppendOnly  bool
	AppendFsync string
	// Args are extra redis-server arguments of the master and replicas.
	Args []string
}

// Sentinel is a master, its replicas and the sentinels that watch them,
// each a [Server] on loopback the test may kill, stop or restart. A
// t.Cleanup kills them all.
type Sentinel struct {
	// Name is the master's name in the sentinels.
	Name string
	// Master is the master as started; after a failover another server is
	// the master (see MasterAddr).
	Master *Server
	// Replicas are its replicas as started.
	Replicas []*Server
	// Sentinels watch them.
	Sentinels []*Server
}

// StartSentinel starts a master, its replicas (replicaof the master) and
// the sentinels that monitor it, each with a configuration file of its
// own. It returns once the replicas are in sync and every sentinel knows
// every replica and every other sentinel, so that a failover can happen.
// It fails the test (never skips) if redis-server cannot be found or the
// deployment is not ready within 30s.
func StartSentinel(t testing.TB, opts *SentinelOptions) *Sentinel {
	t.Helper()
	var o SentinelOptions
	if opts != nil {
		o = *opts
	}
	if o.MasterName == "" {
		o.MasterName = "mymaster"
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Sentinels <= 0 {
		o.Sentinels = 3
	}
	if o.Quorum <= 0 {
		o.Quorum = o.Sentinels/2 + 1
	}
	if o.DownAfter <= 0 {
		o.DownAfter = 1500 * time.Millisecond
	}
	// A replica's first sync starts at once, not after diskless
	// replication's default 5s wait for more replicas.
	dataOpts := Options{AppendOnly: o.AppendOnly, AppendFsync: o.AppendFsync,
		Args: append([]string{"--repl-diskless-sync-delay", "0"}, o.Args...)}
	d := &Sentinel{Name: o.MasterName}
	d.Master = Start(t, &dataOpts)
	ro := dataOpts
	ro.Args = append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(d.Master.Port())}, dataOpts.Args...)
	d.Replicas = startAll(t, o.Replicas, &ro)
	ctx := context.Background()
	waitFor(t, "the replicas to be in sync", func() (bool, string) {
		for _, r := range d.Replicas {
			info, err := r.admin(ctx, "info", "replication").Text()
			if err != nil || !strings.Contains(info, "master_link_status:up") {
				return false, fmt.Sprintf("%s: %v %s", r.Addr(), err, oneLineInfo(info))
			}
		}
		return true, ""
	})

	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d %[3]d\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\n"+
		"sentinel failover-timeout %[1]s %[5]d\n"+
		"sentinel parallel-syncs %[1]s 1",
		o.MasterName, d.Master.Port(), o.Quorum, o.DownAfter.Milliseconds(), (10 * o.DownAfter).Milliseconds())
	d.Sentinels = startAll(t, o.Sentinels, &Options{SentinelConfig: conf})
	waitFor(t, "the sentinels to know the replicas and one another", func() (bool, string) {
		for _, s := range d.Sentinels {
			replicas, err := s.admin(ctx, "sentinel", "replicas", o.MasterName).Slice()
			if err != nil || len(replicas) != o.Replicas {
				return false, fmt.Sprintf("sentinel %s knows %d replicas (%v)", s.Addr(), len(replicas), err)
			}
			others, err := s.admin(ctx, "sentinel", "sentinels", o.MasterName).Slice()
			if err != nil || len(others) != o.Sentinels-1 {
				return false, fmt.Sprintf("sentinel %s knows %d other sentinels (%v)", s.Addr(), len(others), err)
			}
		}
		return true, ""
	})
	return d
}

// startAll starts n servers with opts in parallel.
func startAll(t testing.TB, n int, opts *Options) []*Server {
	t.Helper()
	bin, err := findServer()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range out {
		s := newServer(bin, t.TempDir(), opts)
		out[i] = s
		t.Cleanup(func() {
			if err := s.kill(); err != nil {
				t.Errorf("redistest: cleanup: %v", err)
			}
		})
		wg.Go(func() { errs[i] = s.startFreePort() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// SentinelAddrs returns the sentinels' addresses.
func (d *Sentinel) SentinelAddrs() []string {
	var out []string
	for _, s := range d.Sentinels {
		out = append(out, s.Addr())
	}
	return out
}

// URL returns the deployment's Cairn URL,
// redis-sentinel://HOST:PORT,.../0?master=NAME.
func (d *Sentinel) URL() string {
	return "redis-sentinel://" + strings.Join(d.SentinelAddrs(), ",") + "/0?master=" + d.Name
}

// Client returns a new Sentinel-backed client of the current master,
// closed by a t.Cleanup.
func (d *Sentinel) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: d.Name, SentinelAddrs: d.SentinelAddrs()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Servers returns the master and the replicas as started.
func (d *Sentinel) Servers() []*Server { return append([]*Server{d.Master}, d.Replicas...) }

// MasterAddr returns the master's address as the running sentinels
// agree on it, or "" with the disagreement.
func (d *Sentinel) MasterAddr(ctx context.Context) (string, string) {
	addr := ""
	for _, s := range d.Sentinels {
		if !s.Running() {
			continue
		}
		hp, err := s.admin(ctx, "sentinel", "get-master-addr-by-name", d.Name).StringSlice()
		if err != nil || len(hp) != 2 {
			return "", fmt.Sprintf("sentinel %s: %v %v", s.Addr(), hp, err)
		}
		a := net.JoinHostPort(hp[0], hp[1])
		if addr != "" && a != addr {
			return "", fmt.Sprintf("sentinels disagree: %s, %s", addr, a)
		}
		addr = a
	}
	return addr, ""
}

// WaitMaster waits until every running sentinel names srv as the master
// and srv says it is one (role:master); it fails the test after 30s.
func (d *Sentinel) WaitMaster(t testing.TB, srv *Server) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, srv.Addr()+" to be the master", func() (bool, string) {
		addr, why := d.MasterAddr(ctx)
		if addr != srv.Addr() {
			return false, fmt.Sprintf("the sentinels name %q %s", addr, why)
		}
		info, err := srv.admin(ctx, "info", "replication").Text()
		if err != nil || !strings.Contains(info, "role:master") {
			return false, fmt.Sprintf("%s: %v %s", srv.Addr(), err, oneLineInfo(info))
		}
		return true, ""
	})
}
