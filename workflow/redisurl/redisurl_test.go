package redisurl_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/workflow/redisurl"
)

// secret is the password of the URLs below: no error or description may
// contain it.
const secret = "s3cr3t"

func TestParse(t *testing.T) {
	t.Parallel()
	type want struct {
		topology      redisurl.Topology
		addrs         []string // Single: [Addr]; Sentinel: SentinelAddrs; Cluster: Addrs
		master        string
		db            int
		user, pass    string
		sentUser      string
		sentPass      string
		tls           bool
		dialTimeout   time.Duration
		describedWith string
	}
	tests := []struct {
		url  string
		want want
	}{
		{"redis://127.0.0.1:6379/2", want{topology: redisurl.TopologySingle, addrs: []string{"127.0.0.1:6379"}, db: 2,
			describedWith: "127.0.0.1:6379/2"}},
		{"rediss://u:" + secret + "@redis.internal/0?dial_timeout=2s", want{topology: redisurl.TopologySingle,
			addrs: []string{"redis.internal:6379"}, user: "u", pass: secret, tls: true, dialTimeout: 2 * time.Second,
			describedWith: "redis.internal:6379/0"}},
		// asynq's form: the password, sentinels, the database, the master.
		{"redis-sentinel://:" + secret + "@10.0.0.1:26379,10.0.0.2:26380,sentinel-3/4?master=mymaster",
			want{topology: redisurl.TopologySentinel, addrs: []string{"10.0.0.1:26379", "10.0.0.2:26380", "sentinel-3:26379"},
				master: "mymaster", db: 4, pass: secret, sentPass: secret,
				describedWith: "sentinel master mymaster via 10.0.0.1:26379,10.0.0.2:26380,sentinel-3:26379 db 4"}},
		// Sentinels with their own password, or none.
		{"redis-sentinel://app:" + secret + "@s1:1,s2:2?master=m&sentinel_username=sen&sentinel_password=other",
			want{topology: redisurl.TopologySentinel, addrs: []string{"s1:1", "s2:2"}, master: "m", user: "app", pass: secret,
				sentUser: "sen", sentPass: "other", describedWith: "sentinel master m via s1:1,s2:2 db 0"}},
		{"rediss-sentinel://:" + secret + "@[::1]:26379,[::1]/?master=m&sentinel_password=&read_timeout=5s",
			want{topology: redisurl.TopologySentinel, addrs: []string{"[::1]:26379", "[::1]:26379"}, master: "m", pass: secret,
				tls: true, describedWith: "sentinel master m via [::1]:26379,[::1]:26379 db 0"}},
		{"redis-cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002", want{topology: redisurl.TopologyCluster,
			addrs:         []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"},
			describedWith: "cluster 127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002"}},
		{"rediss-cluster://u:" + secret + "@node-a,node-b:7001/0?dial_timeout=1s", want{topology: redisurl.TopologyCluster,
			addrs: []string{"node-a:6379", "node-b:7001"}, user: "u", pass: secret, tls: true, dialTimeout: time.Second,
			describedWith: "cluster node-a:6379,node-b:7001"}},
		{"REDIS-CLUSTER://only-one", want{topology: redisurl.TopologyCluster, addrs: []string{"only-one:6379"},
			describedWith: "cluster only-one:6379"}},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			target, err := redisurl.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			w := tt.want
			var got want
			got.topology = target.Topology()
			got.describedWith = target.String()
			switch {
			case target.Single != nil:
				o := target.Single
				got.addrs, got.db, got.user, got.pass, got.tls, got.dialTimeout = []string{o.Addr}, o.DB, o.Username,
					o.Password, o.TLSConfig != nil, o.DialTimeout
			case target.Failover != nil:
				o := target.Failover
				got.addrs, got.master, got.db, got.user, got.pass, got.sentUser, got.sentPass, got.tls, got.dialTimeout =
					o.SentinelAddrs, o.MasterName, o.DB, o.Username, o.Password, o.SentinelUsername, o.SentinelPassword,
					o.TLSConfig != nil, o.DialTimeout
				if o.TLSConfig != nil && o.TLSConfig.ServerName != "" {
					t.Errorf("TLS server name %q: with several hosts each connection checks its own", o.TLSConfig.ServerName)
				}
			case target.Cluster != nil:
				o := target.Cluster
				got.addrs, got.user, got.pass, got.tls, got.dialTimeout = o.Addrs, o.Username, o.Password,
					o.TLSConfig != nil, o.DialTimeout
				if o.TLSConfig != nil && o.TLSConfig.ServerName != "" {
					t.Errorf("TLS server name %q: with several hosts each connection checks its own", o.TLSConfig.ServerName)
				}
			}
			if !reflect.DeepEqual(got, w) {
				t.Errorf("ParseRedisURL(%q) =\n%+v\nwant\n%+v", tt.url, got, w)
			}
			if strings.Contains(target.String(), secret) {
				t.Errorf("String() %q shows the password", target.String())
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	tests := []struct{ url, msg string }{
		{"localhost:6379", "no scheme"},
		{"http://localhost:6379", `scheme "http"`},
		{"unix:///tmp/redis.sock", `scheme "unix"`},
		{"redis://", "no host"},
		{"redis://:" + secret + "@h:port", "not a URL"},
		{"redis://:" + secret + "@%zz", "not a URL"},
		{"redis://:" + secret + "@h:6379/x", "invalid database number"},
		{"redis://:" + secret + "@h:6379/0?bogus=1", "unexpected option: bogus"},
		{"redis://:" + secret + "@h1:1,h2:2", "redis-sentinel:// (Sentinel) or redis-cluster://"},
		{"redis-sentinel://:" + secret + "@h:1", "no master name"},
		{"redis-sentinel://:" + secret + "@h:1?master=", "no master name"},
		{"redis-sentinel://:" + secret + "@h:1?master=a&master=b", "master given 2 times"},
		{"redis-sentinel://:" + secret + "@h:1?master_name=m", "master=NAME"},
		{"redis-sentinel://h:1?master=m&password=" + secret, "put the password in the URL"},
		{"redis-sentinel://h:1?master=m&addr=h:2", "list the sentinels"},
		{"redis-sentinel://:" + secret + "@?master=m", "no host"},
		{"redis-sentinel://:" + secret + "@h1:1,,h2:2?master=m", "empty host"},
		{"redis-sentinel://:" + secret + "@h1:0?master=m", "1 to 65535"},
		{"redis-sentinel://:" + secret + "@h1:99999?master=m", "1 to 65535"},
		{"redis-sentinel://:" + secret + "@h1:x?master=m", "1 to 65535"},
		{"redis-sentinel://:" + secret + "@:1?master=m", "no host name"},
		{"redis-sentinel://:" + secret + "@::1?master=m", "want host:port"},
		{"redis-sentinel://:" + secret + "@h/db?master=m", "invalid database number"},
		{"redis-sentinel://:" + secret + "@h?master=m&dial_timeout=soon", "dial_timeout"},
		{"redis-sentinel://:" + secret + "@h?master=m#frag", "fragment"},
		{"redis-cluster://:" + secret + "@h:1/2", "only database 0"},
		{"redis-cluster://:" + secret + "@h:1?master=m", "unexpected option: master"},
		{"redis-cluster://:" + secret + "@h:1?addr=h:2", "list the nodes"},
		{"redis-cluster://:" + secret + "@%zz:1", "not a URL"},
		{"redis-cluster://", "no host"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			_, err := redisurl.Parse(tt.url)
			if err == nil {
				t.Fatalf("accepted %q", tt.url)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("%q does not say %q", err, tt.msg)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%q shows the password", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("%q is not one line", err)
			}
		})
	}
}

// TestAsynqConnOpt: asynqmon's clients are NewClient's, with the URL's
// options.
func TestAsynqConnOpt(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"redis://:" + secret + "@h:1/3?pool_size=7",
		"redis-sentinel://:" + secret + "@h:1/3?master=m&sentinel_password=&pool_size=7",
		"redis-cluster://:" + secret + "@h:1,h:2?pool_size=7",
	} {
		target, err := redisurl.Parse(url)
		if err != nil {
			t.Fatal(err)
		}
		rdb, ok := target.AsynqConnOpt().MakeRedisClient().(redis.UniversalClient)
		if !ok {
			t.Fatalf("%s: AsynqConnOpt makes a %T", url, target.AsynqConnOpt().MakeRedisClient())
		}
		own := target.NewClient()
		want := reflect.TypeOf(own)
		_ = own.Close()
		if reflect.TypeOf(rdb) != want {
			t.Errorf("%s: AsynqConnOpt makes a %T, NewClient a %s", url, rdb, want)
		}
		switch c := rdb.(type) {
		case *redis.Client:
			o := c.Options()
			if o.DB != 3 || o.Password != secret || o.PoolSize != 7 || o.Protocol != 2 {
				t.Errorf("%s: db %d, password %q, pool %d, protocol %d", url, o.DB, o.Password, o.PoolSize, o.Protocol)
			}
		case *redis.ClusterClient:
			o := c.Options()
			if !slices.Equal(o.Addrs, []string{"h:1", "h:2"}) || o.Password != secret || o.PoolSize != 7 || o.Protocol != 2 {
				t.Errorf("%s: addrs %v, password %q, pool %d, protocol %d", url, o.Addrs, o.Password, o.PoolSize, o.Protocol)
			}
		}
		_ = rdb.Close()
	}
}

func TestDefaultTimeouts(t *testing.T) {
	t.Parallel()
	d := redisurl.Timeouts{Dial: time.Second, Read: 2 * time.Second, Write: 3 * time.Second, DialerRetries: 2}
	for _, url := range []string{"redis://h?read_timeout=9s", "redis-sentinel://h?master=m&read_timeout=9s",
		"redis-cluster://h?read_timeout=9s"} {
		target, err := redisurl.Parse(url)
		if err != nil {
			t.Fatal(err)
		}
		if got := target.ReadTimeout(); got != 9*time.Second {
			t.Errorf("%s: ReadTimeout() = %s, want the URL's 9s", url, got)
		}
		target.DefaultTimeouts(d)
		var dial, read, write time.Duration
		var ctxTimeout bool
		switch {
		case target.Single != nil:
			dial, read, write, ctxTimeout = target.Single.DialTimeout, target.Single.ReadTimeout, target.Single.WriteTimeout,
				target.Single.ContextTimeoutEnabled
		case target.Failover != nil:
			dial, read, write, ctxTimeout = target.Failover.DialTimeout, target.Failover.ReadTimeout,
				target.Failover.WriteTimeout, target.Failover.ContextTimeoutEnabled
		case target.Cluster != nil:
			dial, read, write, ctxTimeout = target.Cluster.DialTimeout, target.Cluster.ReadTimeout,
				target.Cluster.WriteTimeout, target.Cluster.ContextTimeoutEnabled
		}
		if dial != time.Second || read != 9*time.Second || write != 3*time.Second || !ctxTimeout {
			t.Errorf("%s: after DefaultTimeouts: dial %s read %s write %s context timeouts %v; want 1s, the URL's 9s, 3s, true",
				url, dial, read, write, ctxTimeout)
		}
	}
	target, _ := redisurl.Parse("redis-cluster://h")
	if got := target.ReadTimeout(); got != 3*time.Second {
		t.Errorf("ReadTimeout() = %s without read_timeout, want 3s", got)
	}
}

// TestNewClientTimeouts: the clients of NewClient wait 3s for a reply and
// a write unless the URL says otherwise, on every topology (go-redis's own
// default is 5s), as ReadTimeout reports.
func TestNewClientTimeouts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url         string
		read, write time.Duration
	}{
		{"redis://h", 3 * time.Second, 3 * time.Second},
		{"redis-sentinel://h?master=m", 3 * time.Second, 3 * time.Second},
		{"redis-cluster://h", 3 * time.Second, 3 * time.Second},
		{"redis://h?read_timeout=9s&write_timeout=1s", 9 * time.Second, time.Second},
		{"redis-cluster://h?read_timeout=9s", 9 * time.Second, 3 * time.Second},
		{"redis://h?read_timeout=-1", 0, 3 * time.Second}, // -1: no timeout, which go-redis keeps as 0
	} {
		target, err := redisurl.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		var read, write time.Duration
		switch rdb := target.NewClient().(type) {
		case *redis.Client:
			read, write = rdb.Options().ReadTimeout, rdb.Options().WriteTimeout
		case *redis.ClusterClient:
			read, write = rdb.Options().ReadTimeout, rdb.Options().WriteTimeout
		}
		if read != c.read || write != c.write || (c.read > 0 && target.ReadTimeout() != c.read) {
			t.Errorf("%s: read %s, write %s, ReadTimeout() %s; want %s, %s", c.url, read, write, target.ReadTimeout(),
				c.read, c.write)
		}
	}
}

// TestNewClientProtocol: clients speak RESP2 unless the URL asks for
// RESP3, for each topology.
func TestNewClientProtocol(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want int
	}{
		{"redis://127.0.0.1:6379/0", 2},
		{"redis://127.0.0.1:6379/0?protocol=3", 3},
		{"redis-sentinel://127.0.0.1:26379/0?master=m", 2},
		{"redis-cluster://127.0.0.1:7000,127.0.0.1:7001", 2},
	} {
		target, err := redisurl.Parse(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		rdb := target.NewClient()
		var got int
		switch c := rdb.(type) {
		case *redis.Client:
			got = c.Options().Protocol
		case *redis.ClusterClient:
			got = c.Options().Protocol
		default:
			t.Fatalf("%s: client %T", tc.url, rdb)
		}
		_ = rdb.Close()
		if got != tc.want {
			t.Errorf("%s: protocol %d, want %d", tc.url, got, tc.want)
		}
	}
}
