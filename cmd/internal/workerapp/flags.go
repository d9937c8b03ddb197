package workerapp

import (
	"flag"
	"fmt"
	"io"
)

// options are the command-line flags.
type options struct {
	// dashboardOnly serves the HTTP API and dashboard alone: no asynq
	// server, engine or reconciler (a separate deployment).
	dashboardOnly bool
	// healthcheck probes the HTTP server of a running worker or dashboard
	// and exits (healthcheck.go).
	healthcheck bool
	// version prints the version and exits.
	version bool
}

// synopsis is the first line of the usage.
const synopsis = "Usage: worker [--dashboard-only | --healthcheck | --version | --help]"

// usage is the help text of worker --help.
const usage = synopsis + `

worker runs Cairn workflows: it executes their step attempts from the queue
and serves the HTTP API and the dashboard on CAIRN_HTTP_ADDR (default
127.0.0.1:8080; empty: no HTTP; set, but in use: exit 1). Its configuration is CAIRN_* environment
variables (docs/configuration.md). With CAIRN_REDIS_URL unset it starts an
embedded, non-durable store for development. It runs the workflows of
CAIRN_WORKFLOWS_FILE, and the demo workflow on the embedded store or with
CAIRN_DEMO=true.

Flags:
  --dashboard-only  serve only the HTTP API and the dashboard, on the
                    configured Redis: no engine, no reconciler
  --healthcheck     ask the server of a worker or dashboard running on this
                    host (CAIRN_HTTP_ADDR) whether it is ready: exit 0 or 1
  --version         print the version of worker and exit
  -h, --help        show this help and exit

Exit codes: 0 stopped by SIGINT or SIGTERM (or a help, version or healthy
check); 1 an error at run time; 2 a usage error or a bad configuration.
`

// errHelp is parseFlags' error for -h or --help.
var errHelp = flag.ErrHelp

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.BoolVar(&o.dashboardOnly, "dashboard-only", false, "")
	fs.BoolVar(&o.healthcheck, "healthcheck", false, "")
	fs.BoolVar(&o.version, "version", false, "")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return o, nil
}
