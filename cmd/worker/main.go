// Command worker runs Cairn workflows: it executes step attempts from the
// queue, with the demo workflow registered. Configuration comes from the
// environment (docs/configuration.md). With CAIRN_REDIS_URL unset it starts the
// embedded, non-durable development store. It also serves the HTTP API and
// dashboard (package dashboard) on CAIRN_HTTP_ADDR; with --dashboard-only
// it serves only those. With --healthcheck it asks the server of a running
// worker or dashboard on this host whether it is ready, and exits 0 or 1
// (a container's health check). worker --help lists the flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cairnhq/cairn/internal/config"
	"github.com/cairnhq/cairn/internal/version"
)

func main() {
	opts, err := parseFlags(os.Args[1:])
	if errors.Is(err, errHelp) {
		fmt.Fprint(os.Stdout, usage)
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cairn worker: %v (run worker --help for usage)\n%s\n", err, synopsis)
		os.Exit(2)
	}
	if opts.version {
		fmt.Fprintln(os.Stdout, version.Line("worker"))
		os.Exit(0)
	}
	if opts.healthcheck {
		os.Exit(runHealthcheck(context.Background(), os.Environ(), os.Stdout))
	}
	cfg, err := config.Load(os.Environ())
	if err != nil {
		fmt.Fprintf(os.Stderr, "cairn worker: bad configuration:\n%v\n", err)
		os.Exit(2)
	}
	serve := run
	if opts.dashboardOnly {
		serve = runDashboardOnly
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err = serve(ctx, cfg, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cairn worker: %v\n", err)
		os.Exit(exitCode(err))
	}
}
