// Command worker runs Cairn workflows: it executes step attempts from the
// queue and serves the HTTP API and the dashboard; --dashboard-only serves
// only those, --healthcheck probes a running one. Run "worker --help" for
// the flags and the exit codes; the configuration is the CAIRN_*
// environment (docs/configuration.md); the logic lives in
// cmd/internal/workerapp.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cairnhq/cairn/cmd/internal/workerapp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := workerapp.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Environ())
	stop()
	os.Exit(code)
}
