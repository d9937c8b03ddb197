package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// snapshotScript reads the whole database at one instant: key, DUMP and
// PTTL of every key.
var snapshotScript = redis.NewScript(`
local out = {}
for _, k in ipairs(redis.call("KEYS", "*")) do
  out[#out + 1] = k
  out[#out + 1] = redis.call("DUMP", k)
  out[#out + 1] = redis.call("PTTL", k)
end
return out`)

// restoreScript replaces the whole database, at one instant, with a
// snapshot (ARGV: key, dump, pttl, ...).
var restoreScript = redis.NewScript(`
for _, k in ipairs(redis.call("KEYS", "*")) do redis.call("DEL", k) end
for i = 1, #ARGV, 3 do
  local ttl = tonumber(ARGV[i + 2])
  if ttl < 0 then ttl = 0 end
  redis.call("RESTORE", ARGV[i], ttl, ARGV[i + 1], "REPLACE")
end
return #ARGV / 3`)

// dbSnapshot is a database as snapshotScript read it.
type dbSnapshot []any

func takeSnapshot(t *testing.T, rdb *redis.Client) dbSnapshot {
	t.Helper()
	res, err := snapshotScript.Run(ctxb, rdb, nil).Slice()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// restore puts the database back as it was at the snapshot: what a
// failover to a replica that had received everything up to then, and
// nothing after, looks like to Cairn.
func (s dbSnapshot) restore(t *testing.T, rdb *redis.Client) {
	t.Helper()
	if err := restoreScript.Run(ctxb, rdb, nil, s...).Err(); err != nil {
		t.Fatal(err)
	}
}

// lostInput is the input of the lost-writes workflow: the first
// execution of step Hold's attempt 1 waits until the test releases its
// run; step b fails transiently on its attempt 1 when FailB, the first
// time asking for its retry in an hour (workflow.RetryAfter), later times
// with the policy's backoff.
type lostInput struct {
	Hold  string `json:"hold,omitempty"`
	FailB bool   `json:"fail_b,omitempty"`
}

// TestLostWritesAtFailover: what a failover to a replica that missed the
// old master's last writes does to runs, and how Cairn repairs it. The
// database is put back, at one instant, to a snapshot taken a moment
// earlier (as a replica lagging by that moment would be promoted), under
// an in-process worker:
//
//   - a lost checkpoint: the step is running again in Redis, with its old
//     fence; the reconciler finds the fence expired and resumes the
//     attempt (one crash counted), which runs its body again; the run
//     completes, the step succeeding once in the journal;
//   - a lost retry schedule: the same; the failed attempt runs again (it
//     fails again, with the same idempotency key), then its retry runs;
//   - a lost run creation: the run is unknown (ErrRunNotFound), its
//     idempotency key too: starting again with the key makes a new run.
//
// Each snapshot is taken while the step's body surely runs: the body
// waits for the test's release. The lost failure asks for its retry in an
// hour, so the retry surely has not begun when the database is put back.
func TestLostWritesAtFailover(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t, nil).Client(t)
	queue := testkit.Queue(t, "lost")
	var (
		mu       sync.Mutex
		execs    = map[string]int{}           // "<run>/<step>/<attempt>": bodies begun
		releases = map[string]chan struct{}{} // run: closed when the test releases its held body
	)
	released := func(run string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if releases[run] == nil {
			releases[run] = make(chan struct{})
		}
		return releases[run]
	}
	executions := func(run, step string, attempt int) int {
		mu.Lock()
		defer mu.Unlock()
		return execs[fmt.Sprintf("%s/%s/%d", run, step, attempt)]
	}
	body := func(ctx context.Context, sc *workflow.StepContext) (any, error) {
		var in lostInput
		if err := sc.DecodeInput(&in); err != nil {
			return nil, workflow.Permanent(err)
		}
		mu.Lock()
		key := fmt.Sprintf("%s/%s/%d", sc.RunID, sc.Step, sc.Attempt)
		execs[key]++
		n := execs[key]
		mu.Unlock()
		if sc.Step == in.Hold && sc.Attempt == 1 && n == 1 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-released(sc.RunID):
			}
		}
		if sc.Step == "b" && in.FailB && sc.Attempt == 1 {
			err := errors.New("b fails on attempt 1")
			if n == 1 {
				return nil, workflow.RetryAfter(err, time.Hour)
			}
			return nil, workflow.Transient(err)
		}
		return sc.Step, nil
	}
	const fenceTTL, sweep = time.Second, 200 * time.Millisecond
	def := workflow.Definition{Name: "lost", Policy: workflow.Policy{InitialInterval: 200 * time.Millisecond},
		Steps: []workflow.Step{{Name: "a", Run: body}, {Name: "b", Run: body}, {Name: "c", Run: body}}}
	testkit.StartWorker(t, rdb, workflow.WorkerConfig{
		EngineConfig: workflow.EngineConfig{Queue: queue, FenceTTL: fenceTTL, Logger: testkit.Logger(t)},
		Reconciler:   workflow.ReconcilerConfig{Interval: time.Second, SweepInterval: sweep},
	}, def)
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: testkit.Logger(t)})
	step := func(id, name string) workflow.StepState {
		r, err := client.Get(ctxb, id)
		if err != nil {
			t.Fatal(err)
		}
		return *r.Step(name)
	}
	events := func(id string) []workflow.Event {
		evs, err := client.Events(ctxb, id)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	// held waits until the body of name's attempt 1 in run id runs, held:
	// its attempt has begun and its body started once.
	held := func(t *testing.T, id, name string) {
		t.Helper()
		testkit.Premise(t, 30*time.Second, name+"'s body to run, held", func() bool {
			return step(id, name).Status == workflow.StepRunning && executions(id, name, 1) == 1 &&
				testkit.CountEvents(events(id), workflow.EventAttemptStarted, name) == 1
		})
	}
	// Once the database is put back, the reconciler finds the attempt's
	// fence expired (FenceTTL) at a sweep (its SweepInterval), after its
	// outage grace if a call of it to Redis was slow, as on a loaded
	// machine: four times that is a ceiling only a broken repair misses,
	// and below asynq's own recovery of the task (asynqFallback), which
	// would resume the attempt too. The rest of the run is a few steps and
	// a retry 200 ms later.
	endCeiling := 4 * (fenceTTL + sweep + outageGrace)

	t.Run("checkpoint", func(t *testing.T) {
		run, err := client.Start(ctxb, def.Name, lostInput{Hold: "a"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		held(t, run.ID, "a")
		snap := takeSnapshot(t, rdb)
		close(released(run.ID))
		testkit.Eventually(t, 30*time.Second, "a's checkpoint", func() bool { return step(run.ID, "a").Status == workflow.StepSucceeded })
		snap.restore(t, rdb)
		if s := step(run.ID, "a"); s.Status != workflow.StepRunning {
			t.Fatalf("after the failover a is %s; want running (its checkpoint lost)", s.Status)
		}
		final := testkit.WaitRun(t, client, run.ID, endCeiling)
		evs := events(run.ID)
		if final.Status != workflow.StatusSucceeded || final.Step("a").Crashes != 1 || executions(run.ID, "a", 1) != 2 ||
			testkit.CountEvents(evs, workflow.EventAttemptSucceeded, "a") != 1 {
			t.Errorf("run %s, a crashed %d times and ran %d times; want succeeded, 1 crash, 2 executions of attempt 1\n%s",
				final.Status, final.Step("a").Crashes, executions(run.ID, "a", 1), journalText(evs))
		}
	})

	t.Run("retry schedule", func(t *testing.T) {
		run, err := client.Start(ctxb, def.Name, lostInput{Hold: "b", FailB: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		held(t, run.ID, "b")
		snap := takeSnapshot(t, rdb)
		close(released(run.ID))
		testkit.Eventually(t, 30*time.Second, "b's retry to be scheduled", func() bool {
			return step(run.ID, "b").RetryAttempts == 1
		})
		snap.restore(t, rdb)
		final := testkit.WaitRun(t, client, run.ID, endCeiling)
		evs := events(run.ID)
		b := final.Step("b")
		if final.Status != workflow.StatusSucceeded || b.Crashes != 1 || executions(run.ID, "b", 1) != 2 ||
			executions(run.ID, "b", 2) != 1 || testkit.CountEvents(evs, workflow.EventAttemptFailed, "b") != 1 {
			t.Errorf("run %s, b crashed %d times, attempt 1 ran %d times, attempt 2 %d; want succeeded, 1, 2, 1\n%s",
				final.Status, b.Crashes, executions(run.ID, "b", 1), executions(run.ID, "b", 2), journalText(evs))
		}
	})

	t.Run("run creation", func(t *testing.T) {
		snap := takeSnapshot(t, rdb)
		opts := &workflow.StartOptions{IdempotencyKey: "lost-creation"}
		run, err := client.Start(ctxb, def.Name, lostInput{}, opts)
		if err != nil {
			t.Fatal(err)
		}
		snap.restore(t, rdb)
		if _, err := client.Get(ctxb, run.ID); !errors.Is(err, workflow.ErrRunNotFound) {
			t.Fatalf("the lost run: %v; want ErrRunNotFound", err)
		}
		again, err := client.Start(ctxb, def.Name, lostInput{}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if again.ID == run.ID {
			t.Errorf("the same key started %s again; want a new run (the key was lost with the run)", run.ID)
		}
		if final := testkit.WaitRun(t, client, again.ID, endCeiling); final.Status != workflow.StatusSucceeded {
			t.Errorf("the run started again: %s", final.Status)
		}
	})
}
