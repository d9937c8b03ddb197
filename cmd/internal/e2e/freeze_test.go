package e2e

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/cmd/internal/config"
	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// progressCeiling is how soon after Redis comes back every run in flight
// must make progress, for workers with cfg. The slowest repair is a step
// whose task asynq handed out while Redis was away, the reply lost: the
// sweep (which looks for stalled leases every SweepInterval, or every
// stalledEvery when that is shorter) gives it a new dispatch once its lease
// has gone StalledAfter unextended, and not before the reconciler's outage
// grace has passed since Redis answered again: 15s with the defaults (the
// target of issue 10, a figure for make bench). Three times that is a
// ceiling only a broken repair misses; it must stay below asynq's own
// lease recovery (asynqFallback after the dequeue, so 52s after an 8s
// freeze ends), or a test could not tell the repair from asynq's: a wider
// factor would let a test pass with the repair broken.
func progressCeiling(cfg config.Config) time.Duration {
	return 3 * (outageGrace + stalledAfter + max(cfg.SweepInterval, stalledEvery))
}

// TestRedisFreeze: Redis is stopped with SIGSTOP for longer than the
// workers' Redis timeouts and the attempts' fences, with 50 runs in flight
// on two worker processes, and then resumed. While it is frozen the
// workers' commands time out, but those already in its socket buffers run
// when it resumes, their replies lost: asynq moves tasks to active for
// workers that never learn of them, begins take fences nobody holds, retries
// are recorded for attempts whose workers gave up waiting. Every run in
// flight must make progress soon after the resume (progressCeiling: not
// wait for asynq's lease recovery, about 100s), no crash may be counted
// (no worker died), no attempt may fail but those the input asks for, and
// every run must succeed with each step succeeding once.
//
// Eight runs have a step whose body blocks until the test releases it
// (demo.ChaosInput.BlockStep); the test freezes Redis once all eight
// bodies run, so each is in flight for the whole freeze, longer than its
// fence: its worker, unable to renew the fence, must stop it and hand the
// attempt back (attempt_interrupted), and the test releases the bodies
// once all eight have been.
//
// CAIRN_FREEZE_SECONDS sets how long Redis stays frozen (default 8: more
// than the workers' fence TTL here, 5s, and go-redis's read timeout, 3s).
func TestRedisFreeze(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	freeze := 8 * time.Second
	if v := os.Getenv("CAIRN_FREEZE_SECONDS"); v != "" {
		var s int
		if _, err := fmt.Sscan(v, &s); err != nil || s < 1 || s > 120 {
			t.Fatalf("CAIRN_FREEZE_SECONDS=%q: want 1..120", v)
		}
		freeze = time.Duration(s) * time.Second
	}
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true})
	bin := proctest.Build(t, workerPkg)
	const queue = "freeze"
	env := workerEnv(srv, queue, "CAIRN_LOG_LEVEL=info", "CAIRN_RETRY_INITIAL_INTERVAL=1s", "CAIRN_DEMO_CHAOS=true",
		"CAIRN_RETRY_JITTER=none", "CAIRN_RETRY_MAX_ATTEMPTS=4", "CAIRN_CONCURRENCY=40", "CAIRN_FENCE_TTL=5s")
	cfg := workerConfig(t, env)
	workers := []*proctest.Proc{startWorker(t, bin, env), startWorker(t, bin, env)}
	rdb := srv.Client(t)
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue})

	// 50 runs on 2x40 slots (more slots than runs, so that workers poll
	// asynq all the time and some dequeues are under way when Redis
	// freezes). 42 runs of the demo workflow, 3 steps of 600ms, a fifth of
	// which fail their second step once, so that retries are recorded and
	// due around the freeze; 8 runs of the chaos workflow, whose first
	// step blocks until released.
	const runs = 50
	const blockStep = "s1"
	ids := make([]string, runs)
	var blocked []string
	for i := range ids {
		var (
			r   *workflow.Run
			err error
		)
		switch {
		case i%6 == 1 && i%5 != 0:
			r, err = client.Start(ctxb, demo.ChaosName, demo.ChaosInput{SleepMS: 600, BlockStep: blockStep}, nil)
			if err == nil {
				blocked = append(blocked, r.ID)
			}
		case i%5 == 0:
			r, err = client.Start(ctxb, demo.Name, demo.Input{StepSleepMS: 600, FailStep: "transform", FailTimes: 1}, nil)
		default:
			r, err = client.Start(ctxb, demo.Name, demo.Input{StepSleepMS: 600}, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
	}
	// Freeze once the work is well under way (steps succeeded, retries
	// scheduled, tasks queued) and every blocked body runs.
	testkit.Premise(t, 60*time.Second, fmt.Sprintf("15 steps to succeed and the %d blocked bodies to run", len(blocked)),
		func() bool {
			n := 0
			for _, id := range ids {
				r, err := client.Get(ctxb, id)
				if err != nil {
					return false
				}
				for _, s := range r.Steps {
					if s.Status == workflow.StepSucceeded {
						n++
					}
				}
			}
			running := map[string]bool{}
			for _, a := range readAudit(t, rdb, queue, "") {
				if a.Step == blockStep && a.Phase == "start" {
					running[a.RunID] = true
				}
			}
			return n >= 15 && len(running) == len(blocked)
		})
	srv.Freeze(t)
	frozeAt := time.Now()
	// The fault lasts this long; nothing waits on it.
	time.Sleep(freeze)
	srv.Thaw(t)
	resumed := time.Now()
	t.Logf("Redis frozen for %s", resumed.Sub(frozeAt).Round(time.Millisecond))
	// What a sweep right after the thaw finds: the fences that expired
	// during the freeze (the commands queued meanwhile, renewals and begins
	// with the times they were sent at, ran before this one). Their workers
	// are alive; only the reconciler's OutageGrace keeps them from being
	// charged as crashes.
	if n, err := rdb.ZCount(ctxb, "cairn:{"+queue+"}:idx:fences", "-inf",
		strconv.FormatInt(time.Now().UnixMilli(), 10)).Result(); err == nil {
		t.Logf("%d attempts' fences expired when Redis came back", n)
	}

	ceiling := progressCeiling(cfg)
	assertProgress(t, client, ids, frozeAt, resumed, ceiling)

	// The blocked bodies ran through the freeze, longer than their fences:
	// each attempt must have been handed back. (A freeze set shorter than
	// the fence TTL need not outlast any fence.)
	interrupted := func(id string) bool {
		evs, err := client.Events(ctxb, id)
		return err == nil && testkit.CountEvents(evs, workflow.EventAttemptInterrupted, blockStep) > 0
	}
	if freeze > cfg.FenceTTL {
		for _, id := range blocked {
			for !interrupted(id) && time.Now().Before(resumed.Add(ceiling)) {
				time.Sleep(100 * time.Millisecond)
			}
			if !interrupted(id) {
				evs, _ := client.Events(ctxb, id)
				t.Errorf("run %s: its %s was running through the %s freeze, longer than its fence (%s), "+
					"and was not handed back within %s of the thaw\n%s", id, blockStep, freeze, cfg.FenceTTL, ceiling,
					journalText(evs))
			}
		}
	}
	for _, id := range blocked {
		if err := rdb.Set(ctxb, demo.ReleaseKey(queue, id), "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	interruptions := 0
	for _, id := range ids {
		r := testkit.WaitRun(t, client, id, 90*time.Second)
		evs, err := client.Events(ctxb, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != workflow.StatusSucceeded {
			t.Errorf("run %s: %s: %s\n%s", id, r.Status, r.FailureReason, journalText(evs))
			continue
		}
		for _, ev := range evs {
			if ev.Type == workflow.EventAttemptFailed && !strings.Contains(ev.Details["error"], "injected failure") {
				t.Errorf("run %s step %s: attempt %d failed (%s); no attempt may fail because Redis froze\n%s", id,
					ev.Step, ev.Attempt, ev.Details["error"], journalText(evs))
			}
			if ev.Type == workflow.EventAttemptInterrupted {
				interruptions++
			}
		}
		for _, s := range r.Steps {
			if s.Crashes != 0 {
				t.Errorf("run %s step %s: %d crashes counted; no worker crashed\n%s", id, s.Name, s.Crashes,
					journalText(evs))
			}
			if n := testkit.CountEvents(evs, workflow.EventAttemptSucceeded, s.Name); n != 1 {
				t.Errorf("run %s step %s succeeded %d times", id, s.Name, n)
			}
		}
	}
	t.Logf("%d attempts interrupted and resumed", interruptions)
	if t.Failed() || os.Getenv("CAIRN_FREEZE_LOGS") != "" {
		for i, w := range workers {
			t.Logf("worker %d output (tail):\n%s", i, tailLines(w.Output(), 400))
		}
	}
}

// assertProgress checks that every run of ids that had not finished by
// stoppedAt, when Redis stopped, makes progress within ceiling of resumed,
// when it came back: its journal records something (an attempt started or
// ended, a repair, the run's end) after stoppedAt. Nothing is written while
// Redis is away, so what is stamped after stoppedAt was written once it was
// back (a worker's retried write can carry a time from just before the
// restart completed).
func assertProgress(t *testing.T, client *workflow.Client, ids []string, stoppedAt, resumed time.Time, ceiling time.Duration) {
	t.Helper()
	stuck := map[string]bool{}
	for _, id := range ids {
		stuck[id] = true
	}
	progressed := map[string]time.Duration{}
	deadline := resumed.Add(ceiling)
	for len(stuck) > 0 && time.Now().Before(deadline) {
		for id := range stuck {
			evs, err := client.Events(ctxb, id)
			if err != nil {
				continue // Redis is catching up
			}
			for _, ev := range evs {
				if ev.Type == workflow.EventRunSucceeded && ev.At.Before(stoppedAt) {
					delete(stuck, id) // finished before
					break
				}
				if !ev.At.Before(stoppedAt) {
					progressed[id] = max(ev.At.Sub(resumed), 0)
					delete(stuck, id)
					break
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for id := range stuck {
		r, _ := client.Get(ctxb, id)
		evs, _ := client.Events(ctxb, id)
		t.Errorf("run %s made no progress within %s of Redis coming back: %s\n%s", id, ceiling,
			summary(r), journalText(evs))
	}
	slowest := time.Duration(0)
	for _, d := range progressed {
		slowest = max(slowest, d)
	}
	t.Logf("%d runs in flight when Redis stopped; the slowest made progress %s after it came back (ceiling %s)",
		len(progressed), slowest.Round(time.Millisecond), ceiling)
}

func summary(r *workflow.Run) string {
	if r == nil {
		return "<unreadable>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "status=%s current=%s warning=%q", r.Status, r.CurrentStep, r.Warning)
	for _, s := range r.Steps {
		fmt.Fprintf(&b, " [%s %s attempt=%d crashes=%d retry=%s]", s.Name, s.Status, s.Attempts, s.Crashes, s.RetryState)
	}
	return b.String()
}

func journalText(evs []workflow.Event) string {
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].ID < evs[j].ID })
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "  %s %-18s step=%s attempt=%d %v\n", ev.At.Format("15:04:05.000"), ev.Type, ev.Step,
			ev.Attempt, ev.Details)
	}
	return b.String()
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
