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

// TestBadWorkflowsFileExits2: a file with problems stops the worker before
// it starts anything, with every problem at its FILE:LINE:COL.
func TestBadWorkflowsFileExits2(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	path := filepath.Join(t.TempDir(), "workflows.yaml")
	if err := os.WriteFile(path, []byte(`workflows:
  sync-invoices:
    steps:
      - {name: fetch, type: htp}
      - {name: fetch, type: http, with: {method: GET}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		file string
		want []string
	}{
		{path, []string{"CAIRN_WORKFLOWS_FILE", path + `:4:29: workflow "sync-invoices": step "fetch": unknown step type "htp"`,
			path + `:5:16: workflow "sync-invoices": duplicate step name "fetch"`, path + ":5:41: ", "with.url: missing"}},
		{path + ".missing", []string{"CAIRN_WORKFLOWS_FILE", "no such file or directory"}},
	} {
		stdout, stderr, code := proctest.Run(t, worker(t), append(baseEnv(testkit.FreeAddr(t)), "CAIRN_HTTP_ADDR=",
			"CAIRN_WORKFLOWS_FILE="+tt.file), "")
		if code != 2 {
			t.Errorf("%s: exit code %d, want 2\nstderr:\n%s", tt.file, code, stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr does not contain %q:\n%s", tt.file, w, stderr)
			}
		}
		if strings.Contains(stderr, "EMBEDDED STORE") || stdout != "" {
			t.Errorf("%s: the worker started something\nstdout:\n%s\nstderr:\n%s", tt.file, stdout, stderr)
		}
	}
}
