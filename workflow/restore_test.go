package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/workflow"
)

func TestRestore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := fastPolicy()
	pol.MaxAttempts = 2
	e.startWorker(workflow.WorkerConfig{ShutdownTimeout: 200 * time.Millisecond}, demo.Definition(pol))
	ctx := context.Background()

	// Inputs of the demo workflow.
	const (
		ok          = `{}`
		failsTwice  = `{"fail_step":"transform","fail_times":2}` // fails its budget of 2, then (restored) succeeds
		slow        = `{"step_sleep_ms":60000}`
		whenFailed  = workflow.StatusFailed
		whenDone    = workflow.StatusSucceeded
		whenRunning = workflow.StatusRunning
	)
	tests := []struct {
		name  string
		input string
		// until is the state the run is brought to before the restore;
		// cancelled: a slow run, cancelled while running.
		until   workflow.RunStatus
		from    string
		refused string // a part of the refusal; "" when the restore applies
		// reran: the steps that must have run again, with their attempts
		// after the restored run ends.
		reran map[string]int
		kept  []string // steps whose output and attempts must be unchanged
	}{
		{name: "failed run, from the first step", input: failsTwice, until: whenFailed, from: "fetch",
			reran: map[string]int{"fetch": 2, "transform": 3, "deliver": 1}},
		{name: "failed run, from the failed step", input: failsTwice, until: whenFailed, from: "transform",
			reran: map[string]int{"transform": 3, "deliver": 1}, kept: []string{"fetch"}},
		{name: "succeeded run, from the middle step", input: ok, until: whenDone, from: "transform",
			reran: map[string]int{"transform": 2, "deliver": 2}, kept: []string{"fetch"}},
		{name: "succeeded run, from the last step", input: ok, until: whenDone, from: "deliver",
			reran: map[string]int{"deliver": 2}, kept: []string{"fetch", "transform"}},
		{name: "cancelled run", input: slow, until: workflow.StatusCancelled, from: "fetch"},
		{name: "running run", input: slow, until: whenRunning, from: "fetch", refused: "run is running"},
		{name: "unknown step", input: failsTwice, until: whenFailed, from: "nope", refused: `no step "nope"`},
		{name: "after a step that did not succeed", input: failsTwice, until: whenFailed, from: "deliver",
			refused: `step "transform" before "deliver" is failed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := e.client.Start(ctx, demo.Name, json.RawMessage(tt.input), &workflow.StartOptions{Owner: "alice"})
			if err != nil {
				t.Fatal(err)
			}
			switch tt.until {
			case whenRunning, workflow.StatusCancelled:
				e.eventually(10*time.Second, "first step running", func() bool {
					r, err := e.client.Get(ctx, run.ID)
					return err == nil && r.Steps[0].Status == workflow.StepRunning
				})
				if tt.until == workflow.StatusCancelled {
					if _, err := e.client.Cancel(ctx, run.ID, nil); err != nil {
						t.Fatal(err)
					}
				}
				// Let the worker go; a run cancelled above refuses, which is fine.
				defer func() { _, _ = e.client.Cancel(ctx, run.ID, nil) }()
			default:
				if got := e.wait(run.ID, 10*time.Second); got.Status != tt.until {
					t.Fatalf("run is %s, want %s: %s", got.Status, tt.until, got.FailureReason)
				}
			}
			before, err := e.client.Get(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			journal := len(e.events(run.ID))
			audit, err := e.client.Audit(ctx, "", 10000)
			if err != nil {
				t.Fatal(err)
			}

			restored, err := e.client.Restore(ctx, run.ID, tt.from, &workflow.ActionOptions{Actor: "root"})

			if tt.refused != "" {
				if !errors.Is(err, workflow.ErrActionRefused) || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("Restore: %v, want refused with %q", err, tt.refused)
				}
				after, _ := e.client.Get(ctx, run.ID)
				b1, _ := json.Marshal(before)
				b2, _ := json.Marshal(after)
				if string(b1) != string(b2) || len(e.events(run.ID)) != journal {
					t.Fatalf("a refused restore changed the run:\n%s\n%s", b1, b2)
				}
				if a, _ := e.client.Audit(ctx, "", 10000); len(a) != len(audit) {
					t.Fatal("a refused restore was audited")
				}
				return
			}
			if err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if restored.Status != workflow.StatusRunning || restored.CurrentStep != tt.from || restored.NeedsAttention ||
				restored.FailureReason != "" || restored.FinishedAt != nil {
				t.Fatalf("restored run: %+v", restored)
			}
			found := false
			for _, ev := range e.events(run.ID)[journal:] {
				found = found || (ev.Type == workflow.EventRunRecovered && ev.Details["action"] == workflow.ActionRestore &&
					ev.Details["actor"] == "root" && ev.Step == tt.from)
			}
			if !found {
				t.Errorf("no run_recovered (restore by root from %s) in the journal", tt.from)
			}
			a, err := e.client.Audit(ctx, "", 10000)
			if err != nil {
				t.Fatal(err)
			}
			if len(a) != len(audit)+1 {
				t.Fatalf("%d audit entries, want %d", len(a), len(audit)+1)
			}
			if got := a[len(a)-1]; got.Action != workflow.ActionRestore || got.Actor != "root" || got.RunID != run.ID ||
				got.Owner != "alice" || got.Step != tt.from || got.Workflow != demo.Name {
				t.Errorf("audit entry %+v", got)
			}
			if tt.until == workflow.StatusCancelled {
				return // it sleeps a minute; the deferred cancel ends it
			}
			done := e.wait(run.ID, 10*time.Second)
			if done.Status != workflow.StatusSucceeded {
				t.Fatalf("restored run ended %s: %s", done.Status, done.FailureReason)
			}
			for step, attempts := range tt.reran {
				if s := done.Step(step); s.Attempts != attempts || s.Status != workflow.StepSucceeded || len(s.Output) == 0 {
					t.Errorf("step %s: %d attempts (want %d), %s, output %s", step, s.Attempts, attempts, s.Status, s.Output)
				}
			}
			for _, step := range tt.kept {
				b, a := before.Step(step), done.Step(step)
				if string(a.Output) != string(b.Output) || a.Attempts != b.Attempts || !a.FinishedAt.Equal(*b.FinishedAt) {
					t.Errorf("step %s was not kept: before %+v, after %+v", step, b, a)
				}
			}
		})
	}
}

func TestRestoreBadRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.Restore(ctx, "not-a-run", "fetch", nil); !errors.Is(err, workflow.ErrInvalidRunID) {
		t.Errorf("bad ID: %v", err)
	}
	if _, err := e.client.Restore(ctx, strings.Repeat("0", 26), "fetch", nil); !errors.Is(err, workflow.ErrRunNotFound) {
		t.Errorf("unknown run: %v", err)
	}
	if _, err := e.client.Restore(ctx, strings.Repeat("0", 26), "", nil); !errors.Is(err, workflow.ErrActionRefused) {
		t.Errorf("no step: %v", err)
	}
}
