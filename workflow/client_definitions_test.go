package workflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// knownDef is a one-step workflow "signup" whose step returns "done".
func knownDef(maxAttempts int) workflow.Definition {
	return workflow.Definition{Name: "signup", Policy: workflow.Policy{MaxAttempts: maxAttempts},
		Steps: []workflow.Step{{Name: "only", Run: func(context.Context, *workflow.StepContext) (any, error) {
			return "done", nil
		}}}}
}

// TestClientStartsAKnownDefinitionBeforeAnyWorker: a client given a
// definition (ClientConfig.Definitions) starts runs of it before any worker
// has published it: the run waits pending, and a worker started later runs
// it. A misspelled name is still ErrUnknownWorkflow, and an invalid
// definition ErrInvalidDefinition, with nothing written.
func TestClientStartsAKnownDefinitionBeforeAnyWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	def := knownDef(3)
	bad := workflow.Definition{Name: "bad"} // no steps
	c := workflow.NewClient(e.rdb, workflow.ClientConfig{Queue: e.queue, Logger: e.log,
		Definitions: []workflow.Definition{def, bad}})

	run, err := c.Start(ctxb, "signup", nil, nil)
	if err != nil {
		t.Fatalf("Start before any worker: %v", err)
	}
	if run.Status != workflow.StatusPending {
		t.Fatalf("run %s is %s, want pending", run.ID, run.Status)
	}
	if _, err := c.Start(ctxb, "sigup", nil, nil); !errors.Is(err, workflow.ErrUnknownWorkflow) {
		t.Errorf("a misspelled workflow: %v, want ErrUnknownWorkflow", err)
	}
	if _, err := c.Start(ctxb, "bad", nil, nil); !errors.Is(err, workflow.ErrInvalidDefinition) {
		t.Errorf("an invalid known definition: %v, want ErrInvalidDefinition", err)
	}
	if n := e.rdb.ZCard(ctxb, "cairn:{"+e.queue+"}:idx:all").Val(); n != 1 {
		t.Errorf("runs in Redis: %v, want the one started", n)
	}
	// A client with no definitions sees the published one now.
	if _, err := e.client.Start(ctxb, "signup", nil, nil); err != nil {
		t.Errorf("a client without definitions, after the publish: %v", err)
	}

	e.startWorker(workflow.WorkerConfig{}, def)
	if got := e.wait(run.ID, 20*time.Second); got.Status != workflow.StatusSucceeded {
		t.Errorf("the run started before the worker: %s, want succeeded", got.Status)
	}
}

// TestClientKnownDefinitionYieldsToPublished: once a worker has published a
// version of a workflow, a client that knows another version starts runs of
// the published one and does not publish its own.
func TestClientKnownDefinitionYieldsToPublished(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	publishedEngine(t, e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log}, knownDef(7))
	c := workflow.NewClient(e.rdb, workflow.ClientConfig{Queue: e.queue, Logger: e.log,
		Definitions: []workflow.Definition{knownDef(2)}})
	run, err := c.Start(ctxb, "signup", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctxb, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Steps[0].EffectivePolicy; p == nil || p.MaxAttempts != 7 {
		t.Errorf("the run's policy %+v, want the published version's (max attempts 7)", p)
	}
}

// TestClientPublishesKnownOnce: concurrent Starts of a known definition
// that no worker published all start, under one published version.
func TestClientPublishesKnownOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := workflow.NewClient(e.rdb, workflow.ClientConfig{Queue: e.queue, Logger: e.log,
		Definitions: []workflow.Definition{knownDef(3)}})
	reqs := make([]workflow.StartRequest, 8)
	for i := range reqs {
		reqs[i] = workflow.StartRequest{Workflow: "signup"}
	}
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			var err error
			for _, r := range c.StartMany(ctxb, reqs) {
				err = errors.Join(err, r.Err)
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	vs := e.rdb.HGetAll(ctxb, "cairn:{"+e.queue+"}:defv").Val()
	if len(vs) != 1 || vs["signup"] == "" {
		t.Fatalf("published versions %v, want one of signup", vs)
	}
}
