package proctest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	// pollInterval is how often WaitForOutput checks the output.
	pollInterval = 20 * time.Millisecond
	// killTimeout bounds how long Kill and the cleanup wait for an exit
	// after SIGKILL.
	killTimeout = 10 * time.Second
	// waitDelay bounds how long output is still collected after the process
	// exited, in case a descendant that left the process group keeps the
	// output pipe open.
	waitDelay = 5 * time.Second
	// runTimeout bounds a Run.
	runTimeout = 60 * time.Second
	// tailLines is how many output lines failure messages and logs show.
	tailLines = 100
)

// procCounter numbers output files so that each Start gets its own.
var procCounter atomic.Int64

// Proc is a running (or exited) child process started by [Start]. Its
// methods may be called from any goroutine.
type Proc struct {
	name    string // binary base name, for messages
	cmd     *exec.Cmd
	out     *output
	outPath string
	done    chan struct{} // closed once the process is reaped and all output collected
	waitErr error         // result of cmd.Wait; valid once done is closed
}

// Start starts bin with args and with env appended to os.Environ(), in its
// own process group and with stdin connected to /dev/null. Its combined
// stdout and stderr is kept in memory (see [Proc.Output]) and written to a
// file in t.TempDir() (see [Proc.OutputPath]).
//
// A t.Cleanup kills the process group if the process is still running and,
// if the test failed, logs the last 100 lines of its output.
func Start(t testing.TB, bin string, env []string, args ...string) *Proc {
	t.Helper()
	name := filepath.Base(bin)
	outPath := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d.log", name, procCounter.Add(1)))
	f, err := os.Create(outPath)
	if err != nil {
		t.Fatalf("proctest: %v", err)
	}
	out := &output{file: f}

	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	// The same comparable Writer for both makes exec use a single pipe, so
	// stdout and stderr interleave in the order they were written.
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		t.Fatalf("proctest: starting %s: %v", bin, err)
	}

	p := &Proc{name: name, cmd: cmd, out: out, outPath: outPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		out.closeFile()
		close(p.done)
	}()

	t.Cleanup(func() {
		if !p.Exited() {
			if err := p.kill(); err != nil {
				t.Errorf("proctest: cleanup: %v", err)
			}
		}
		if t.Failed() {
			t.Logf("proctest: %s (pid %d, %s) output, last %d lines:\n%s",
				p.name, p.PID(), p.status(), tailLines, tail(p.Output()))
		}
	})
	return p
}

// sysProcAttr puts the child in its own process group, so that Kill can
// reach its descendants, and has it killed if the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// PID returns the process id. It is also the process group id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// OutputPath returns the file the process's output is written to. It is in
// t.TempDir() of the test that started the process.
func (p *Proc) OutputPath() string { return p.outPath }

// Output returns all output (stdout and stderr combined) so far.
func (p *Proc) Output() string { return p.out.String() }

// Len returns the current length of the output in bytes, for use as an
// offset with [Proc.WaitForOutputFrom].
func (p *Proc) Len() int { return p.out.Len() }

// Exited reports whether the process has exited. Once it returns true the
// output is complete.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// WaitForOutput waits until the output contains substr. It fails the test
// if the process exits without printing it or timeout passes.
func (p *Proc) WaitForOutput(t testing.TB, substr string, timeout time.Duration) {
	t.Helper()
	p.WaitForOutputFrom(t, 0, substr, timeout)
}

// WaitForOutputFrom is like [Proc.WaitForOutput] but only considers output
// from byte offset on (typically an earlier [Proc.Len] or
// WaitForOutputFrom result). It returns the offset just past the match.
func (p *Proc) WaitForOutputFrom(t testing.TB, offset int, substr string, timeout time.Duration) int {
	t.Helper()
	if offset < 0 {
		t.Fatalf("proctest: WaitForOutputFrom: negative offset %d", offset)
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		// Check for exit before searching: output is complete once exited,
		// so a miss after an exit is final.
		exited := p.Exited()
		if end, ok := p.out.find(offset, substr); ok {
			return end
		}
		if exited {
			t.Fatalf("proctest: %s (pid %d) %s without printing %q after offset %d; output, last %d lines:\n%s",
				p.name, p.PID(), p.status(), substr, offset, tailLines, tail(p.Output()))
		}
		select {
		case <-ticker.C:
		case <-p.done:
		case <-deadline.C:
			if end, ok := p.out.find(offset, substr); ok {
				return end
			}
			t.Fatalf("proctest: %s (pid %d) did not print %q after offset %d within %v; output, last %d lines:\n%s",
				p.name, p.PID(), substr, offset, timeout, tailLines, tail(p.Output()))
		}
	}
}

// Kill sends SIGKILL to the process group and waits for the process to
// exit. It does nothing if the process has already exited.
func (p *Proc) Kill(t testing.TB) {
	t.Helper()
	if err := p.kill(); err != nil {
		t.Fatal(err)
	}
}

func (p *Proc) kill() error {
	// Signal the group only while the leader is unreaped: after that its pid,
	// and so the group id, may be reused by an unrelated process.
	if !p.Exited() {
		if err := syscall.Kill(-p.PID(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("proctest: killing %s (pid %d): %w", p.name, p.PID(), err)
		}
	}
	timer := time.NewTimer(killTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
		return fmt.Errorf("proctest: %s (pid %d) did not exit within %v of SIGKILL", p.name, p.PID(), killTimeout)
	}
}

// Signal sends sig to the process (not to its group). It fails the test if
// the process has already exited.
func (p *Proc) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			t.Fatalf("proctest: signal %v to %s (pid %d): process has already exited (%s)", sig, p.name, p.PID(), p.status())
		}
		t.Fatalf("proctest: signal %v to %s (pid %d): %v", sig, p.name, p.PID(), err)
	}
}

// Wait waits for the process to exit and returns its exit code, which is
// -1 if it was killed by a signal. It fails the test if the process is
// still running after timeout.
func (p *Proc) Wait(t testing.TB, timeout time.Duration) (exitCode int) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-timer.C:
		t.Fatalf("proctest: %s (pid %d) still running after %v; output, last %d lines:\n%s",
			p.name, p.PID(), timeout, tailLines, tail(p.Output()))
		return 0 // unreachable
	}
}

// status describes the process state for messages.
func (p *Proc) status() string {
	if !p.Exited() {
		return "running"
	}
	if p.cmd.ProcessState == nil {
		return fmt.Sprintf("wait failed: %v", p.waitErr)
	}
	return "exited: " + p.cmd.ProcessState.String()
}

// Run runs bin with args, env appended to os.Environ() and stdin as its
// standard input, and returns its stdout, stderr and exit code (-1 if it was
// killed by a signal). It fails the test if the command cannot be started or
// does not finish within 60 seconds.
func Run(t testing.TB, bin string, env []string, stdin string, args ...string) (stdout, stderr string, exitCode int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()

	var outBuf, errBuf bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout = &outBuf
	cmd.Stderr = &errBuf
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay

	err := cmd.Run()
	stdout, stderr = outBuf.String(), errBuf.String()
	if ctx.Err() != nil {
		t.Fatalf("proctest: %s did not finish within %v\nstdout:\n%s\nstderr:\n%s",
			strings.Join(cmd.Args, " "), runTimeout, tail(stdout), tail(stderr))
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("proctest: running %s: %v\nstdout:\n%s\nstderr:\n%s",
			strings.Join(cmd.Args, " "), err, tail(stdout), tail(stderr))
	}
	return stdout, stderr, cmd.ProcessState.ExitCode()
}

// output collects a process's output in memory and in a file.
type output struct {
	mu      sync.Mutex
	buf     []byte
	file    *os.File // nil once closed
	fileErr error    // first error writing file; further writes are skipped
}

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(o.buf, b...)
	if o.file != nil && o.fileErr == nil {
		_, o.fileErr = o.file.Write(b)
	}
	return len(b), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.buf)
}

func (o *output) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.buf)
}

// find looks for substr in the output from offset on and returns the offset
// just past the first match.
func (o *output) find(offset int, substr string) (end int, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if offset > len(o.buf) {
		return 0, false
	}
	i := bytes.Index(o.buf[offset:], []byte(substr))
	if i < 0 {
		return 0, false
	}
	return offset + i + len(substr), true
}

func (o *output) closeFile() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.file != nil {
		_ = o.file.Close()
		o.file = nil
	}
}

// tail returns the last tailLines lines of s.
func tail(s string) string {
	const n = tailLines
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "(no output)"
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
