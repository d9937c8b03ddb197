package workflow_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/engine"

	"github.com/cairnhq/cairn/internal/redistest"
)

// CheckRedis warns, with the fix, when state would not survive a Redis
// restart or could be evicted, and says nothing when Redis is set up right.
func TestCheckRedis(t *testing.T) {
	t.Parallel()
	check := func(srv *redistest.Server) string {
		var buf bytes.Buffer
		engine.CheckRedis(ctxb, srv.Client(t), slog.New(slog.NewTextHandler(&buf, nil)))
		return buf.String()
	}
	bad := check(redistest.Start(t, &redistest.Options{Args: []string{"--maxmemory-policy", "allkeys-lru"}}))
	for _, want := range []string{"appendonly is off", "fix=\"CONFIG SET appendonly yes", "may evict workflow state",
		"maxmemory-policy=allkeys-lru", "CONFIG SET maxmemory-policy noeviction"} {
		if !strings.Contains(bad, want) {
			t.Errorf("warnings lack %q:\n%s", want, bad)
		}
	}
	if n := strings.Count(bad, "level=WARN"); n != 2 {
		t.Errorf("%d warnings, want one each:\n%s", n, bad)
	}
	good := check(redistest.Start(t, &redistest.Options{AppendOnly: true, Args: []string{"--maxmemory-policy", "noeviction"}}))
	if good != "" {
		t.Errorf("a durable Redis got warnings:\n%s", good)
	}
}

// On a Redis Cluster every node is checked: CONFIG GET names no key, and
// the cluster client alone would read one node's settings.
func TestCheckRedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, &redistest.ClusterOptions{Masters: 2, AppendOnly: true,
		Args: []string{"--maxmemory-policy", "noeviction"}})
	check := func() string {
		var buf bytes.Buffer
		engine.CheckRedis(ctxb, c.Client(t), slog.New(slog.NewTextHandler(&buf, nil)))
		return buf.String()
	}
	if good := check(); good != "" {
		t.Errorf("a durable cluster got warnings:\n%s", good)
	}
	if err := c.Masters[1].Client(t).ConfigSet(ctxb, "appendonly", "no").Err(); err != nil {
		t.Fatal(err)
	}
	bad := check()
	if n := strings.Count(bad, "level=WARN"); n != 1 || !strings.Contains(bad, "appendonly is off") ||
		!strings.Contains(bad, "node="+c.Masters[1].Addr()) {
		t.Errorf("want one warning naming %s:\n%s", c.Masters[1].Addr(), bad)
	}
}
