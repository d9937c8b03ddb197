package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestStart(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, nil)

	if !s.Running() {
		t.Fatal("Running() = false right after Start")
	}
	if want := fmt.Sprintf("127.0.0.1:%d", s.Port()); s.Addr() != want {
		t.Errorf("Addr() = %q, want %q", s.Addr(), want)
	}
	if want := "redis://" + s.Addr() + "/0"; s.URL() != want {
		t.Errorf("URL() = %q, want %q", s.URL(), want)
	}
	if s.Dir() == "" {
		t.Error("Dir() is empty")
	}

	ctx := context.Background()
	c := s.Client(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET k = %q, %v; want \"v\"", got, err)
	}

	// The URL must be usable as is.
	opt, err := redis.ParseURL(s.URL())
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", s.URL(), err)
	}
	c2 := redis.NewClient(opt)
	defer c2.Close()
	if got, err := c2.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET k via URL = %q, %v; want \"v\"", got, err)
	}
}

func TestParallelServersAreIndependent(t *testing.T) {
	t.Parallel()
	a := redistest.Start(t, nil)
	b := redistest.Start(t, nil)
	if a.Port() == b.Port() {
		t.Fatalf("two servers share port %d", a.Port())
	}
	ctx := context.Background()
	if err := a.Client(t).Set(ctx, "only-in-a", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Client(t).Get(ctx, "only-in-a").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET on b = %v, want redis.Nil", err)
	}
}

func TestKillRestartAppendOnlyAlwaysKeepsData(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	ctx := context.Background()
	c := s.Client(t)
	if err := c.Set(ctx, "durable", "yes", 0).Err(); err != nil {
		t.Fatal(err)
	}
	port, dir := s.Port(), s.Dir()

	s.Kill(t)
	if s.Running() {
		t.Fatal("Running() = true after Kill")
	}
	if conn, err := net.Dial("tcp", s.Addr()); err == nil {
		conn.Close()
		t.Fatalf("%s still accepts connections after Kill", s.Addr())
	}

	s.Restart(t)
	if !s.Running() {
		t.Fatal("Running() = false after Restart")
	}
	if s.Port() != port || s.Dir() != dir {
		t.Fatalf("after Restart port, dir = %d, %q; want %d, %q", s.Port(), s.Dir(), port, dir)
	}
	// The same client reconnects to the restarted server.
	if got, err := c.Get(ctx, "durable").Result(); err != nil || got != "yes" {
		t.Fatalf("GET durable after kill -9 and restart = %q, %v; want \"yes\"", got, err)
	}
	if got, err := c.ConfigGet(ctx, "appendfsync").Result(); err != nil || got["appendfsync"] != "always" {
		t.Fatalf("CONFIG GET appendfsync after restart = %v, %v; want always", got, err)
	}
}

func TestKillRestartWithoutPersistenceLosesData(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, nil)
	ctx := context.Background()
	c := s.Client(t)
	if err := c.Set(ctx, "volatile", "yes", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill(t)
	s.Restart(t)
	if err := c.Get(ctx, "volatile").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET volatile after kill -9 and restart = %v, want redis.Nil", err)
	}
}

func TestStopRestart(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, &redistest.Options{AppendOnly: true}) // everysec by default
	ctx := context.Background()
	c := s.Client(t)
	if got, err := c.ConfigGet(ctx, "appendfsync").Result(); err != nil || got["appendfsync"] != "everysec" {
		t.Fatalf("CONFIG GET appendfsync = %v, %v; want everysec", got, err)
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	s.Stop(t)
	if s.Running() {
		t.Fatal("Running() = true after Stop")
	}
	s.Stop(t) // no-op when not running
	s.Kill(t) // likewise

	s.Restart(t)
	if !s.Running() {
		t.Fatal("Running() = false after Restart")
	}
	// A graceful shutdown flushes the AOF even with everysec.
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET k after Stop and Restart = %q, %v; want \"v\"", got, err)
	}

	// Restart of a running server stops it first.
	pid := s.PID()
	s.Restart(t)
	if s.PID() == pid {
		t.Fatalf("Restart of a running server kept pid %d", pid)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET k after second Restart = %q, %v; want \"v\"", got, err)
	}
}

func TestExtraArgs(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, &redistest.Options{Args: []string{"--maxmemory-policy", "noeviction"}})
	got, err := s.Client(t).ConfigGet(context.Background(), "maxmemory-policy").Result()
	if err != nil || got["maxmemory-policy"] != "noeviction" {
		t.Fatalf("CONFIG GET maxmemory-policy = %v, %v; want noeviction", got, err)
	}
}

func TestWrapperRunsTheServer(t *testing.T) {
	t.Parallel()
	// nice runs redis-server in its own process, at a lower priority: the
	// server's niceness shows that it was started through the wrapper.
	s := redistest.Start(t, &redistest.Options{Wrapper: []string{"nice", "-n", "7"}})
	if err := s.Client(t).Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	mine, err := niceness(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	got, err := niceness(s.PID())
	if err != nil {
		t.Fatal(err)
	}
	if want := min(mine+7, 19); got != want {
		t.Fatalf("redis-server (pid %d) has niceness %d; want %d: not started through the wrapper", s.PID(), got, want)
	}
}

// niceness reads a process's nice value from /proc/<pid>/stat (field 19;
// the fields are counted after the command name, which is in parentheses).
func niceness(pid int) (int, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 17 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return strconv.Atoi(f[16])
}

func TestShared(t *testing.T) {
	t.Parallel()
	a := redistest.Shared(t)
	b := redistest.Shared(t)
	if a != b {
		t.Fatalf("Shared returned different servers: %s and %s", a.Addr(), b.Addr())
	}
	if !a.Running() {
		t.Fatal("shared server is not running")
	}
	ctx := context.Background()
	key := t.Name() + ":k"
	if err := a.Client(t).Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Client(t).Get(ctx, key).Result(); err != nil || got != "v" {
		t.Fatalf("GET %s = %q, %v; want \"v\"", key, got, err)
	}
}

func TestSharedFromParallelTests(t *testing.T) {
	t.Parallel()
	addrs := make(chan string, 8)
	t.Run("group", func(t *testing.T) {
		for i := range cap(addrs) {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				addrs <- redistest.Shared(t).Addr()
			})
		}
	})
	close(addrs)
	first := <-addrs
	for a := range addrs {
		if a != first {
			t.Fatalf("Shared returned %s and %s", first, a)
		}
	}
}

// fakeTB records fatal failures instead of stopping the test, so that the
// failure paths of the package can be checked.
type fakeTB struct {
	testing.TB
	failed  bool
	message string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatal(args ...any) {
	f.failed = true
	f.message = fmt.Sprint(args...)
	panic(f)
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Fatal(fmt.Sprintf(format, args...))
}

// catchFatal runs fn with a fakeTB wrapping t and returns the fatal message,
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

func TestSharedServerCannotBeKilled(t *testing.T) {
	t.Parallel()
	s := redistest.Shared(t)
	msg := catchFatal(t, func(tb testing.TB) { s.Kill(tb) })
	if !strings.Contains(msg, "shared server") {
		t.Fatalf("Kill on shared server: fatal message %q, want one mentioning the shared server", msg)
	}
	if !s.Running() {
		t.Fatal("shared server died")
	}
}

func TestMissingServerFails(t *testing.T) { // not parallel: sets the environment
	t.Setenv(redistest.EnvServer, "/nonexistent/redis-server")
	msg := catchFatal(t, func(tb testing.TB) { redistest.Start(tb, nil) })
	if !strings.Contains(msg, redistest.EnvServer) || !strings.Contains(msg, "/nonexistent/redis-server") {
		t.Fatalf("Start with a bad %s: fatal message %q", redistest.EnvServer, msg)
	}

	t.Setenv(redistest.EnvServer, "")
	t.Setenv("PATH", t.TempDir())
	defer redistest.SetFallbackPaths([]string{"/nonexistent/redis-server"})()
	msg = catchFatal(t, func(tb testing.TB) { redistest.Start(tb, nil) })
	if !strings.Contains(msg, "redis-server not found") || !strings.Contains(msg, "apt-get install -y redis-server") || !strings.Contains(msg, redistest.EnvServer) {
		t.Fatalf("Start without redis-server: fatal message %q", msg)
	}
}

func TestBadArgsReportLog(t *testing.T) {
	t.Parallel()
	msg := catchFatal(t, func(tb testing.TB) {
		redistest.Start(tb, &redistest.Options{Args: []string{"--no-such-option", "1"}})
	})
	if !strings.Contains(msg, "did not become ready") || !strings.Contains(msg, "no-such-option") {
		t.Fatalf("Start with a bad option: fatal message %q, want redis-server's complaint", msg)
	}
}

// TestFreezeThaw: a frozen server answers nothing (a command times out) but
// keeps its data; a command sent while it was frozen runs when it is thawed,
// even though its client gave up waiting.
func TestFreezeThaw(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, nil)
	ctx := context.Background()
	c := s.Client(t)
	if err := c.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A client connected before the freeze (a new connection would wait
	// for its handshake's reply and never send the command).
	impatient := redis.NewClient(&redis.Options{Addr: s.Addr(), ReadTimeout: 200 * time.Millisecond,
		MaxRetries: -1, PoolSize: 1})
	defer impatient.Close()
	if err := impatient.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	s.Freeze(t)
	if err := impatient.Set(ctx, "ghost", "1", 0).Err(); err == nil {
		t.Fatal("SET on a frozen server succeeded")
	}
	s.Thaw(t)
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "before" {
		t.Fatalf("GET k after thaw = %q, %v; want \"before\"", got, err)
	}
	// The abandoned SET runs once the server reads it (the order in which
	// the thawed server serves its connections is its own).
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := c.Get(ctx, "ghost").Result()
		if err == nil && got == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET ghost after thaw = %q, %v; want the SET sent while frozen to have run", got, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
