package workflow_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/workflow"
)

// CheckRedis warns, with the fix, when state would not survive a Redis
// restart or could be evicted, and says nothing when Redis is set up right.
func TestCheckRedis(t *testing.T) {
	t.Parallel()
	check := func(srv *redistest.Server) string {
		var buf bytes.Buffer
		workflow.CheckRedis(ctxb, srv.Client(t), slog.New(slog.NewTextHandler(&buf, nil)))
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
