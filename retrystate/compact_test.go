package retrystate_test

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/retrystate"
	"github.com/cairnhq/cairn/tasks"
)

// twins drives two runs through the same transitions at the same times: one
// created from a published template (it is rewritten compact when it
// ends), and one of the layout before templates (no def; created with its
// fixed fields as arguments, as before), which is never compacted.
// Each is in a queue of its own (so that neither waits behind the other
// in a gate's line).
type twins struct {
	t   *testing.T
	ss  [2]*retrystate.Store
	ids [2]string // compact, plain
}

func newTwins(t *testing.T, base int, nr retrystate.NewRun, setup func(s *retrystate.Store)) *twins {
	t.Helper()
	w := &twins{t: t, ids: [2]string{runID(base), runID(base + 1)}}
	w.ss[0], _ = newStore(t)
	w.ss[1], _ = newStore(t)
	versions, err := w.ss[0].PublishDefinitions(ctxb, []retrystate.PublishedDefinition{{Name: nr.Workflow, JSON: "{}", Run: nr}})
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := w.ss[0].Template(ctxb, versions[nr.Workflow])
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range w.ids {
		if setup != nil {
			setup(w.ss[i])
		}
		r := nr
		r.ID = id
		if i == 0 {
			r.Def, r.Template = versions[nr.Workflow], tmpl
		}
		if _, err := w.ss[i].CreateRun(ctxb, r); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// each runs fn on both runs.
func (w *twins) each(fn func(s *retrystate.Store, id string)) {
	for i, id := range w.ids {
		fn(w.ss[i], id)
	}
}

// step begins and completes step idx, attempt attempt, at now.
func (w *twins) step(idx, attempt int, now time.Time) {
	w.t.Helper()
	w.stepOut(idx, attempt, now, fmt.Sprintf(`{"i":%d}`, idx))
}

// stepOut is step, the attempt returning output.
func (w *twins) stepOut(idx, attempt int, now time.Time, output string) {
	w.t.Helper()
	w.each(func(s *retrystate.Store, id string) {
		w.t.Helper()
		b := begin(w.t, s, id, idx, tasks.ID(id, idx, attempt, 0), "tok", now)
		if b.Outcome != retrystate.OutcomeOK {
			w.t.Fatalf("begin %s step %d: %+v", id, idx, b)
		}
		c, err := s.Complete(ctxb, retrystate.CompleteParams{RunID: id, Index: idx, Token: "tok",
			Output: output, Retention: time.Hour, Now: now.Add(5 * time.Millisecond)})
		if err != nil || c.Outcome == retrystate.OutcomeFenced {
			w.t.Fatalf("complete %s step %d: %+v %v", id, idx, c, err)
		}
	})
}

// check compares what the store reads of the two runs: their records and
// journals (the run IDs, the compact run's def and the journal entries' IDs
// aside), and the compact one must be compact.
func (w *twins) check(compact bool) {
	w.t.Helper()
	var recs [2]*retrystate.Run
	var journals [2][]retrystate.Entry
	for i, id := range w.ids {
		rec, err := w.ss[i].Run(ctxb, id)
		if err != nil {
			w.t.Fatal(err)
		}
		j, err := w.ss[i].Journal(ctxb, id)
		if err != nil {
			w.t.Fatal(err)
		}
		recs[i], journals[i] = normalize(rec, id), j
	}
	h, err := w.ss[0].Redis().HGetAll(ctxb, "cairn:{"+w.ss[0].Queue()+"}:run:"+w.ids[0]).Result()
	if err != nil {
		w.t.Fatal(err)
	}
	if got := h["steps"] == ""; got != compact {
		w.t.Errorf("the run is compact: %v; want %v (%d fields)", got, compact, len(h))
	}
	if recs[0].Def == "" {
		w.t.Error("the run has no def")
	}
	recs[0].Def = ""
	if !reflect.DeepEqual(recs[0], recs[1]) {
		w.t.Errorf("the compact run reads\n%+v\nthe plain one\n%+v", recs[0], recs[1])
		for i := range recs[0].Steps {
			if !reflect.DeepEqual(recs[0].Steps[i], recs[1].Steps[i]) {
				w.t.Errorf("step %d:\n%+v\n%+v", i, recs[0].Steps[i], recs[1].Steps[i])
			}
		}
	}
	if len(journals[0]) != len(journals[1]) {
		w.t.Fatalf("journals of %d and %d entries", len(journals[0]), len(journals[1]))
	}
	for i := range journals[0] {
		a, b := journals[0][i], journals[1][i]
		a.ID, b.ID = "", ""
		for k, v := range a.Fields {
			a.Fields[k] = strings.ReplaceAll(v, w.ids[0], "R")
		}
		for k, v := range b.Fields {
			b.Fields[k] = strings.ReplaceAll(v, w.ids[1], "R")
		}
		if !reflect.DeepEqual(a, b) {
			w.t.Errorf("journal entry %d:\n%+v\n%+v", i, a, b)
		}
	}
	var heads [2]*retrystate.Run
	for i, id := range w.ids {
		list, _, err := w.ss[i].ListRuns(ctxb, retrystate.ListQuery{})
		if err != nil {
			w.t.Fatal(err)
		}
		for _, r := range list {
			if r.ID == id {
				heads[i] = normalize(r, id)
			}
		}
	}
	{
		if heads[0] == nil || heads[1] == nil {
			w.t.Fatal("a run is not listed")
		}
		heads[0].Def = ""
		if !reflect.DeepEqual(heads[0], heads[1]) {
			w.t.Errorf("listed, the compact run reads\n%+v\nthe plain one\n%+v", heads[0], heads[1])
		}
	}
}

// normalize replaces the run's ID, in its record and its steps' task IDs.
func normalize(r *retrystate.Run, id string) *retrystate.Run {
	r.ID = "R"
	for i := range r.Steps {
		r.Steps[i].Task = strings.ReplaceAll(r.Steps[i].Task, id, "R")
		if c := r.Steps[i].Compensation; c != nil {
			c.Task = strings.ReplaceAll(c.Task, id, "R")
		}
	}
	return r
}

func threeStepRun() retrystate.NewRun {
	nr := retrystate.NewRun{Workflow: "wf", Owner: "o", Input: `{"in":1}`, Now: t0}
	for _, name := range []string{"a", "b", "c"} {
		nr.Steps = append(nr.Steps, retrystate.NewStep{Name: name, MaxAttempts: 3, MaxCrashes: 1,
			Timeout: time.Minute, Policy: `{"max_attempts":3,"step_timeout":"1m0s","initial_interval":"1s"}`})
	}
	return nr
}

// A compact run (compact_run: a run that ended successfully or was
// cancelled) reads as the same run of the layout before templates, which
// is left as it is: Store.Run, Journal and ListRuns.
func TestCompactRunReadsAsBefore(t *testing.T) {
	t.Parallel()
	t.Run("succeeded", func(t *testing.T) {
		t.Parallel()
		w := newTwins(t, 100, threeStepRun(), nil)
		w.step(0, 1, t0.Add(time.Second))
		w.step(1, 1, t0.Add(2*time.Second))
		w.check(false)
		w.step(2, 1, t0.Add(3*time.Second))
		w.check(true)
	})
	t.Run("succeeded, its steps returning 0", func(t *testing.T) {
		t.Parallel()
		w := newTwins(t, 150, threeStepRun(), nil)
		for i := range 3 {
			w.stepOut(i, 1, t0.Add(time.Duration(i+1)*time.Second), "0")
		}
		w.check(true)
	})
	t.Run("succeeded after a retry", func(t *testing.T) {
		t.Parallel()
		w := newTwins(t, 200, threeStepRun(), nil)
		w.step(0, 1, t0.Add(time.Second))
		w.each(func(s *retrystate.Store, id string) {
			begin(t, s, id, 1, tasks.ID(id, 1, 1, 0), "tok", t0.Add(2*time.Second))
			if _, err := s.Fail(ctxb, retrystate.FailParams{RunID: id, Index: 1, Token: "tok", Error: "flaky\nline 2",
				Class: retrystate.ClassTransient, Code: "E1", Delay: time.Second, Retention: time.Hour,
				Now: t0.Add(2 * time.Second)}); err != nil {
				t.Fatal(err)
			}
		})
		w.step(1, 2, t0.Add(4*time.Second))
		w.step(2, 1, t0.Add(5*time.Second))
		w.check(true)
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		w := newTwins(t, 300, threeStepRun(), nil)
		w.step(0, 1, t0.Add(time.Second))
		w.each(func(s *retrystate.Store, id string) {
			begin(t, s, id, 1, tasks.ID(id, 1, 1, 0), "tok", t0.Add(2*time.Second))
			if _, err := s.Cancel(ctxb, retrystate.CancelParams{RunID: id, Actor: "ann", Retention: time.Hour,
				Now: t0.Add(3 * time.Second)}); err != nil {
				t.Fatal(err)
			}
		})
		w.check(true)
	})
	t.Run("cancelled waiting in its ordering key's line", func(t *testing.T) {
		t.Parallel()
		first := threeStepRun()
		first.ID, first.OrderingKey, first.OrderingLimit, first.OrderingBlock = runID(400), "k", 1, true
		nr := threeStepRun()
		nr.OrderingKey, nr.OrderingLimit, nr.OrderingBlock = "k", 1, true
		w := newTwins(t, 401, nr, func(s *retrystate.Store) {
			if _, err := s.CreateRun(ctxb, first); err != nil {
				t.Fatal(err)
			}
		})
		w.each(func(s *retrystate.Store, id string) {
			if _, err := s.Cancel(ctxb, retrystate.CancelParams{RunID: id, Actor: "ann", Retention: time.Hour,
				Now: t0.Add(time.Second)}); err != nil {
				t.Fatal(err)
			}
		})
		w.check(true)
	})
	t.Run("a saga that succeeded", func(t *testing.T) {
		t.Parallel()
		nr := threeStepRun()
		nr.Compensate = true
		nr.Steps[0].Compensation = &retrystate.NewCompensation{MaxAttempts: 2, MaxCrashes: 1, Timeout: time.Minute,
			Policy: `{"max_attempts":2}`}
		nr.Steps[1].Group, nr.Steps[2].Group, nr.Steps[2].GroupOptional = "g", "g", true
		nr.Steps[1].GroupOptional = true
		nr.Steps[2].Breaker = &retrystate.BreakerSpec{Name: "dep", FailureThreshold: 3, Window: time.Minute,
			Cooldown: time.Second, MaxCooldown: time.Minute}
		w := newTwins(t, 500, nr, nil)
		w.step(0, 1, t0.Add(time.Second))
		w.step(1, 1, t0.Add(2*time.Second))
		w.step(2, 1, t0.Add(3*time.Second))
		w.check(true)
	})
}

// A compact run that an administrator restores gets its fields back
// (rehydrate) and runs again to its end, as the plain one does.
func TestCompactRunRestores(t *testing.T) {
	t.Parallel()
	w := newTwins(t, 600, threeStepRun(), nil)
	for i := range 3 {
		w.step(i, 1, t0.Add(time.Duration(i+1)*time.Second))
	}
	w.check(true)
	moved := movedJournal(t, w.ss[0], w.ids[0])
	if len(moved) == 0 {
		t.Fatal("the compact run holds no moved journal")
	}
	w.each(func(s *retrystate.Store, id string) {
		res, err := s.Restore(ctxb, retrystate.RestoreParams{RunID: id, FromStep: "b", Actor: "admin",
			Now: t0.Add(10 * time.Second)})
		if err != nil || res.Outcome != retrystate.OutcomeDispatch {
			t.Fatalf("restore %s: %+v %v", id, res, err)
		}
	})
	w.check(false)
	w.step(1, 2, t0.Add(11*time.Second))
	w.step(2, 2, t0.Add(12*time.Second))
	w.check(true) // compact again; its moved journal stays, and its new entries are in a stream
	// Compacted again, the run keeps its moved journal's chunks byte for
	// byte (a chunk's bytes are the DUMP's: "0" or "none" among them too).
	if again := movedJournal(t, w.ss[0], w.ids[0]); !maps.Equal(again, moved) {
		t.Fatalf("the moved journal's fields changed with the second compaction:\n%q\nwant\n%q", again, moved)
	}
	rec, err := w.ss[0].Run(ctxb, w.ids[0])
	if err != nil || rec.Status != retrystate.StatusSucceeded || rec.Steps[1].Attempt != 2 {
		t.Fatalf("%+v %v", rec, err)
	}
}

// A run of a published template is copied from its definition's seed
// (create.lua; keys.go's seed), which the first run of that version makes:
// its hash is field for field what create.lua writes for the same run
// given its fixed fields as arguments (the layout before templates), its
// def aside, whether the seed was there or had to be made again; and a
// create of a run ID that exists refuses on the template path too,
// writing nothing.
func TestCreateFromSeed(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	nr := threeStepRun()
	nr.Steps[0].Compensation = &retrystate.NewCompensation{MaxAttempts: 2, MaxCrashes: 1, Timeout: time.Second,
		Policy: "{}"}
	nr.Steps[0].Group, nr.Steps[0].GroupOptional = "g", true
	nr.Steps[1] = retrystate.NewStep{Name: "approval", Kind: retrystate.KindAwait, Signal: "approve",
		Wait: time.Hour, MaxAttempts: 1, MaxCrashes: 1, Policy: "{}"}
	nr.Steps[2].Breaker = &retrystate.BreakerSpec{Name: "api", FailureThreshold: 3, Window: time.Minute,
		Cooldown: time.Second, MaxCooldown: time.Minute}
	nr.Compensate, nr.RunTimeout, nr.MaxIterations = true, time.Hour, 50
	versions, err := s.PublishDefinitions(ctxb, []retrystate.PublishedDefinition{{Name: nr.Workflow, JSON: "{}", Run: nr}})
	if err != nil {
		t.Fatal(err)
	}
	sha := versions[nr.Workflow]
	tmpl, err := s.Template(ctxb, sha)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "cairn:{" + s.Queue() + "}:"
	// The seed's name carries the create script's version (keys.go's seed).
	seeds := func() []string {
		t.Helper()
		k, err := rdb.Keys(ctxb, prefix+"def:"+sha+":seed:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	hash := func(id string) map[string]string {
		t.Helper()
		h, err := rdb.HGetAll(ctxb, prefix+"run:"+id).Result()
		if err != nil || len(h) == 0 {
			t.Fatalf("run %s: %d fields, %v", id, len(h), err)
		}
		n := map[string]string{}
		for k, v := range h {
			if k != "def" {
				n[k] = strings.ReplaceAll(v, id, "<id>")
			}
		}
		return n
	}
	mk := func(n int, fromTemplate bool) (string, error) {
		r := nr
		r.ID = runID(n)
		if fromTemplate {
			r.Def, r.Template = sha, tmpl
		}
		_, err := s.CreateRun(ctxb, r)
		return r.ID, err
	}
	plain, err := mk(1, false)
	if err != nil {
		t.Fatal(err)
	}
	want := hash(plain)
	for i, step := range []string{"makes the seed", "copies the seed", "makes the seed again"} {
		if i == 2 {
			if err := rdb.Del(ctxb, seeds()...).Err(); err != nil {
				t.Fatal(err)
			}
		}
		id, err := mk(10+i, true)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got := hash(id); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the run hash is\n%v\nwant\n%v", step, got, want)
		}
		if def, _ := rdb.HGet(ctxb, prefix+"run:"+id, "def").Result(); def != sha {
			t.Errorf("%s: def %q, want %q", step, def, sha)
		}
		if k := seeds(); len(k) != 1 {
			t.Errorf("%s: seeds %q, want one", step, k)
		}
	}
	// A collision on the template path: refused, the run as it was.
	before := hash(runID(11))
	if _, err := mk(11, true); !errors.Is(err, retrystate.ErrRunIDCollision) {
		t.Fatalf("create of an existing run ID from the template: %v; want ErrRunIDCollision", err)
	}
	if got := hash(runID(11)); !reflect.DeepEqual(got, before) {
		t.Errorf("after the refused create the run hash is\n%v\nwant\n%v", got, before)
	}
}

// movedJournal returns the fields of run id's hash that hold its moved
// journal (jn, j0, j1, ...).
func movedJournal(t *testing.T, s *retrystate.Store, id string) map[string]string {
	t.Helper()
	h, err := s.Redis().HGetAll(ctxb, "cairn:{"+s.Queue()+"}:run:"+id).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range h {
		if k == "jn" || (len(k) > 1 && k[0] == 'j' && k[1] >= '0' && k[1] <= '9') {
			out[k] = v
		}
	}
	return out
}
