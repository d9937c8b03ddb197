package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/cmd/internal/config"
)

// TestParseRedisURLNamesTheVariable: ParseRedisURL's and Load's errors
// are redisurl.Parse's (workflow/redisurl's tests hold every case), named
// CAIRN_REDIS_URL, without the password.
func TestParseRedisURLNamesTheVariable(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t"
	for _, tt := range []struct{ url, msg string }{
		{"localhost:6379", "no scheme"},
		{"redis://:" + secret + "@h1:1,h2:2", "redis-sentinel:// (Sentinel) or redis-cluster://"},
		{"redis-sentinel://:" + secret + "@h:1", "no master name"},
		{"redis-cluster://:" + secret + "@h:1/2", "only database 0"},
	} {
		_, err := config.ParseRedisURL(tt.url)
		if err == nil || !strings.HasPrefix(err.Error(), "CAIRN_REDIS_URL: ") || !strings.Contains(err.Error(), tt.msg) ||
			strings.Contains(err.Error(), secret) {
			t.Errorf("ParseRedisURL(%q): %v; want CAIRN_REDIS_URL: ...%s..., without the password", tt.url, err, tt.msg)
		}
		_, lerr := config.Load([]string{"CAIRN_REDIS_URL=" + tt.url})
		if got := vars(lerr); !slices.Equal(got, []string{"CAIRN_REDIS_URL"}) || !strings.Contains(lerr.Error(), tt.msg) ||
			strings.Contains(lerr.Error(), secret) {
			t.Errorf("Load: %v (variables %q)", lerr, got)
		}
	}
	if target, err := config.ParseRedisURL("redis-cluster://h1,h2"); err != nil || target.Topology() != config.TopologyCluster {
		t.Errorf("a cluster URL: %v, %v", target, err)
	}
}

func TestMinReplicasTimeoutBelowReadTimeout(t *testing.T) {
	t.Parallel()
	if _, err := config.Load([]string{"CAIRN_REDIS_URL=redis-sentinel://h?master=m", "CAIRN_REDIS_MIN_REPLICAS=1",
		"CAIRN_REDIS_MIN_REPLICAS_TIMEOUT=2s"}); err != nil {
		t.Errorf("2s under the default 3s read timeout: %v", err)
	}
	_, err := config.Load([]string{"CAIRN_REDIS_URL=redis-cluster://h?read_timeout=1s", "CAIRN_REDIS_MIN_REPLICAS=1",
		"CAIRN_REDIS_MIN_REPLICAS_TIMEOUT=1s"})
	if got := vars(err); !slices.Equal(got, []string{"CAIRN_REDIS_MIN_REPLICAS_TIMEOUT"}) ||
		!strings.Contains(err.Error(), "less than the Redis read timeout (1s") {
		t.Errorf("a wait as long as the read timeout: %v", err)
	}
}
