package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// EnvServer names the environment variable holding an explicit path to the
// redis-server binary.
const EnvServer = "CAIRN_REDIS_SERVER"

const (
	// readyTimeout bounds how long a freshly started server may take to
	// answer PING (including loading its AOF).
	readyTimeout = 10 * time.Second
	// exitTimeout bounds how long Kill and Stop wait for the process to exit.
	exitTimeout = 10 * time.Second
	// rebindTimeout bounds how long Restart keeps retrying a port that is
	// still in use.
	rebindTimeout = 5 * time.Second
	// startAttempts is how many free ports Start tries before giving up.
	startAttempts = 5
	// pollInterval is the delay between readiness and rebind probes.
	pollInterval = 10 * time.Millisecond
	// logTailLines is how many lines of the Redis log go into failures.
	logTailLines = 40
)

// Options configures a server started with [Start]. The zero value (or a nil
// *Options) gives a server without any persistence.
type Options struct {
	// AppendOnly enables the append-only file (--appendonly yes).
	AppendOnly bool
	// AppendFsync is the AOF fsync policy: "always", "everysec" or "no".
	// It defaults to "everysec" when AppendOnly is set.
	AppendFsync string
	// Args are extra redis-server arguments appended after the defaults,
	// so they override them, e.g. {"--maxmemory-policy", "noeviction"}.
	Args []string
	// Wrapper, when set, is a command and its arguments that run
	// redis-server, given its path and arguments after them: for example
	// {"valgrind", "--tool=callgrind"}. The wrapper must run redis-server in
	// its own process (as valgrind does), so that the server answering
	// is the process started.
	Wrapper []string
	// ReadyTimeout bounds how long the server may take to answer PING
	// after a start; default 10s (more under a slow wrapper).
	ReadyTimeout time.Duration
	// Cluster runs the server as a Redis Cluster node (cluster-enabled
	// yes), its nodes.conf in its data directory and its cluster bus on its
	// port + 10000 (both kept across restarts). [StartCluster] makes a
	// cluster of such nodes, [StartClusterNode] a cluster of one.
	Cluster bool
	// SentinelConfig, when set, runs the server as a Sentinel
	// (redis-server sentinel.conf --sentinel): sentinel.conf, in its data
	// directory, starts with this text (sentinel monitor ... lines), and
	// the Sentinel rewrites it as it learns, so a restart keeps what it
	// knew. Persistence options do not apply. [StartSentinel] makes a
	// master, its replicas and their sentinels.
	SentinelConfig string
}

// Server is a redis-server process owned by a test. Its methods may be
// called from any goroutine, but Kill, Stop and Restart of one server must
// not race each other.
type Server struct {
	bin    string
	dir    string
	port   int
	opts   Options
	shared bool

	mu   sync.Mutex
	proc *process // current (possibly exited) process; nil before the first start
}

// process is one run of redis-server.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and been reaped
	err  error         // result of cmd.Wait; valid once done is closed
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start starts a new redis-server on a free loopback port with its data in
// t.TempDir(), waits until it answers PING and registers a t.Cleanup that
// kills it. opts may be nil. Start fails the test if redis-server cannot be
// found or does not become ready.
func Start(t testing.TB, opts *Options) *Server {
	t.Helper()
	bin, err := findServer()
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(bin, t.TempDir(), opts)
	t.Cleanup(func() {
		if err := s.kill(); err != nil {
			t.Errorf("redistest: cleanup: %v", err)
		}
	})
	if err := s.startFreePort(); err != nil {
		t.Fatal(err)
	}
	return s
}

func newServer(bin, dir string, opts *Options) *Server {
	s := &Server{bin: bin, dir: dir}
	if opts != nil {
		s.opts = *opts
		s.opts.Args = append([]string(nil), opts.Args...)
		s.opts.Wrapper = append([]string(nil), opts.Wrapper...)
	}
	if s.opts.ReadyTimeout <= 0 {
		s.opts.ReadyTimeout = readyTimeout
	}
	if s.opts.AppendOnly && s.opts.AppendFsync == "" {
		s.opts.AppendFsync = "everysec"
	}
	return s
}

// Addr returns the server address, "127.0.0.1:PORT".
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Port returns the TCP port the server listens on. It does not change
// across restarts.
func (s *Server) Port() int { return s.port }

// URL returns a redis:// URL for database 0 of the server.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Dir returns the server's data directory (its --dir). It does not change
// across restarts.
func (s *Server) Dir() string { return s.dir }

// LogPath returns the path of the server's log file.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "redis.log") }

// Client returns a new go-redis client for database 0 of the server. The
// client is closed by a t.Cleanup. It reconnects on its own after the
// server is restarted.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Running reports whether the server process is currently alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.proc.exited()
}

// PID returns the process id of the current (or last) server process.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Kill sends SIGKILL to the server and waits for it to exit. Nothing is
// saved: only what already reached the AOF survives. Kill is a no-op if the
// server is not running.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.mustNotBeShared(t, "Kill")
	if err := s.kill(); err != nil {
		t.Fatal(err)
	}
}

// Freeze stops the server with SIGSTOP: it keeps its connections and its
// data but answers nothing until [Server.Thaw], as a server stuck in a long
// fork, a swap storm or a paused VM would. Commands clients send meanwhile
// wait in the socket buffers and run when the server is thawed, whether or
// not their clients still wait for the replies. A t.Cleanup thaws the
// server, so that the test's other cleanups can stop it.
func (s *Server) Freeze(t testing.TB) {
	t.Helper()
	s.mustNotBeShared(t, "Freeze")
	if err := s.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.signal(syscall.SIGCONT) })
}

// Thaw resumes a server stopped by [Server.Freeze] with SIGCONT.
func (s *Server) Thaw(t testing.TB) {
	t.Helper()
	if err := s.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return fmt.Errorf("redistest: %v: the server is not running", sig)
	}
	return s.proc.cmd.Process.Signal(sig)
}

// Stop shuts the server down gracefully with SIGTERM and waits for it to
// exit. With appendonly the AOF is flushed; since the server runs with
// --save "" no RDB snapshot is written. Stop is a no-op if the server is not
// running, and fails the test if the server does not exit cleanly.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.mustNotBeShared(t, "Stop")
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
}

// Restart starts the server again on the same port with the same data
// directory and configuration, and waits until it is ready (which includes
// loading the AOF, if any). A running server is stopped with [Server.Stop]
// first.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mustNotBeShared(t, "Restart")
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.restart(); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) mustNotBeShared(t testing.TB, method string) {
	t.Helper()
	if s.shared {
		t.Fatalf("redistest: %s called on the shared server; use redistest.Start for a server the test may %s", method, strings.ToLower(method))
	}
}

// fallbackPaths are tried when redis-server is not on PATH.
var fallbackPaths = []string{"/usr/bin/redis-server", "/usr/local/bin/redis-server"}

// findServer locates the redis-server binary.
func findServer() (string, error) {
	if p := os.Getenv(EnvServer); p != "" {
		if err := checkExecutable(p); err != nil {
			return "", fmt.Errorf("redistest: %s=%q is not usable: %w", EnvServer, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	for _, p := range fallbackPaths {
		if checkExecutable(p) == nil {
			return p, nil
		}
	}
	return "", errors.New("redis-server not found: install it with `apt-get install -y redis-server` (Debian/Ubuntu) or `brew install redis`; set " + EnvServer + " to its path")
}

func checkExecutable(path string) error {
	fi, err := os.Stat(path) //nolint:gosec // the redis-server binary the test environment names
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return errors.New("not executable")
	}
	return nil
}

// errPortInUse reports that redis-server could not bind its port.
var errPortInUse = errors.New("port already in use")

// startFreePort starts the server on a fresh free port, retrying with
// another port if the chosen one was taken in between.
func (s *Server) startFreePort() error {
	var err error
	for range startAttempts {
		var port int
		if s.opts.Cluster {
			port, err = freeClusterPort()
		} else {
			port, err = freePort()
		}
		if err != nil {
			return fmt.Errorf("redistest: finding a free port: %w", err)
		}
		s.port = port
		if s.opts.SentinelConfig != "" {
			if err := os.WriteFile(s.sentinelConfPath(), []byte(s.opts.SentinelConfig+"\n"), 0o600); err != nil {
				return fmt.Errorf("redistest: %w", err)
			}
		}
		if err = s.launch(); !errors.Is(err, errPortInUse) {
			return err
		}
	}
	return fmt.Errorf("redistest: giving up after %d attempts: %w", startAttempts, err)
}

// restart starts the server again on its existing port, retrying for a
// while if the port is still in use.
func (s *Server) restart() error {
	deadline := time.Now().Add(rebindTimeout)
	for {
		err := s.launch()
		if !errors.Is(err, errPortInUse) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pollInterval)
	}
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("redistest: a TCP listener on %s", l.Addr())
	}
	return addr.Port, nil
}

// sentinelConfPath is the configuration file of a Sentinel.
func (s *Server) sentinelConfPath() string { return filepath.Join(s.dir, "sentinel.conf") }

// clusterBusOffset is the distance from a cluster node's port to its
// cluster bus port (Redis's default; cluster-port, which changes it, is
// Redis 7's).
const clusterBusOffset = 10000

// freeClusterPort returns a loopback port that is free, like the port
// clusterBusOffset above it.
func freeClusterPort() (int, error) {
	for range 100 {
		port := 15000 + rand.IntN(15000)
		a, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+clusterBusOffset)))
		_ = a.Close()
		if err != nil {
			continue
		}
		_ = b.Close()
		return port, nil
	}
	return 0, errors.New("no free pair of ports (port and port+10000) in 100 tries")
}

// args returns the redis-server command line for the server.
func (s *Server) args() []string {
	var args []string
	if s.opts.SentinelConfig != "" {
		args = append(args, s.sentinelConfPath(), "--sentinel")
	}
	args = append(args,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--logfile", s.LogPath(),
		"--daemonize", "no",
	)
	if s.opts.Cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(s.dir, "nodes.conf"))
	}
	if s.opts.AppendOnly {
		args = append(args, "--appendonly", "yes")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if s.opts.AppendFsync != "" {
		args = append(args, "--appendfsync", s.opts.AppendFsync)
	}
	return append(args, s.opts.Args...)
}

// launch starts one redis-server process on s.port and waits until it is
// ready. It returns an error wrapping errPortInUse if the port was taken.
func (s *Server) launch() error {
	logOffset := fileSize(s.LogPath())
	// redis-server reports command-line and config errors on stdout before
	// it opens its log file, so keep that output too.
	stdout, err := os.OpenFile(filepath.Join(s.dir, "redis.stdout"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	defer stdout.Close() // the child has its own copy
	stdoutOffset := fileSize(stdout.Name())

	cmd := exec.Command(s.bin, s.args()...)
	if w := s.opts.Wrapper; len(w) > 0 {
		cmd = exec.Command(w[0], append(append(w[1:len(w):len(w)], s.bin), s.args()...)...)
	}
	cmd.Dir = s.dir
	cmd.Stdout = stdout
	cmd.Stderr = stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // signals to the test's group do not reach it; we kill the group
		Pdeathsig: syscall.SIGKILL, // dies with the test binary
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: starting %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()

	err = waitReady(s.Addr(), p, s.opts.ReadyTimeout)
	if err == nil {
		return nil
	}
	// Make sure a half-started server does not linger, then explain.
	_ = killGroup(p)
	<-p.done
	log := readFrom(s.LogPath(), logOffset)
	if strings.Contains(log, "Address already in use") || errors.Is(err, errPortInUse) {
		return fmt.Errorf("redistest: port %d: %w", s.port, errPortInUse)
	}
	return fmt.Errorf("redistest: redis-server on %s did not become ready: %w\nredis-server output:\n%s\nredis log (%s):\n%s",
		s.Addr(), err, tail(readFrom(stdout.Name(), stdoutOffset), logTailLines), s.LogPath(), tail(log, logTailLines))
}

// waitReady polls addr with PING until the server answers +PONG, and then
// checks that the server answering is process p and not some other server
// that grabbed the port first.
func waitReady(addr string, p *process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		select {
		case <-p.done:
			return fmt.Errorf("process exited: %w", p.err)
		default:
		}
		pid, err := pingPID(addr)
		if err == nil {
			if pid != p.cmd.Process.Pid {
				return fmt.Errorf("%w: another server (pid %d) answers on %s", errPortInUse, pid, addr)
			}
			return nil
		}
		lastErr = err
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v: %w", timeout, lastErr)
		}
		time.Sleep(pollInterval)
	}
}

// pingPID sends PING to the server at addr and, if it answers +PONG,
// returns its process id from INFO server.
func pingPID(addr string) (int, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)

	if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
		return 0, err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if line = strings.TrimSpace(line); line != "+PONG" {
		return 0, fmt.Errorf("PING replied %q", line) // e.g. -LOADING while reading the AOF
	}

	if _, err := io.WriteString(conn, "INFO server\r\n"); err != nil {
		return 0, err
	}
	header, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(header), "$"))
	if err != nil || !strings.HasPrefix(header, "$") {
		return 0, fmt.Errorf("INFO replied %q", strings.TrimSpace(header))
	}
	body := make([]byte, n+2) // payload plus CRLF
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for l := range strings.SplitSeq(string(body), "\r\n") {
		if v, ok := strings.CutPrefix(l, "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// current returns the current process if it is still running.
func (s *Server) current() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return nil
	}
	return s.proc
}

// kill SIGKILLs the server's process group and waits for the exit.
func (s *Server) kill() error {
	p := s.current()
	if p == nil {
		return nil
	}
	if err := killGroup(p); err != nil {
		return fmt.Errorf("redistest: killing redis-server on port %d: %w", s.port, err)
	}
	return s.waitExit(p, "SIGKILL")
}

// stop sends SIGTERM and waits for a clean exit. If the server does not
// exit in time it is killed and an error returned.
func (s *Server) stop() error {
	p := s.current()
	if p == nil {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redistest: stopping redis-server on port %d: %w", s.port, err)
	}
	if err := s.waitExit(p, "SIGTERM"); err != nil {
		_ = killGroup(p)
		return err
	}
	// On SIGTERM Redis itself kills any rewrite or save child it has forked.
	if p.err != nil {
		return fmt.Errorf("redistest: redis-server on port %d exited uncleanly after SIGTERM: %w\nredis log (%s):\n%s",
			s.port, p.err, s.LogPath(), tail(readFrom(s.LogPath(), 0), logTailLines))
	}
	return nil
}

func (s *Server) waitExit(p *process, what string) error {
	timer := time.NewTimer(exitTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
		return fmt.Errorf("redistest: redis-server on port %d (pid %d) did not exit within %v of %s", s.port, p.cmd.Process.Pid, exitTimeout, what)
	}
}

// killGroup sends SIGKILL to the process group led by p, unless p has
// already been reaped (its pid, and so the group id, might then be reused).
func killGroup(p *process) error {
	if p.exited() {
		return nil
	}
	err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil // already gone
	}
	return err
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns the contents of path from byte offset on, or a note
// explaining why it could not be read.
func readFrom(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	if offset > int64(len(b)) {
		offset = 0
	}
	return string(b[offset:])
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "(empty)"
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
