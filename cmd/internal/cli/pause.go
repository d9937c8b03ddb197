package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/cairnhq/cairn/workflow"
)

// parsePause parses "pause <run-id>|--last [--json]" and "resume
// <run-id>|--last [--json]" (name): a run that ended is refused (exit 1),
// as cancel refuses one; both are no-ops on a run already as asked.
func parsePause(name string) func(*CLI, *pflag.FlagSet) parseFunc {
	return func(_ *CLI, fs *pflag.FlagSet) parseFunc {
		last := addLastFlag(fs)
		asJSON := fs.Bool("json", false, "")
		return func(_ context.Context, pos []string) (action, error) {
			ref, err := runRefArg(name, pos, *last)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, s *session) error {
				id, err := s.resolve(ctx, ref)
				if err != nil {
					return err
				}
				act := s.client.Pause
				if name == "resume" {
					act = s.client.Resume
				}
				run, err := act(ctx, id, &workflow.ActionOptions{Actor: "cli"})
				if errors.Is(err, workflow.ErrRunFinished) {
					status := "finished"
					if r, gerr := s.client.Get(ctx, id); gerr == nil {
						status = string(r.Status)
					}
					return failuref("%s refused: run %s already finished (%s)", name, id, status)
				}
				if err != nil {
					return err
				}
				if *asJSON {
					return writeJSON(s.stdout(), run)
				}
				_, err = fmt.Fprintln(s.stdout(), pauseLine(name, run))
				return err
			}, nil
		}
	}
}

// pauseLine is what pause and resume print.
func pauseLine(name string, run *workflow.Run) string {
	if name == "pause" {
		if run.Paused != nil && run.Paused.By != "cli" {
			return fmt.Sprintf("paused %s (already, by %s since %s)", run.ID, run.Paused.By,
				run.Paused.At.Format("2006-01-02 15:04:05 UTC"))
		}
		return fmt.Sprintf("paused %s: it begins no new attempt until resumed (enqueue resume %s)", run.ID, run.ID)
	}
	return fmt.Sprintf("resumed %s: %s", run.ID, run.Status)
}
