// The tests of this package run the worker binary, as a shell or a
// container runtime does: what only a process shows (SIGINT and SIGTERM
// ending the run with exit code 0, the ports it frees when it exits, a
// Redis stopped and restarted under it, the command line, stdout and the
// exit code as os.Exit passes them, the version the toolchain records in
// the binary). Everything that ends before the worker serves (bad
// configuration, a failure at start) is tested in-process in
// cmd/internal/workerapp.

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
		"CAIRN_DEMO=", "CAIRN_DEMO_CHAOS=", "CAIRN_WORKFLOWS_FILE=",
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
