package cli

import (
	"github.com/spf13/pflag"

	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cairnhq/cairn/internal/regularfile"
	"github.com/cairnhq/cairn/workflow/yamldef"
)

// maxWorkflowsFileBytes bounds the workflows file validate reads: the
// worker's limit (yamldef.Load's), so that validate passes no file the
// worker would refuse.
const maxWorkflowsFileBytes = yamldef.MaxFileBytes

// parseValidate parses "validate <file>": check a YAML workflows file as
// the worker would load it (with the environment's defaults), without Redis.
// The file must be a regular file of at most maxWorkflowsFileBytes; anything
// else is bad input, refused without waiting.
func parseValidate(_ *CLI, _ *pflag.FlagSet) parseFunc {
	return func(_ context.Context, pos []string) (action, error) {
		path, err := positional("validate", pos, "file")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, s *session) error {
			data, err := regularfile.Read(ctx, path, maxWorkflowsFileBytes)
			switch {
			case ctx.Err() != nil:
				return failuref("interrupted while reading %s", path)
			case errors.Is(err, regularfile.ErrTooLarge):
				return usageErrorf("validate: %s: file larger than %d bytes", path, maxWorkflowsFileBytes)
			case err != nil:
				return usageErrorf("validate: %v", err)
			}
			defs, err := yamldef.Parse(path, data, yamldef.Options{
				MaxBodyBytes: int64(s.cfg.HTTPStepMaxBody),
				Defaults:     s.cfg.Policy(),
			})
			var list yamldef.ErrorList
			switch {
			case errors.As(err, &list):
				for _, e := range list {
					fmt.Fprintln(s.stderr(), oneLine(e.Error()))
				}
				return failuref("%s: %s", path, plural(len(list), "problem"))
			case err != nil:
				return failuref("validate: %s: %v", path, err)
			}
			names := make([]string, len(defs))
			for i, d := range defs {
				names[i] = d.Name
			}
			_, err = fmt.Fprintf(s.stdout(), "%s: ok (%s: %s)\n", path, plural(len(defs), "workflow"), strings.Join(names, ", "))
			return err
		}, nil
	}
}

// plural returns "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
