package proctest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// EnvBuildRace names the environment variable that, when set to "1", makes
// [Build] compile with -race.
const EnvBuildRace = "CAIRN_TEST_BUILD_RACE"

// builds caches the binaries built by this test process.
var builds struct {
	mu    sync.Mutex
	byPkg map[string]*build // keyed by import path or absolute directory
	names map[string]bool   // binary file names in use
}

// build is one package's build, done at most once.
type build struct {
	once sync.Once
	bin  string
	err  error
}

// Build compiles pkg with `go build` and returns the path of the binary.
// pkg is an import path ("github.com/cairnhq/cairn/cmd/worker") or a
// filesystem path relative to the test's package directory
// ("./testdata/echoer") or absolute. Each package is built once per test
// binary; concurrent callers wait for the same build, and if it failed they
// all fail with the compiler output.
//
// The go command is taken from PATH, or from runtime.GOROOT()/bin. Binaries
// are built with -race if CAIRN_TEST_BUILD_RACE=1.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	key, name, err := buildKey(pkg)
	if err != nil {
		t.Fatalf("proctest: Build(%q): %v", pkg, err)
	}

	builds.mu.Lock()
	if builds.byPkg == nil {
		builds.byPkg = make(map[string]*build)
		builds.names = make(map[string]bool)
	}
	b := builds.byPkg[key]
	if b == nil {
		b = &build{bin: filepath.Join(BuildDir(), uniqueName(name))}
		builds.byPkg[key] = b
	}
	builds.mu.Unlock()

	b.once.Do(func() { b.err = goBuild(b.bin, pkg) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// BuildDir returns the directory [Build] puts binaries in: one per test
// process, under os.TempDir().
func BuildDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("cairn-proctest-%d", os.Getpid()))
}

// RemoveBuilds deletes [BuildDir]. Call it from TestMain after m.Run; the
// binaries cannot be used afterwards.
func RemoveBuilds() error {
	return os.RemoveAll(BuildDir())
}

// buildKey returns the cache key and the binary name for pkg.
func buildKey(pkg string) (key, name string, err error) {
	if pkg == "" {
		return "", "", fmt.Errorf("empty package")
	}
	if filepath.IsAbs(pkg) || pkg == "." || pkg == ".." ||
		strings.HasPrefix(pkg, "./") || strings.HasPrefix(pkg, "../") {
		dir, err := filepath.Abs(pkg)
		if err != nil {
			return "", "", err
		}
		return dir, filepath.Base(dir), nil
	}
	return pkg, path.Base(pkg), nil
}

// uniqueName returns name, or name with a numeric suffix if another package
// with the same last path element was built already. builds.mu must be held.
func uniqueName(name string) string {
	unique := name
	for i := 2; builds.names[unique]; i++ {
		unique = fmt.Sprintf("%s-%d", name, i)
	}
	builds.names[unique] = true
	return unique
}

// goBuild runs `go build -o bin pkg` in the current directory.
func goBuild(bin, pkg string) error {
	if err := os.MkdirAll(filepath.Dir(bin), 0o750); err != nil {
		return fmt.Errorf("proctest: %w", err)
	}
	args := []string{"build", "-o", bin}
	if os.Getenv(EnvBuildRace) == "1" {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	tool, err := goTool()
	if err != nil {
		return err
	}
	cmd := exec.Command(tool, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("proctest: %s failed: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return nil
}

// goTool returns the go command to build with: go on PATH, else under
// $GOROOT, else in Go's default install location. An error says how to
// install Go when there is none.
func goTool() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	for _, root := range []string{os.Getenv("GOROOT"), "/usr/local/go"} {
		if root == "" {
			continue
		}
		if p := filepath.Join(root, "bin", "go"); checkFile(p) == nil {
			return p, nil
		}
	}
	return "", errors.New("proctest: the go command is not on PATH, nor under $GOROOT or /usr/local/go; install Go 1.26 (https://go.dev/doc/install) and put its bin directory on PATH")
}

func checkFile(p string) error {
	fi, err := os.Stat(p) //nolint:gosec // a candidate path of the go command, from PATH or GOROOT
	if err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", p)
	}
	return err
}
