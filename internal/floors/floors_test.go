package floors

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/cairnhq/cairn/"

// stack is Cairn's packages from the bottom floor up. A package may import
// packages of the floors below its own, never its own floor's or above.
var stack = []struct {
	floor string
	pkgs  []string
}{
	{"leaves: the asynq contract, the webhook format, small libraries", []string{
		"tasks", "webhook", "internal/regularfile", "internal/editdist", "internal/testsignal",
		"internal/outbox", "internal/embedded", "internal/facade", "internal/otelenv",
		"internal/redistest", "internal/proctest",
	}},
	{"state: every Redis key and script of Cairn", []string{"retrystate"}},
	{"the types the engine and the API share; webhook delivery", []string{
		"internal/core", "internal/webhookdelivery",
	}},
	{"maintenance: the reconciler's services", []string{"internal/maintenance"}},
	{"the engine: the attempt runtime, Client, Worker", []string{"internal/engine"}},
	{"the public API: a facade of aliases over the engine", []string{"workflow"}},
	{"test support on the engine", []string{"internal/testkit"}},
	{"public packages on the API", []string{"workflow/httpstep", "workflow/redisurl", "workflow/oteltrace"}},
	{"public packages on the API (2)", []string{
		"workflow/yamldef", "workflowtest", "dashboard", "metrics",
		// The demo workflows are a user's code: they use the public API.
		"internal/demo",
	}},
	{"the programs' libraries", []string{
		"cmd/internal/version", "cmd/internal/otelsetup", "cmd/internal/config",
	}},
	{"the programs' apps", []string{"cmd/internal/cli", "cmd/internal/workerapp"}},
	{"programs, end-to-end tests, benchmarks, generators", []string{
		"cmd/worker", "cmd/enqueue", "cmd/internal/e2e", "bench",
		"internal/doccheck", "internal/tools/facade", "internal/floors", "docs/examples/service",
		// The Grafana dashboard and alert rules, checked by its tests.
		"deploy",
	}},
}

// aboveAPI are the internal packages allowed to import the public API: the
// demo workflows, which are written as a user would write them.
var aboveAPI = []string{"internal/demo"}

// imports lists, for each package of the module, the module's packages its
// non-test files import.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(f[0], module)
		m[pkg] = nil
		for _, imp := range f[1:] {
			if rest, ok := strings.CutPrefix(imp, module); ok {
				m[pkg] = append(m[pkg], rest)
			}
		}
	}
	return m
}

func floorOf() map[string]int {
	f := map[string]int{}
	for i, fl := range stack {
		for _, p := range fl.pkgs {
			f[p] = i
		}
	}
	return f
}

// TestFloors fails when a package imports one on its own floor or above,
// or is on no floor.
func TestFloors(t *testing.T) {
	floor := floorOf()
	m := imports(t)
	if len(m) < 20 {
		t.Fatalf("go list found %d packages: want the module's", len(m))
	}
	for pkg, imps := range m {
		fp, ok := floor[pkg]
		if !ok {
			t.Errorf("%s is on no floor: place it in floors_test.go's stack", pkg)
			continue
		}
		for _, imp := range imps {
			if fi := floor[imp]; fi >= fp {
				t.Errorf("%s (floor %d, %s) imports %s (floor %d, %s): imports go down",
					pkg, fp, stack[fp].floor, imp, fi, stack[fi].floor)
			}
		}
	}
	for p := range floor {
		if _, ok := m[p]; !ok {
			t.Errorf("the stack lists %s, which is not a package of the module", p)
		}
	}
}

// TestInternalBelowAPI: internal/ holds what is under the public API (but
// the demo workflows), and no two top-level folders import each other.
func TestInternalBelowAPI(t *testing.T) {
	floor := floorOf()
	api := floor["workflow"]
	m := imports(t)
	top := func(p string) string { return strings.SplitN(p, "/", 2)[0] }
	uses := map[[2]string]bool{}
	for pkg, imps := range m {
		if slices.Contains(aboveAPI, pkg) {
			continue
		}
		for _, imp := range imps {
			if strings.HasPrefix(pkg, "internal/") && floor[imp] >= api {
				t.Errorf("%s imports %s: internal/ is under the public API", pkg, imp)
			}
			if a, b := top(pkg), top(imp); a != b {
				uses[[2]string{a, b}] = true
			}
		}
	}
	for e := range uses {
		if uses[[2]string{e[1], e[0]}] && e[0] < e[1] {
			t.Errorf("top-level folders %s and %s import each other", e[0], e[1])
		}
	}
}
