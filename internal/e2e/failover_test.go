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

// lostInput is the input of the lost-writes workflow: each step sleeps
// SleepMS; step b fails transiently on its attempt 1 when FailB.
type lostInput struct {
	SleepMS int  `json:"sleep_ms"`
	FailB   bool `json:"fail_b"`
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
func TestLostWritesAtFailover(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t, nil).Client(t)
	queue := testkit.Queue(t, "lost")
	var (
		mu    sync.Mutex
		execs = map[string]int{} // "<run>/<step>/<attempt>": bodies begun
	)
	executions := func(run, step string, attempt int) int {
		mu.Lock()
		defer mu.Unlock()
		return execs[fmt.Sprintf("%s/%s/%d", run, step, attempt)]
	}
	body := func(ctx context.Context, sc *workflow.StepContext) (any, error) {
		mu.Lock()
		execs[fmt.Sprintf("%s/%s/%d", sc.RunID, sc.Step, sc.Attempt)]++
		mu.Unlock()
		var in lostInput
		if err := sc.DecodeInput(&in); err != nil {
			return nil, workflow.Permanent(err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(in.SleepMS) * time.Millisecond):
		}
		if sc.Step == "b" && in.FailB && sc.Attempt == 1 {
			return nil, workflow.Transient(errors.New("b fails on attempt 1"))
		}
		return sc.Step, nil
	}
	// b's retry comes 1 to 2 s after its failure (equal jitter), so that
	// "retry schedule" restores its snapshot before the retry can begin.
	def := workflow.Definition{Name: "lost", Policy: workflow.Policy{InitialInterval: 2 * time.Second},
		Steps: []workflow.Step{{Name: "a", Run: body}, {Name: "b", Run: body}, {Name: "c", Run: body}}}
	testkit.StartWorker(t, rdb, workflow.WorkerConfig{
		EngineConfig: workflow.EngineConfig{Queue: queue, FenceTTL: time.Second, Logger: testkit.Logger(t)},
		Reconciler:   workflow.ReconcilerConfig{Interval: time.Second, SweepInterval: 200 * time.Millisecond},
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

	t.Run("checkpoint", func(t *testing.T) {
		run, err := client.Start(ctxb, def.Name, lostInput{SleepMS: 400}, nil)
		if err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, "a to run", func() bool { return step(run.ID, "a").Status == workflow.StepRunning })
		snap := takeSnapshot(t, rdb)
		testkit.Eventually(t, 10*time.Second, "a's checkpoint", func() bool { return step(run.ID, "a").Status == workflow.StepSucceeded })
		snap.restore(t, rdb)
		if s := step(run.ID, "a"); s.Status != workflow.StepRunning {
			t.Fatalf("after the failover a is %s; want running (its checkpoint lost)", s.Status)
		}
		final := testkit.WaitRun(t, client, run.ID, 20*time.Second)
		evs := events(run.ID)
		if final.Status != workflow.StatusSucceeded || final.Step("a").Crashes != 1 || executions(run.ID, "a", 1) != 2 ||
			testkit.CountEvents(evs, workflow.EventAttemptSucceeded, "a") != 1 {
			t.Errorf("run %s, a crashed %d times and ran %d times; want succeeded, 1 crash, 2 executions of attempt 1\n%s",
				final.Status, final.Step("a").Crashes, executions(run.ID, "a", 1), journalText(evs))
		}
	})

	t.Run("retry schedule", func(t *testing.T) {
		run, err := client.Start(ctxb, def.Name, lostInput{SleepMS: 300, FailB: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, "b to run", func() bool { return step(run.ID, "b").Status == workflow.StepRunning })
		snap := takeSnapshot(t, rdb)
		testkit.Eventually(t, 10*time.Second, "b's retry to be scheduled", func() bool {
			return step(run.ID, "b").RetryAttempts == 1
		})
		snap.restore(t, rdb)
		final := testkit.WaitRun(t, client, run.ID, 20*time.Second)
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
		if final := testkit.WaitRun(t, client, again.ID, 20*time.Second); final.Status != workflow.StatusSucceeded {
			t.Errorf("the run started again: %s", final.Status)
		}
	})
}
