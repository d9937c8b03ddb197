package metrics_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/metrics"
	"github.com/cairnhq/cairn/workflow"
)

// TestOutboxMetrics: the depth of a client's outbox, read at scrape time.
func TestOutboxMetrics(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testkit.FreeAddr(t), MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	c, err := workflow.OpenClient(rdb, workflow.ClientConfig{Queue: testkit.Queue(t, "m"), Logger: testkit.Logger(t),
		Outbox: filepath.Join(t.TempDir(), "outbox.db"), OutboxMaxEntries: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		if run, err := c.Start(context.Background(), "wf", nil, nil); err != nil || !run.Queued {
			t.Fatalf("start while Redis is down: %+v, %v", run, err)
		}
	}
	m, err := metrics.New(prometheus.NewRegistry(), metrics.Config{Outbox: c})
	if err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, m.Handler())
	for name, want := range map[string]float64{"cairn_outbox_entries": 3, "cairn_outbox_capacity_entries": 50,
		"cairn_outbox_dead_letters": 0, "cairn_outbox_flushed_total": 0} {
		if v, _, ok := sample(fams, name); !ok || v != want {
			t.Errorf("%s = %v (reported: %v); want %v", name, v, ok, want)
		}
	}
	if v, _, _ := sample(fams, "cairn_outbox_bytes"); v <= 0 {
		t.Errorf("cairn_outbox_bytes = %v", v)
	}
	if _, _, ok := sample(fams, "cairn_outbox_oldest_age_seconds"); !ok {
		t.Error("no cairn_outbox_oldest_age_seconds")
	}

	m2, err := metrics.New(prometheus.NewRegistry(), metrics.Config{Outbox: failingOutbox{}})
	if err != nil {
		t.Fatal(err)
	}
	fams = scrape(t, m2.Handler())
	if _, _, ok := sample(fams, "cairn_outbox_entries"); ok {
		t.Error("reported although the read failed")
	}
	if v, _, _ := sample(scrape(t, m2.Handler()), "cairn_metrics_collect_errors_total", "source", "outbox"); v < 1 {
		t.Errorf("collect errors (outbox) = %v", v)
	}
}

type failingOutbox struct{}

func (failingOutbox) OutboxStats() (workflow.OutboxStats, error) {
	return workflow.OutboxStats{}, errors.New("disk on fire")
}
