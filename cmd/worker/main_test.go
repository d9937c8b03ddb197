package main

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

const waitTimeout = 30 * time.Second

func TestMain(m *testing.M) { testkit.Main(m) }

// needsBinary is what the tests need that -short leaves out.
const needsBinary = "builds and runs the worker binary"

func worker(t *testing.T) string {
	t.Helper()
	return proctest.Build(t, "github.com/cairnhq/cairn/cmd/worker")
}

// baseEnv isolates the worker from CAIRN_* variables of the environment the
// tests run in: an empty value takes the default, but for CAIRN_HTTP_ADDR,
// where it turns the HTTP API off (its default, 127.0.0.1:8080, is a fixed
// port that parallel tests would contend for); a test that wants the API
// appends its own address (the last setting of a variable wins).
func baseEnv(embeddedAddr string) []string {
	return []string{
		"CAIRN_REDIS_URL=", "CAIRN_EMBEDDED_ADDR=" + embeddedAddr, "CAIRN_QUEUE=", "CAIRN_CONCURRENCY=", "CAIRN_HTTP_ADDR=",
		"CAIRN_LOG_FORMAT=text", "CAIRN_LOG_LEVEL=info", "CAIRN_RETRY_JITTER=", "CAIRN_SHUTDOWN_TIMEOUT=10s",
	}
}

func TestBadConfigurationExits2(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	bin := worker(t)
	tests := []struct {
		name string
		env  []string
		vars []string // named on stderr
	}{
		{"bad integer", []string{"CAIRN_CONCURRENCY=abc"}, []string{"CAIRN_CONCURRENCY"}},
		{"bad enum", []string{"CAIRN_RETRY_JITTER=sometimes"}, []string{"CAIRN_RETRY_JITTER"}},
		{"bad URL", []string{"CAIRN_REDIS_URL=http://localhost:6379"}, []string{"CAIRN_REDIS_URL"}},
		{"Sentinel URL without a master", []string{"CAIRN_REDIS_URL=redis-sentinel://:hunter2@10.0.0.1,10.0.0.2/0"},
			[]string{"CAIRN_REDIS_URL: no master name"}},
		{"cluster URL with a database", []string{"CAIRN_REDIS_URL=redis-cluster://:hunter2@10.0.0.1/2"},
			[]string{"CAIRN_REDIS_URL: database \"2\""}},
		{"replicas without a Redis", []string{"CAIRN_REDIS_MIN_REPLICAS=1"}, []string{"CAIRN_REDIS_MIN_REPLICAS"}},
		{"two bad values", []string{"CAIRN_RETRY_JITTER=sometimes", "CAIRN_LOG_FORMAT=xml"},
			[]string{"CAIRN_RETRY_JITTER", "CAIRN_LOG_FORMAT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := append(baseEnv(testkit.FreeAddr(t)), tt.env...)
			stdout, stderr, code := proctest.Run(t, bin, env, "")
			if code != 2 {
				t.Errorf("exit code %d, want 2\nstderr:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, "bad configuration") {
				t.Errorf("stderr does not say the configuration is bad:\n%s", stderr)
			}
			for _, v := range tt.vars {
				if !strings.Contains(stderr, v) {
					t.Errorf("stderr does not name %s:\n%s", v, stderr)
				}
			}
			if strings.Contains(stderr, "hunter2") {
				t.Errorf("stderr shows the password:\n%s", stderr)
			}
			if strings.Contains(stderr, "EMBEDDED STORE") || stdout != "" {
				t.Errorf("worker started something with a bad configuration\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
		})
	}
}

func TestEmbeddedStoreStartsAndStopsOnSIGTERM(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	addr := testkit.FreeAddr(t)
	p := proctest.Start(t, worker(t), baseEnv(addr))

	off := p.WaitForOutputFrom(t, 0, "EMBEDDED STORE", waitTimeout)
	off = p.WaitForOutputFrom(t, off, "NOT durable", waitTimeout)
	off = p.WaitForOutputFrom(t, off, "export CAIRN_REDIS_URL=redis://"+addr+"\n", waitTimeout)
	p.WaitForOutputFrom(t, off, "worker started", waitTimeout)

	// The store serves Redis on the address, and the worker has published
	// the demo workflow there.
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	wfs, err := workflow.NewClient(rdb, workflow.ClientConfig{Logger: slog.New(slog.DiscardHandler)}).Workflows(ctx)
	if err != nil {
		t.Fatalf("reading workflows from the embedded store on %s: %v", addr, err)
	}
	if got := wfs[demo.Name]; !slices.Equal(got, []string{"fetch", "transform", "deliver"}) {
		t.Errorf("published workflows %v, want %s with its three steps", wfs, demo.Name)
	}

	p.Signal(t, syscall.SIGTERM)
	if code := p.Wait(t, waitTimeout); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0\n%s", code, p.Output())
	}
	if out := p.Output(); !strings.Contains(out, "worker stopped") {
		t.Errorf("no graceful shutdown in the output:\n%s", out)
	}
	// The store is closed: its address is free again.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("address %s still in use after the worker exited: %v", addr, err)
	}
	_ = ln.Close()
}

func TestEmbeddedAddressInUseExits1(t *testing.T) {
	testkit.SkipShort(t, needsBinary)
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, stderr, code := proctest.Run(t, worker(t), baseEnv(ln.Addr().String()), "")
	if code != 1 {
		t.Errorf("exit code %d, want 1\nstderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "embedded store: listen on "+ln.Addr().String()) ||
		!strings.Contains(stderr, "CAIRN_EMBEDDED_ADDR") {
		t.Errorf("stderr does not explain the address conflict:\n%s", stderr)
	}
}
