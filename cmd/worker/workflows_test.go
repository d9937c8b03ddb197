package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/proctest"
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
