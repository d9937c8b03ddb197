package proctest_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/proctest"
)

const timeout = 10 * time.Second

func TestMain(m *testing.M) {
	code := m.Run()
	if err := proctest.RemoveBuilds(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

func echoer(t *testing.T) string {
	t.Helper()
	return proctest.Build(t, "./testdata/echoer")
}

func TestBuild(t *testing.T) {
	t.Parallel()
	bin := echoer(t)
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("%s is not executable: %v", bin, fi.Mode())
	}
	if !strings.HasPrefix(bin, proctest.BuildDir()) {
		t.Errorf("binary %s is not in BuildDir() %s", bin, proctest.BuildDir())
	}

	// Cached: concurrent callers get the same binary.
	t.Run("cached", func(t *testing.T) {
		for i := range 4 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				if got := echoer(t); got != bin {
					t.Errorf("second Build = %s, want cached %s", got, bin)
				}
			})
		}
	})

	// An import path works too; it is a separate build of the same package,
	// so it gets its own file name.
	byImport := proctest.Build(t, "github.com/cairnhq/cairn/internal/proctest/testdata/echoer")
	if byImport == bin {
		t.Errorf("import path build reused the file of the relative path build: %s", bin)
	}
	if stdout, _, _ := proctest.Run(t, byImport, nil, ""); !strings.Contains(stdout, "ready") {
		t.Errorf("binary built from import path printed %q, want ready", stdout)
	}
}

func TestBuildFailure(t *testing.T) {
	t.Parallel()
	msg := catchFatal(t, func(tb testing.TB) { proctest.Build(tb, "./testdata/no-such-package") })
	if !strings.Contains(msg, "go build") || !strings.Contains(msg, "no-such-package") {
		t.Fatalf("Build of a missing package: fatal message %q, want the go build output", msg)
	}
	// The failure is cached and reported again.
	again := catchFatal(t, func(tb testing.TB) { proctest.Build(tb, "./testdata/no-such-package") })
	if again != msg {
		t.Fatalf("second Build failed with %q, want %q", again, msg)
	}
}

func TestKill(t *testing.T) {
	t.Parallel()
	p := proctest.Start(t, echoer(t), nil, "-sleep")
	p.WaitForOutput(t, "ready", timeout)
	if p.Exited() {
		t.Fatal("Exited() = true before Kill")
	}
	p.Kill(t)
	if !p.Exited() {
		t.Fatal("Exited() = false after Kill")
	}
	if code := p.Wait(t, timeout); code != -1 {
		t.Errorf("exit code after SIGKILL = %d, want -1", code)
	}
	if err := syscall.Kill(p.PID(), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(%d, 0) after Kill = %v, want ESRCH", p.PID(), err)
	}
	p.Kill(t) // no-op once exited
}

func TestWaitExitCode(t *testing.T) {
	t.Parallel()
	// stdin is /dev/null, so the echoer exits right after "ready".
	p := proctest.Start(t, echoer(t), nil, "-exit", "3")
	if code := p.Wait(t, timeout); code != 3 {
		t.Fatalf("exit code = %d, want 3; output:\n%s", code, p.Output())
	}
	if !p.Exited() {
		t.Fatal("Exited() = false after Wait")
	}
	if got := p.Output(); got != "ready\n" {
		t.Errorf("Output() = %q, want %q", got, "ready\n")
	}
	// The output file has the same content once the process has exited.
	b, err := os.ReadFile(p.OutputPath())
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != p.Output() {
		t.Errorf("output file %s = %q, want %q", p.OutputPath(), b, p.Output())
	}
}

func TestSignal(t *testing.T) {
	t.Parallel()
	p := proctest.Start(t, echoer(t), nil, "-sleep", "-exit", "7")
	p.WaitForOutput(t, "ready", timeout)
	p.Signal(t, syscall.SIGTERM)
	if code := p.Wait(t, timeout); code != 7 {
		t.Fatalf("exit code after SIGTERM = %d, want 7; output:\n%s", code, p.Output())
	}
	p.WaitForOutput(t, "terminating", timeout)

	msg := catchFatal(t, func(tb testing.TB) { p.Signal(tb, syscall.SIGTERM) })
	if !strings.Contains(msg, "already exited") {
		t.Errorf("Signal after exit: fatal message %q, want one saying it exited", msg)
	}
}

func TestOutputCombinesStreamsAndPassesEnv(t *testing.T) {
	t.Parallel()
	p := proctest.Start(t, echoer(t), []string{"PROCTEST_VALUE=hello"},
		"-sleep", "-stderr", "to stderr", "-env", "PROCTEST_VALUE")
	p.WaitForOutput(t, "ready", timeout)
	if want := "to stderr\nPROCTEST_VALUE=hello\nready\n"; p.Output() != want {
		t.Errorf("Output() = %q, want %q", p.Output(), want)
	}
	if p.Len() != len(p.Output()) {
		t.Errorf("Len() = %d, want %d", p.Len(), len(p.Output()))
	}
}

func TestWaitForOutputFrom(t *testing.T) {
	t.Parallel()
	p := proctest.Start(t, echoer(t), nil, "-sleep", "mark", "other", "mark")
	p.WaitForOutput(t, "ready", timeout)

	off := p.WaitForOutputFrom(t, 0, "mark", timeout)
	if off != len("mark") {
		t.Fatalf("first match ends at %d, want %d", off, len("mark"))
	}
	off = p.WaitForOutputFrom(t, off, "mark", timeout)
	if want := len("mark\nother\nmark"); off != want {
		t.Fatalf("second match ends at %d, want %d", off, want)
	}
	if got := p.WaitForOutputFrom(t, p.Len(), "", timeout); got != p.Len() {
		t.Fatalf("empty match at Len() = %d, want %d", got, p.Len())
	}

	// There is no third "mark": this fails once the (short) timeout passes.
	msg := catchFatal(t, func(tb testing.TB) { p.WaitForOutputFrom(tb, off, "mark", 100*time.Millisecond) })
	if !strings.Contains(msg, `did not print "mark"`) || !strings.Contains(msg, "ready") {
		t.Fatalf("WaitForOutputFrom timeout: fatal message %q, want the reason and the output tail", msg)
	}
}

func TestWaitForOutputFailsFastOnExit(t *testing.T) {
	t.Parallel()
	p := proctest.Start(t, echoer(t), nil, "-exit", "1")
	start := time.Now()
	msg := catchFatal(t, func(tb testing.TB) { p.WaitForOutput(tb, "never printed", time.Minute) })
	if !strings.Contains(msg, "without printing") || !strings.Contains(msg, "exit status 1") {
		t.Fatalf("WaitForOutput on an exited process: fatal message %q", msg)
	}
	if d := time.Since(start); d > timeout {
		t.Fatalf("WaitForOutput took %v to notice the exit", d)
	}
}

func TestWaitTimeout(t *testing.T) {
	t.Parallel()
	p := proctest.Start(t, echoer(t), nil, "-sleep")
	p.WaitForOutput(t, "ready", timeout)
	msg := catchFatal(t, func(tb testing.TB) { p.Wait(tb, 50*time.Millisecond) })
	if !strings.Contains(msg, "still running") {
		t.Fatalf("Wait timeout: fatal message %q", msg)
	}
}

func TestCleanupKillsAndLogsOnFailure(t *testing.T) {
	t.Parallel()
	f := &cleanupTB{fakeTB: fakeTB{TB: t}}
	p := proctest.Start(f, echoer(t), nil, "-sleep", "diagnostic line")
	p.WaitForOutput(t, "ready", timeout)

	f.runCleanups()
	if !p.Exited() {
		t.Fatal("process still running after cleanup")
	}
	if !strings.Contains(f.logs, "diagnostic line") {
		t.Fatalf("cleanup of a failed test logged %q, want the process output", f.logs)
	}
}

func TestCleanupKillsProcessGroup(t *testing.T) {
	t.Parallel()
	var pid int
	t.Run("sub", func(t *testing.T) {
		p := proctest.Start(t, echoer(t), nil, "-sleep")
		p.WaitForOutput(t, "ready", timeout)
		pid = p.PID()
	})
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process group %d still exists after the test's cleanup (kill: %v)", pid, err)
	}
}

func TestRun(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := proctest.Run(t, echoer(t), []string{"PROCTEST_VALUE=v"}, "a\nb\n",
		"-exit", "4", "-stderr", "warning", "-env", "PROCTEST_VALUE")
	if want := "PROCTEST_VALUE=v\nready\necho: a\necho: b\n"; stdout != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}
	if stderr != "warning\n" {
		t.Errorf("stderr = %q, want %q", stderr, "warning\n")
	}
	if code != 4 {
		t.Errorf("exit code = %d, want 4", code)
	}

	msg := catchFatal(t, func(tb testing.TB) { proctest.Run(tb, "/nonexistent/binary", nil, "") })
	if !strings.Contains(msg, "/nonexistent/binary") {
		t.Errorf("Run of a missing binary: fatal message %q", msg)
	}
}

// fakeTB turns fatal failures into a recoverable panic, so that tests can
// check the failure paths.
type fakeTB struct {
	testing.TB
	message string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatal(args ...any) {
	f.message = fmt.Sprint(args...)
	panic(f)
}

func (f *fakeTB) Fatalf(format string, args ...any) { f.Fatal(fmt.Sprintf(format, args...)) }

// catchFatal runs fn with a fakeTB wrapping t and returns its fatal message,
// or "" if fn did not fail.
func catchFatal(t *testing.T, fn func(tb testing.TB)) (msg string) {
	t.Helper()
	f := &fakeTB{TB: t}
	defer func() {
		if r := recover(); r != nil {
			if r != f {
				panic(r)
			}
			msg = f.message
		}
	}()
	fn(f)
	return ""
}

// cleanupTB is a fakeTB that reports itself as failed and collects cleanups
// and logs instead of passing them to the real test.
type cleanupTB struct {
	fakeTB
	cleanups []func()
	logs     string
}

func (c *cleanupTB) Cleanup(fn func())                 { c.cleanups = append(c.cleanups, fn) }
func (c *cleanupTB) Failed() bool                      { return true }
func (c *cleanupTB) Logf(format string, args ...any)   { c.logs += fmt.Sprintf(format, args...) + "\n" }
func (c *cleanupTB) Errorf(format string, args ...any) { c.TB.Errorf(format, args...) }

func (c *cleanupTB) runCleanups() {
	for _, fn := range slices.Backward(c.cleanups) {
		fn()
	}
}
