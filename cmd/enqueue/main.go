// Command enqueue is Cairn's command-line client: it starts workflow runs
// and shows, lists and cancels them. Run "enqueue help" for the commands,
// the exit codes and the environment; the logic lives in cmd/internal/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cairnhq/cairn/cmd/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())
	stop()
	os.Exit(code)
}
