package redisurl

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Topology is the kind of Redis deployment a URL names.
type Topology string

// The topologies, by URL scheme.
const (
	// TopologySingle: one server (redis://, rediss://).
	TopologySingle Topology = "single"
	// TopologySentinel: a master found through Sentinel
	// (redis-sentinel://, rediss-sentinel://).
	TopologySentinel Topology = "sentinel"
	// TopologyCluster: a Redis Cluster (redis-cluster://,
	// rediss-cluster://).
	TopologyCluster Topology = "cluster"
)

// URL schemes.
const (
	schemeRedis         = "redis"
	schemeRedisTLS      = "rediss"
	schemeSentinel      = "redis-sentinel"
	schemeSentinelTLS   = "rediss-sentinel"
	schemeCluster       = "redis-cluster"
	schemeClusterTLS    = "rediss-cluster"
	defaultSentinelPort = "26379"
	defaultRedisPort    = "6379"
	// defaultIOTimeout is the read and write timeout of the clients of
	// NewClient when the URL sets none (go-redis v9.23's own default is
	// 5s): a master that hangs instead of dying is left that much sooner.
	defaultIOTimeout = 3 * time.Second
)

// wantSchemes lists the schemes for error messages.
const wantSchemes = "redis://, rediss://, redis-sentinel://, rediss-sentinel://, redis-cluster:// or rediss-cluster://"

// Target is a Redis deployment: the options of exactly one of a single
// server (Single), a Sentinel-managed master (Failover) or a Redis Cluster
// (Cluster). Build it with [Parse]; a Target built by hand must set
// exactly one field.
type Target struct {
	Single   *redis.Options
	Failover *redis.FailoverOptions
	Cluster  *redis.ClusterOptions
}

// Parse parses a Redis URL of one of these forms (docs/redis.md has the
// details):
//
//	redis://[[user]:password@]host[:port][/db][?option=value...]       (rediss:// for TLS)
//	redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]?master=NAME[&option=value...]
//	redis-cluster://[[user]:password@]host[:port][,host[:port]...][?option=value...]
//
// (rediss-sentinel:// and rediss-cluster:// for TLS). The options are
// go-redis's URL options (dial_timeout, read_timeout, pool_size, ...);
// an unknown one is an error. For Sentinel, the user and password are
// those of the master and its replicas, and also of the sentinels unless
// sentinel_username or sentinel_password say otherwise
// (sentinel_password= with no value: the sentinels have no password);
// sentinels listen on 26379 unless a port is given. A Redis Cluster has
// only database 0.
//
// This is how Cairn's worker and CLI read CAIRN_REDIS_URL, with the same
// checks. The error is one line that never contains the URL's password,
// and does not name where the URL came from: wrap it with that (the
// worker says "CAIRN_REDIS_URL: ...").
func Parse(raw string) (*Target, error) {
	return parseRedisURL(raw)
}

func parseRedisURL(raw string) (*Target, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, fmt.Errorf("no scheme: want %s", wantSchemes)
	}
	switch strings.ToLower(scheme) {
	case schemeRedis, schemeRedisTLS:
		return parseSingle(raw)
	case schemeSentinel:
		return parseSentinel(schemeRedis, rest)
	case schemeSentinelTLS:
		return parseSentinel(schemeRedisTLS, rest)
	case schemeCluster:
		return parseCluster(schemeRedis, rest)
	case schemeClusterTLS:
		return parseCluster(schemeRedisTLS, rest)
	}
	return nil, fmt.Errorf("scheme %q: want %s", scheme, wantSchemes)
}

// urlError is err of url.Parse without the URL it quotes (it may hold a
// password).
func urlError(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return fmt.Errorf("not a URL: %w", ue.Err)
	}
	return fmt.Errorf("not a URL: %w", err)
}

// goRedisError is an error of go-redis's URL parsers, without their
// "redis: " prefix.
func goRedisError(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return urlError(ue)
	}
	return errors.New(strings.TrimPrefix(err.Error(), "redis: "))
}

func parseSingle(raw string) (*Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, urlError(err)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("no host in %q", u.Redacted())
	}
	if strings.Contains(u.Host, ",") {
		return nil, fmt.Errorf("%s:// takes one host; for several, use %s:// (Sentinel) or %s:// (Cluster)",
			u.Scheme, schemeSentinel, schemeCluster)
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return nil, goRedisError(err)
	}
	return &Target{Single: opts}, nil
}

// multiURL is a URL with a list of hosts, split: scheme is redis or
// rediss (for TLS), hosts holds host:port pairs, and u is the URL with
// only the first.
type multiURL struct {
	u     *url.URL
	hosts []string
}

// parseMulti splits rest, a URL after its "scheme://", whose authority
// lists hosts separated by commas; a host without a port gets
// defaultPort.
func parseMulti(scheme, rest, defaultPort string) (*multiURL, error) {
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	userinfo := ""
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		userinfo, authority = authority[:at+1], authority[at+1:]
	}
	if authority == "" {
		return nil, errors.New("no host")
	}
	var hosts []string
	for h := range strings.SplitSeq(authority, ",") {
		if h == "" {
			return nil, errors.New("an empty host in the list: separate host:port pairs with single commas")
		}
		if !strings.HasPrefix(h, "[") && strings.Count(h, ":") == 0 ||
			strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			h = net.JoinHostPort(strings.Trim(h, "[]"), defaultPort)
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			return nil, fmt.Errorf("host %q: want host:port", h)
		}
		if host == "" {
			return nil, fmt.Errorf("host %q: no host name", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("host %q: port %q is not a number from 1 to 65535", h, port)
		}
		hosts = append(hosts, net.JoinHostPort(host, port))
	}
	u, err := url.Parse(scheme + "://" + userinfo + hosts[0] + tail)
	if err != nil {
		return nil, urlError(err)
	}
	if u.Fragment != "" {
		return nil, errors.New("a fragment (#...) has no meaning in a Redis URL")
	}
	return &multiURL{u: u, hosts: hosts}, nil
}

// withAddrs returns m's URL with the other hosts as go-redis's addr
// options and q as the rest of its query.
func (m *multiURL) withAddrs(q url.Values) string {
	for _, h := range m.hosts[1:] {
		q.Add("addr", h)
	}
	u := *m.u
	u.RawQuery = q.Encode()
	return u.String()
}

// takeOne removes option name from q and returns its value, and whether
// it was given; given twice is an error.
func takeOne(q url.Values, name string) (string, bool, error) {
	vs, ok := q[name]
	delete(q, name)
	if len(vs) > 1 {
		return "", false, fmt.Errorf("option %s given %d times", name, len(vs))
	}
	if !ok {
		return "", false, nil
	}
	return vs[0], true, nil
}

// refuseOptions reports the options of go-redis's URLs that Cairn's URLs
// spell otherwise.
func refuseOptions(q url.Values, how map[string]string) error {
	for name, instead := range how {
		if _, ok := q[name]; ok {
			return fmt.Errorf("option %s: %s", name, instead)
		}
	}
	return nil
}

func parseSentinel(scheme, rest string) (*Target, error) {
	m, err := parseMulti(scheme, rest, defaultSentinelPort)
	if err != nil {
		return nil, err
	}
	q := m.u.Query()
	if err := refuseOptions(q, map[string]string{
		"master_name": "name the master with master=NAME",
		"password":    "put the password in the URL: redis-sentinel://:PASSWORD@host:port,...",
		"username":    "put the user in the URL: redis-sentinel://USER:PASSWORD@host:port,...",
		"addr":        "list the sentinels in the host part: redis-sentinel://host:port,host:port/...",
	}); err != nil {
		return nil, err
	}
	master, _, err := takeOne(q, "master")
	if err != nil {
		return nil, err
	}
	if master == "" {
		return nil, errors.New("no master name: add ?master=NAME (the name the sentinels monitor)")
	}
	sentUser, hasSentUser, err := takeOne(q, "sentinel_username")
	if err != nil {
		return nil, err
	}
	sentPass, hasSentPass, err := takeOne(q, "sentinel_password")
	if err != nil {
		return nil, err
	}
	q.Set("master_name", master)
	opts, err := redis.ParseFailoverURL(m.withAddrs(q))
	if err != nil {
		return nil, goRedisError(err)
	}
	// go-redis gives the URL's user and password to the sentinels; they are
	// the master's (and its replicas') too.
	opts.Username, opts.Password = opts.SentinelUsername, opts.SentinelPassword
	if hasSentUser {
		opts.SentinelUsername = sentUser
	}
	if hasSentPass {
		opts.SentinelPassword = sentPass
	}
	if opts.TLSConfig != nil {
		opts.TLSConfig = multiHostTLS(opts.TLSConfig)
	}
	return &Target{Failover: opts}, nil
}

func parseCluster(scheme, rest string) (*Target, error) {
	m, err := parseMulti(scheme, rest, defaultRedisPort)
	if err != nil {
		return nil, err
	}
	if p := strings.Trim(m.u.Path, "/"); p != "" && p != "0" {
		return nil, fmt.Errorf("database %q: a Redis Cluster has only database 0; leave the path out", p)
	}
	q := m.u.Query()
	if err := refuseOptions(q, map[string]string{
		"addr": "list the nodes in the host part: redis-cluster://host:port,host:port",
	}); err != nil {
		return nil, err
	}
	u := *m.u
	u.Path = ""
	m.u = &u
	opts, err := redis.ParseClusterURL(m.withAddrs(q))
	if err != nil {
		return nil, goRedisError(err)
	}
	if opts.TLSConfig != nil {
		opts.TLSConfig = multiHostTLS(opts.TLSConfig)
	}
	return &Target{Cluster: opts}, nil
}

// multiHostTLS is go-redis's TLS configuration for a URL of several hosts,
// without the server name go-redis takes from the first: each connection
// then checks the certificate against the name it dials (a node or master
// that Sentinel or the cluster announces), not against the first host's.
func multiHostTLS(c *tls.Config) *tls.Config {
	c = c.Clone()
	c.ServerName = ""
	if c.MinVersion == 0 {
		c.MinVersion = tls.VersionTLS12
	}
	return c
}

// Topology returns the kind of deployment.
func (r *Target) Topology() Topology {
	switch {
	case r.Failover != nil:
		return TopologySentinel
	case r.Cluster != nil:
		return TopologyCluster
	}
	return TopologySingle
}

// String describes the deployment for logs and messages, without
// credentials: "127.0.0.1:6379/0", "sentinel master mymaster via
// 10.0.0.1:26379,10.0.0.2:26379 db 0", "cluster 10.0.0.1:6379,...".
func (r *Target) String() string {
	switch {
	case r.Failover != nil:
		return fmt.Sprintf("sentinel master %s via %s db %d", r.Failover.MasterName,
			strings.Join(r.Failover.SentinelAddrs, ","), r.Failover.DB)
	case r.Cluster != nil:
		return "cluster " + strings.Join(r.Cluster.Addrs, ",")
	case r.Single != nil:
		return fmt.Sprintf("%s/%d", r.Single.Addr, r.Single.DB)
	}
	return "(none)"
}

// NewClient returns a client of the deployment: a *redis.Client for a
// single server, a Sentinel-backed *redis.Client that follows the master
// across failovers, or a *redis.ClusterClient that reloads its slot map as
// soon as a node does not answer, and so follows a failover too (see
// followFailovers).
//
// Its protocol is RESP2 unless the URL asks for another (protocol=3):
// Cairn uses no RESP3 feature (push notifications, client-side caching),
// and a RESP3 client of go-redis peeks at the connection for pending push
// notifications around every command, about a tenth of the worker's CPU
// per step (bench/: BenchmarkStepThroughput).
//
// Its read and write timeouts are 3s unless the URL (or DefaultTimeouts)
// sets them (ReadTimeout).
func (r *Target) NewClient() redis.UniversalClient {
	switch {
	case r.Failover != nil:
		o := *r.Failover
		o.Protocol = defaultProtocol(o.Protocol)
		o.ReadTimeout, o.WriteTimeout = defaultIO(o.ReadTimeout), defaultIO(o.WriteTimeout)
		return redis.NewFailoverClient(&o)
	case r.Cluster != nil:
		o := *r.Cluster
		o.Protocol = defaultProtocol(o.Protocol)
		o.ReadTimeout, o.WriteTimeout = defaultIO(o.ReadTimeout), defaultIO(o.WriteTimeout)
		cc := redis.NewClusterClient(&o)
		followFailovers(cc)
		return cc
	}
	o := *r.Single
	o.Protocol = defaultProtocol(o.Protocol)
	o.ReadTimeout, o.WriteTimeout = defaultIO(o.ReadTimeout), defaultIO(o.WriteTimeout)
	return redis.NewClient(&o)
}

// defaultIO is a read or write timeout the URL set as d (0: not set; -1 or
// -2: none, as go-redis takes them), defaultIOTimeout when unset.
func defaultIO(d time.Duration) time.Duration {
	if d == 0 {
		return defaultIOTimeout
	}
	return d
}

// defaultProtocol is the RESP version of a client whose URL set p (0: not
// set): RESP2 by default (see NewClient).
func defaultProtocol(p int) int {
	if p == 0 {
		return 2
	}
	return p
}

// AsynqConnOpt returns asynq's connection options for the deployment (for
// asynqmon, dashboard.Config.Monitoring, which makes its own clients): each is one of NewClient, with
// every option of the URL, and on a Cluster it follows failovers as the
// worker's client does (asynq's own RedisClusterClientOpt makes a client
// that sent asynqmon's pages to a dead master for up to a minute).
func (r *Target) AsynqConnOpt() asynq.RedisConnOpt { return clientOpt{r} }

// clientOpt is the asynq.RedisConnOpt of a Target.
type clientOpt struct{ r *Target }

// MakeRedisClient returns a new client of NewClient; asynqmon closes it.
func (o clientOpt) MakeRedisClient() any { return o.r.NewClient() }

// Timeouts are connection settings a program may default (Cairn's CLI
// wants short ones); a zero field leaves the setting alone.
type Timeouts struct {
	Dial          time.Duration
	Read          time.Duration
	Write         time.Duration
	DialerRetries int
}

// DefaultTimeouts sets each of d's settings the URL did not set, and has
// the client's context deadlines bound its commands
// (ContextTimeoutEnabled).
func (r *Target) DefaultTimeouts(d Timeouts) {
	// The three option types hold the same fields: default them through
	// pointers.
	apply := func(dial, read, write *time.Duration, retries *int, ctxTimeout *bool) {
		for _, f := range []struct {
			dst *time.Duration
			v   time.Duration
		}{{dial, d.Dial}, {read, d.Read}, {write, d.Write}} {
			if *f.dst == 0 {
				*f.dst = f.v
			}
		}
		if *retries == 0 {
			*retries = d.DialerRetries
		}
		*ctxTimeout = true
	}
	switch {
	case r.Failover != nil:
		o := r.Failover
		apply(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.DialerRetries, &o.ContextTimeoutEnabled)
	case r.Cluster != nil:
		o := r.Cluster
		apply(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.DialerRetries, &o.ContextTimeoutEnabled)
	case r.Single != nil:
		o := r.Single
		apply(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.DialerRetries, &o.ContextTimeoutEnabled)
	}
}

// ReadTimeout is how long the client of NewClient waits for a reply: 3s
// unless the URL sets read_timeout; negative: no limit.
func (r *Target) ReadTimeout() time.Duration {
	var d time.Duration
	switch {
	case r.Failover != nil:
		d = r.Failover.ReadTimeout
	case r.Cluster != nil:
		d = r.Cluster.ReadTimeout
	case r.Single != nil:
		d = r.Single.ReadTimeout
	}
	if d == 0 {
		return defaultIOTimeout
	}
	return d
}
