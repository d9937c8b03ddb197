package workerapp

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cairnhq/cairn/cmd/internal/config"
	"github.com/cairnhq/cairn/cmd/internal/version"
)

// Main is the worker command: it parses args (the command line without the
// program's name), reads its configuration from environ (as os.Environ
// returns it) and runs until ctx is done (cmd/worker cancels it on SIGINT
// or SIGTERM). It returns the exit code: 0 stopped by ctx (or a help,
// version or healthy check); 1 an error at run time; 2 a usage error or a
// bad configuration. Usage, version and the health check's line go to
// stdout; the log and errors to stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, environ []string) int {
	opts, err := parseFlags(args)
	if errors.Is(err, errHelp) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "cairn worker: %v (run worker --help for usage)\n%s\n", err, synopsis)
		return 2
	}
	if opts.version {
		fmt.Fprintln(stdout, version.Line("worker"))
		return 0
	}
	if opts.healthcheck {
		return runHealthcheck(ctx, environ, stdout)
	}
	cfg, err := config.Load(environ)
	if err != nil {
		fmt.Fprintf(stderr, "cairn worker: bad configuration:\n%v\n", err)
		return 2
	}
	serve := run
	if opts.dashboardOnly {
		serve = runDashboardOnly
	}
	if err := serve(ctx, cfg, stderr); err != nil {
		fmt.Fprintf(stderr, "cairn worker: %v\n", err)
		return exitCode(err)
	}
	return 0
}

// startError is a configuration problem found at start (a tokens file, an
// HTTP address without tokens): the worker exits with code 2, as for a bad
// variable.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// exitCode is the exit code of run's error.
func exitCode(err error) int {
	if _, ok := errors.AsType[*startError](err); ok {
		return 2
	}
	return 1
}
