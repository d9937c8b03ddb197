package cli

import (
	"github.com/spf13/pflag"

	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// parseBreakers parses "breakers [--json]".
func parseBreakers(_ *CLI, fs *pflag.FlagSet) parseFunc {
	asJSON := fs.Bool("json", false, "")
	return func(_ context.Context, pos []string) (action, error) {
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
			t := newTable(s.cli.layout())
			t.head = true
			t.style = func(row []string, col int) string {
				if col == 1 {
					return breakerStyle(row[col])
				}
				return ""
			}
			t.add("BREAKER", "STATE", "FAILURES", "OPEN UNTIL", "COOLDOWN", "OPENED", "DEFERRED")
			for _, b := range bs {
				until := "-"
				if b.OpenUntil != nil {
					until = fmtTime(b.OpenUntil) + " (" + inDuration(b.OpenUntil.Sub(s.cli.now())) + ")"
				}
				cooldown := "-"
				if b.Cooldown > 0 {
					cooldown = fmtDuration(b.Cooldown.Round(time.Millisecond))
				}
				t.add(cell(b.Name), cell(b.State), strconv.Itoa(b.Failures), until, cooldown,
					strconv.FormatInt(b.Opened, 10), strconv.FormatInt(b.Deferred, 10))
			}
			return t.write(s.stdout())
		}, nil
	}
}

// parseBreaker parses "breaker reset <name>".
func parseBreaker(_ *CLI, _ *pflag.FlagSet) parseFunc {
	return func(_ context.Context, pos []string) (action, error) {
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
}

// breakerStyle is the colour of a breaker's state: red when open, yellow
// when half open, green when closed.
func breakerStyle(state string) string {
	switch state {
	case "open":
		return styleRed
	case "half_open":
		return styleYellow
	case "closed":
		return styleGreen
	}
	return ""
}
