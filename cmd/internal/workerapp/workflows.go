package workerapp

import (
	"fmt"

	"github.com/cairnhq/cairn/cmd/internal/config"
	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/yamldef"
)

// loadWorkflows loads the YAML workflow definitions of CAIRN_WORKFLOWS_FILE,
// if it is set. A file that cannot be read or has problems is a startError
// (exit code 2) listing each problem as FILE:LINE:COL: what is wrong.
func loadWorkflows(cfg config.Config) ([]workflow.Definition, error) {
	if cfg.WorkflowsFile == "" {
		return nil, nil
	}
	defs, err := yamldef.Load(cfg.WorkflowsFile, yamldef.Options{
		MaxBodyBytes: int64(cfg.HTTPStepMaxBody),
		Defaults:     cfg.Policy(),
	})
	if err != nil {
		return nil, &startError{fmt.Errorf("CAIRN_WORKFLOWS_FILE: %s is invalid:\n%w", cfg.WorkflowsFile, err)}
	}
	out := make([]workflow.Definition, len(defs))
	for i, d := range defs {
		out[i] = *d
	}
	return out, nil
}
