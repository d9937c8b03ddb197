package main_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// needsBinary is what the tests need that -short leaves out.
const needsBinary = "builds and runs the enqueue binary"

func enqueue(t *testing.T) string {
	t.Helper()
	return proctest.Build(t, "github.com/cairnhq/cairn/cmd/enqueue")
}

func TestBinaryHelp(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	stdout, stderr, code := proctest.Run(t, enqueue(t), nil, "", "help")
	if code != 0 || stderr != "" {
		t.Fatalf("help: exit %d, stderr %q", code, stderr)
	}
	for _, s := range []string{"Usage: enqueue <command>", "start <workflow>", "Exit codes:", "CAIRN_REDIS_URL"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("help output lacks %q:\n%s", s, stdout)
		}
	}
}

func TestBinaryUnknownCommand(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	stdout, stderr, code := proctest.Run(t, enqueue(t), nil, "", "frobnicate")
	if code != 2 || stdout != "" || stderr != "enqueue: unknown command \"frobnicate\" (run \"enqueue help\" for usage)\n" {
		t.Fatalf("unknown command: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestBinaryRedisUnreachable checks that go-redis's own logging does not
// add lines to the one-line error.
func TestBinaryRedisUnreachable(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	addr := testkit.FreeAddr(t)
	bin := enqueue(t)
	start := time.Now()
	stdout, stderr, code := proctest.Run(t, bin, []string{"CAIRN_REDIS_URL=redis://" + addr}, "", "list")
	if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 ||
		!strings.HasPrefix(stderr, "enqueue: cannot reach Redis at "+addr+": ") {
		t.Fatalf("unreachable Redis: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// Nothing listens there: the connection is refused at once. The CLI
	// waits for Redis at most its ping timeout (3s, cmd/internal/cli's
	// pingTimeout) whatever happens; twice that, and 5s to start the
	// process on a loaded machine, is a ceiling only a CLI that waits on
	// (go-redis's retries, a dial timeout per attempt) misses.
	const pingTimeout = 3 * time.Second
	if took := time.Since(start); took > 2*pingTimeout+5*time.Second {
		t.Errorf("took %v to report an unreachable Redis", took)
	}
}

// TestBinaryUnknownRun runs the binary against a real Redis.
func TestBinaryUnknownRun(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	srv := redistest.Shared(t)
	id := workflow.NewRunID(time.Now())
	stdout, stderr, code := proctest.Run(t, enqueue(t),
		[]string{"CAIRN_REDIS_URL=" + srv.URL(), "CAIRN_QUEUE=binary_unknown_run"}, "", "status", id)
	if code != 2 || stdout != "" || stderr != "enqueue: run not found: "+id+"\n" {
		t.Fatalf("status of an unknown run: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = proctest.Run(t, enqueue(t),
		[]string{"CAIRN_REDIS_URL=" + srv.URL(), "CAIRN_QUEUE=binary_unknown_run"}, "", "list", "--json")
	if code != 0 || stdout != "[]\n" || stderr != "" {
		t.Fatalf("list of an empty queue: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestBinaryStopsReadingStdinOnSignal: "start --input @-" reading a pipe
// that stays open stops on SIGINT and on SIGTERM (which the binary catches
// to cancel its context) with exit 1 and one line, instead of waiting for
// the pipe to close.
func TestBinaryStopsReadingStdinOnSignal(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	bin := enqueue(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pw.Close()
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, "start", "demo", "--input", "@-")
			// No Redis is needed: the input is read before connecting.
			cmd.Env = []string{"CAIRN_REDIS_URL=redis://127.0.0.1:1/0"}
			cmd.Stdin, cmd.Stdout, cmd.Stderr = pr, &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pr.Close()
			exited := make(chan struct{})
			go func() {
				_ = cmd.Wait()
				close(exited)
			}()
			t.Cleanup(func() {
				select {
				case <-exited:
				default:
					_ = cmd.Process.Kill()
					<-exited
				}
			})

			// The binary is reading stdin, its signal handler installed,
			// once it has taken in part of more than a pipe's buffer (64
			// KiB on Linux) of input: the write returns only then.
			wrote := make(chan error, 1)
			go func() {
				_, err := pw.Write(bytes.Repeat([]byte(" "), 512<<10))
				wrote <- err
			}()
			select {
			case err := <-wrote:
				if err != nil {
					t.Fatalf("writing stdin: %v", err)
				}
			case <-exited:
				t.Fatalf("exited before reading its input: %v, stderr %q", cmd.ProcessState, stderr.String())
			case <-time.After(30 * time.Second):
				t.Fatal("the binary does not read its stdin")
			}

			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				t.Fatalf("still running 10s after %v", sig)
			}
			const want = "enqueue: interrupted while reading --input @- (stdin): no run was started\n"
			if code := cmd.ProcessState.ExitCode(); code != 1 || stdout.Len() != 0 || stderr.String() != want {
				t.Errorf("after %v: exit %d (%v), stdout %q, stderr %q; want exit 1 and %q",
					sig, code, cmd.ProcessState, stdout.String(), stderr.String(), want)
			}
		})
	}
}

// TestBinaryVersion: --version prints the version the build recorded, or
// the one a release sets with -ldflags -X.
func TestBinaryVersion(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	stdout, stderr, code := proctest.Run(t, enqueue(t), nil, "", "--version")
	if code != 0 || stderr != "" || !regexp.MustCompile(`^enqueue \S+ \(go\S+ \w+/\w+\)\n$`).MatchString(stdout) {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to build with -ldflags")
	}
	bin := filepath.Join(t.TempDir(), "enqueue")
	build := exec.Command(gotool, "build", "-o", bin,
		"-ldflags=-X github.com/cairnhq/cairn/cmd/internal/version.Version=v9.8.7-test", "github.com/cairnhq/cairn/cmd/enqueue")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", build.Args, err, out)
	}
	stdout, stderr, code = proctest.Run(t, bin, nil, "", "--version")
	if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "enqueue v9.8.7-test (go") {
		t.Errorf("--version of a build with -ldflags -X: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestBinaryHelpFlags: --help exits 0 with the usage on stdout; an
// unknown flag exits 2.
func TestBinaryHelpFlags(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	bin := enqueue(t)
	for _, arg := range []string{"--help", "-h"} {
		stdout, stderr, code := proctest.Run(t, bin, nil, "", arg)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage: enqueue <command>") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", arg, code, stdout, stderr)
		}
	}
	stdout, stderr, code := proctest.Run(t, bin, nil, "", "--bogus")
	if code != 2 || stdout != "" || stderr != "enqueue: unknown flag \"--bogus\" (run \"enqueue help\" for usage)\n" {
		t.Errorf("--bogus: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
