package workerapp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/testkit"
)

// TestBadWorkflowsFileExits2: a file with problems stops the worker before
// it starts anything, with every problem at its FILE:LINE:COL.
func TestBadWorkflowsFileExits2(t *testing.T) {
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
		stdout, stderr, code := runMain(t, append(testEnv(testkit.FreeAddr(t)), "CAIRN_HTTP_ADDR=",
			"CAIRN_WORKFLOWS_FILE="+tt.file))
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
