package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/workflow"
)

func TestDemoRunSucceeds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(workflow.WorkerConfig{}, demo.Definition(fastPolicy()))
	run, err := e.client.Start(context.Background(), demo.Name, demo.Input{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	run = e.wait(run.ID, 10*time.Second)
	if run.Status != workflow.StatusSucceeded {
		t.Fatalf("status %s: %+v", run.Status, run)
	}
	for _, s := range run.Steps {
		if s.Status != workflow.StepSucceeded || s.Attempts != 1 {
			t.Errorf("step %s: status %s attempts %d", s.Name, s.Status, s.Attempts)
		}
	}
	var out demo.DeliverOutput
	if err := jsonUnmarshal(run.Step("deliver").Output, &out); err != nil || out.Delivered != 3 {
		t.Errorf("deliver output %s (%v)", run.Step("deliver").Output, err)
	}
}
