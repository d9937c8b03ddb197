package retrystate_test

import (
	"testing"
	"time"

	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// TestRunTrace: a run keeps the trace context it was created with
// (NewRun.Trace); a begin that asks for it (BeginParams.Trace) gets it back,
// one that does not gets "", and a run created without one has none. The
// trace survives the compaction of the finished run (compact_run).
func TestRunTrace(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	def := retrystate.NewRun{Workflow: "wf",
		Steps: []retrystate.NewStep{{Name: "a", MaxAttempts: 3, MaxCrashes: 1, Timeout: time.Minute, Policy: "{}"}}}
	versions, err := s.PublishDefinitions(ctxb, []retrystate.PublishedDefinition{{Name: "wf", JSON: "{}", Run: def}})
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := s.Template(ctxb, versions["wf"])
	if err != nil {
		t.Fatal(err)
	}
	const tr = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nvendor=x"
	for i, c := range []struct {
		trace string
		first bool // the script writes step 0's task
	}{{tr, false}, {tr, true}, {"", false}} {
		id := runID(900 + i)
		nr := def
		nr.ID, nr.Owner, nr.Input, nr.Now, nr.Trace = id, "o", "{}", t0, c.trace
		nr.Def, nr.Template = versions["wf"], tmpl
		if c.first {
			nr.FirstTask = tasks.Step{RunID: id, Workflow: "wf", Index: 0, Name: "a", Attempt: 1}.AsynqMessage("q", time.Minute)
		}
		res, err := s.CreateRun(ctxb, nr)
		if err != nil || res.Outcome != retrystate.OutcomeCreated || res.Enqueued != c.first {
			t.Fatalf("create %+v: %+v %v", c, res, err)
		}
		task := tasks.ID(id, 0, 1, 0)
		b, err := s.Begin(ctxb, retrystate.BeginParams{RunID: id, Index: 0, TaskID: task, Token: "t1",
			FenceTTL: 10 * time.Second, Retention: time.Hour, Now: t0, Trace: true})
		if err != nil || b.Outcome != retrystate.OutcomeOK || b.Started.Trace != c.trace {
			t.Fatalf("begin with trace, run %+v: %+v %v", c, b, err)
		}
		// The same delivery asking again, without the trace: none read.
		b, err = s.Begin(ctxb, retrystate.BeginParams{RunID: id, Index: 0, TaskID: task, Token: "t1",
			FenceTTL: 10 * time.Second, Retention: time.Hour, Now: t0})
		if err != nil || b.Outcome != retrystate.OutcomeOK || b.Started.Trace != "" {
			t.Fatalf("begin without trace, run %+v: %+v %v", c, b, err)
		}
		if _, err := s.Complete(ctxb, retrystate.CompleteParams{RunID: id, Index: 0, Token: "t1", Output: "1",
			Retention: time.Hour, Now: t0.Add(time.Second)}); err != nil {
			t.Fatal(err)
		}
		key := "cairn:{" + s.Queue() + "}:run:" + id
		if n, err := rdb.HExists(ctxb, key, "s0.max_attempts").Result(); err != nil || n {
			t.Fatalf("the finished run was not compacted (%v)", err)
		}
		got, err := rdb.HGet(ctxb, key, "trace").Result()
		if c.trace == "" {
			if err == nil {
				t.Errorf("run without a trace has trace %q", got)
			}
		} else if got != c.trace {
			t.Errorf("finished run's trace %q (%v), want %q", got, err, c.trace)
		}
	}
}
