package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cairnhq/cairn/workflow/yamldef"
)

// parseValidate parses "validate <file>": check a YAML workflows file as
// the worker would load it (with the environment's defaults), without Redis.
func parseValidate(_ context.Context, _ *CLI, args []string) (action, error) {
	fs := newFlagSet("validate")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	path, err := positional("validate", pos, "file")
	if err != nil {
		return nil, err
	}
	return func(_ context.Context, s *session) error {
		defs, err := yamldef.Load(path, yamldef.Options{
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
			return usageErrorf("validate: %v", err)
		}
		names := make([]string, len(defs))
		for i, d := range defs {
			names[i] = d.Name
		}
		_, err = fmt.Fprintf(s.stdout(), "%s: ok (%s: %s)\n", path, plural(len(defs), "workflow"), strings.Join(names, ", "))
		return err
	}, nil
}

// plural returns "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
