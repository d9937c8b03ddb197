package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestWorkflowsFileIsRegistered: the worker registers the workflows of
// CAIRN_WORKFLOWS_FILE next to the demo workflow and publishes them.
func TestWorkflowsFileIsRegistered(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	path := filepath.Join(t.TempDir(), "workflows.yaml")
	if err := os.WriteFile(path, []byte(`workflows:
  sync-invoices:
    steps:
      - {name: fetch, type: http, with: {method: GET, url: "http://127.0.0.1:1/invoices"}}
      - {name: notify, type: http, optional: true, with: {method: POST, url: "http://127.0.0.1:1/done", body: "{{json .steps.fetch.body}}"}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	p := proctest.Start(t, worker(t), append(baseEnv(addr), "CAIRN_HTTP_ADDR=", "CAIRN_WORKFLOWS_FILE="+path))
	p.WaitForOutput(t, "worker started", waitTimeout)

	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	wfs, err := workflow.NewClient(rdb, workflow.ClientConfig{Logger: slog.New(slog.DiscardHandler)}).Workflows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := wfs["sync-invoices"]; !slices.Equal(got, []string{"fetch", "notify"}) {
		t.Errorf("published workflows %v, want sync-invoices with fetch and notify", wfs)
	}
	if _, ok := wfs["demo"]; !ok {
		t.Errorf("published workflows %v lack the demo", wfs)
	}
	p.Signal(t, syscall.SIGTERM)
	if code := p.Wait(t, waitTimeout); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0\n%s", code, p.Output())
	}
}

// TestDemoOnRedisOnlyWhenAsked: a worker on Redis registers the demo
// workflow only with CAIRN_DEMO=true (the embedded store always has it:
// TestEmbeddedStoreStartsAndStopsOnSIGTERM); without it, and without
// workflows of its own, it says so at start.
func TestDemoOnRedisOnlyWhenAsked(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	srv := redistest.Start(t, nil)
	bin := worker(t)
	for _, tc := range []struct {
		queue, demo string
		want        bool
	}{
		{"nodemo", "", false},
		{"nodemo_false", "false", false},
		{"demo", "true", true},
	} {
		env := append(baseEnv(testkit.FreeAddr(t)), "CAIRN_REDIS_URL="+srv.URL(), "CAIRN_QUEUE="+tc.queue,
			"CAIRN_DEMO="+tc.demo)
		p := proctest.Start(t, bin, env)
		p.WaitForOutput(t, "worker started", waitTimeout)

		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		wfs, err := workflow.NewClient(srv.Client(t), workflow.ClientConfig{Queue: tc.queue,
			Logger: slog.New(slog.DiscardHandler)}).Workflows(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := wfs[demo.Name]; ok != tc.want {
			t.Errorf("CAIRN_DEMO=%q on Redis: published workflows %v; want the demo: %v", tc.demo, wfs, tc.want)
		}
		const warning = "no workflows registered"
		if strings.Contains(p.Output(), warning) == tc.want {
			t.Errorf("CAIRN_DEMO=%q on Redis: the warning %q is there: %v, want %v\n%s", tc.demo, warning,
				!tc.want, !tc.want, p.Output())
		}
		p.Signal(t, syscall.SIGTERM)
		if code := p.Wait(t, waitTimeout); code != 0 {
			t.Fatalf("exit code after SIGTERM = %d, want 0\n%s", code, p.Output())
		}
	}
}
