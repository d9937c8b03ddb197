package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/testkit"
)

func TestHelpExits0(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	bin := worker(t)
	for _, arg := range []string{"--help", "-h", "-help"} {
		stdout, stderr, code := proctest.Run(t, bin, baseEnv(testkit.FreeAddr(t)), "", arg)
		if code != 0 || stderr != "" {
			t.Errorf("worker %s: exit %d, stderr %q; want 0 and nothing", arg, code, stderr)
		}
		for _, s := range []string{"Usage: worker", "--dashboard-only", "--healthcheck", "--version", "Exit codes"} {
			if !strings.Contains(stdout, s) {
				t.Errorf("worker %s: stdout lacks %q:\n%s", arg, s, stdout)
			}
		}
	}
}

func TestBadFlagsExit2(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	bin := worker(t)
	for _, args := range [][]string{{"--bogus"}, {"--version=maybe"}, {"extra"}} {
		stdout, stderr, code := proctest.Run(t, bin, baseEnv(testkit.FreeAddr(t)), "", args...)
		if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "cairn worker: ") ||
			!strings.Contains(stderr, "Usage: worker") || strings.Contains(stderr, "EMBEDDED STORE") {
			t.Errorf("worker %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
		}
	}
}

func TestVersion(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	stdout, stderr, code := proctest.Run(t, worker(t), baseEnv(testkit.FreeAddr(t)), "", "--version")
	if code != 0 || stderr != "" || !regexp.MustCompile(`^worker \S+ \(go\S+ \w+/\w+\)\n$`).MatchString(stdout) {
		t.Errorf("worker --version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestMakeBuildSetsVersion: make build VERSION=... (what a release runs)
// builds a worker and an enqueue whose --version print that version.
func TestMakeBuildSetsVersion(t *testing.T) {
	testkit.SkipShort(t, "runs make build, which builds both binaries")
	t.Parallel()
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Fatal("make is not installed: apt-get install -y make (or make deps)")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "Makefile")); err != nil {
		t.Fatalf("no Makefile at the repository root %s: %v", root, err)
	}
	bin := t.TempDir()
	const v = "v1.2.3-maketest"
	if out, err := exec.Command(mk, "-C", root, "build", "VERSION="+v, "BIN="+bin).CombinedOutput(); err != nil {
		t.Fatalf("make build VERSION=%s: %v\n%s", v, err, out)
	}
	for _, prog := range []string{"worker", "enqueue"} {
		stdout, stderr, code := proctest.Run(t, filepath.Join(bin, prog), baseEnv(testkit.FreeAddr(t)), "", "--version")
		if want := regexp.MustCompile(`^` + prog + ` ` + regexp.QuoteMeta(v) + ` \(go\S+ \w+/\w+\)\n$`); code != 0 ||
			!want.MatchString(stdout) {
			t.Errorf("%s --version: exit %d, stdout %q, stderr %q; want %q", prog, code, stdout, stderr, want)
		}
	}
}

// TestDashboardURLIsLogged: the worker logs the dashboard's URL once it
// listens, and the URL serves the dashboard.
func TestDashboardURLIsLogged(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	env := append(baseEnv(testkit.FreeAddr(t)), "CAIRN_HTTP_ADDR=127.0.0.1:0")
	p := proctest.Start(t, worker(t), env)
	p.WaitForOutputFrom(t, 0, "worker started", waitTimeout)
	m := regexp.MustCompile(`msg="dashboard: (http://127\.0\.0\.1:\d+/)" url=(\S+)`).FindStringSubmatch(p.Output())
	if m == nil || m[1] != m[2] {
		t.Fatalf("no dashboard URL logged:\n%s", p.Output())
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m[1], nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<html") {
		t.Errorf("GET %s: %s\n%.300s", m[1], resp.Status, body)
	}
	p.Signal(t, syscall.SIGTERM)
	if code := p.Wait(t, waitTimeout); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0\n%s", code, p.Output())
	}
}
