package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// parseBreakers parses "breakers [--json]".
func parseBreakers(_ context.Context, _ *CLI, args []string) (action, error) {
	fs := newFlagSet("breakers")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != 0 {
		return nil, usageErrorf("breakers takes no arguments")
	}
	return func(ctx context.Context, s *session) error {
		bs, err := s.client.Breakers(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			if bs == nil {
				bs = []workflow.BreakerState{}
			}
			return writeJSON(s.stdout(), bs)
		}
		tw := newTable(s.stdout())
		fmt.Fprintln(tw, "BREAKER\tSTATE\tFAILURES\tOPEN UNTIL\tCOOLDOWN\tOPENED\tDEFERRED")
		for _, b := range bs {
			until := "-"
			if b.OpenUntil != nil {
				until = fmtTime(b.OpenUntil) + " (" + inDuration(b.OpenUntil.Sub(s.cli.now())) + ")"
			}
			cooldown := "-"
			if b.Cooldown > 0 {
				cooldown = fmtDuration(b.Cooldown.Round(time.Millisecond))
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", cell(b.Name, 0), b.State, b.Failures, until, cooldown,
				strconv.FormatInt(b.Opened, 10), strconv.FormatInt(b.Deferred, 10))
		}
		return tw.Flush()
	}, nil
}

// parseBreaker parses "breaker reset <name>".
func parseBreaker(_ context.Context, _ *CLI, args []string) (action, error) {
	fs := newFlagSet("breaker")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != 2 || pos[0] != "reset" {
		return nil, usageErrorf("breaker: want \"breaker reset <name>\"")
	}
	name := pos[1]
	return func(ctx context.Context, s *session) error {
		if err := s.client.ResetBreaker(ctx, name); err != nil {
			return err
		}
		_, err := fmt.Fprintf(s.stdout(), "reset circuit breaker %s: closed\n", name)
		return err
	}, nil
}
