package e2e

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/tasks/demo"
	"github.com/cairnhq/cairn/workflow"
)

// progressWithin is how soon after Redis comes back every run in flight must
// make progress (issue 10's target).
const progressWithin = 15 * time.Second

// TestRedisFreeze: Redis is stopped with SIGSTOP for longer than the
// workers' Redis timeouts and the attempts' fences, with 50 runs in flight
// on two worker processes, and then resumed. While it is frozen the
// workers' commands time out, but those already in its socket buffers run
// when it resumes, their replies lost: asynq moves tasks to active for
// workers that never learn of them, begins take fences nobody holds, retries
// are recorded for attempts whose workers gave up waiting. Every run in
// flight must make progress within 15s of the resume (not wait for asynq's
// lease recovery, about 100s), no crash may be counted (no worker died), no
// attempt may fail but those the input asks for, and every run must succeed
// with each step succeeding once. Some runs' steps outlast the fence, so
// their workers, unable to renew it, stop them and hand them back.
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
	env := workerEnv(srv, queue, "CAIRN_LOG_LEVEL=info", "CAIRN_RETRY_INITIAL_INTERVAL=1s",
		"CAIRN_RETRY_JITTER=none", "CAIRN_RETRY_MAX_ATTEMPTS=4", "CAIRN_CONCURRENCY=40", "CAIRN_FENCE_TTL=5s")
	workers := []*proctest.Proc{startWorker(t, bin, env), startWorker(t, bin, env)}
	client := workflow.NewClient(srv.Client(t), workflow.ClientConfig{Queue: queue})

	// 50 runs of 3 steps on 2x40 slots (more slots than runs, so that
	// workers poll asynq all the time and some dequeues are under way when
	// Redis freezes). Most steps take 600ms; a fifth of the runs fail their
	// second step once, so that retries are recorded and due around the
	// freeze; 8 runs have 6s steps, longer than the fence (5s), which their
	// workers cannot renew during the freeze.
	const runs = 50
	ids := make([]string, runs)
	long := map[string]bool{}
	for i := range ids {
		in := demo.Input{StepSleepMS: 600}
		switch {
		case i%5 == 0:
			in.FailStep, in.FailTimes = "transform", 1
		case i%6 == 1:
			in.StepSleepMS = 6000
		}
		r, err := client.Start(ctxb, demo.Name, in, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
		if in.StepSleepMS > 600 {
			long[r.ID] = true
		}
	}
	// Freeze once the work is well under way: steps running, retries
	// scheduled, tasks queued.
	testkit.Eventually(t, 30*time.Second, "15 steps to succeed", func() bool {
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
		return n >= 15
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
	if n, err := srv.Client(t).ZCount(ctxb, "cairn:{"+queue+"}:idx:fences", "-inf",
		strconv.FormatInt(time.Now().UnixMilli(), 10)).Result(); err == nil {
		t.Logf("%d attempts' fences expired when Redis came back", n)
	}

	assertProgress(t, client, ids, frozeAt, resumed)

	interrupted := 0
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
				interrupted++
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
	// The long steps were running at the freeze: their workers stopped and
	// handed them back (a step that could still be saved when Redis came
	// back, like the short ones, ends normally).
	if interrupted == 0 {
		t.Errorf("no attempt was interrupted; %d runs had steps longer than the fence", len(long))
	}
	t.Logf("%d attempts interrupted and resumed", interrupted)
	if t.Failed() || os.Getenv("CAIRN_FREEZE_LOGS") != "" {
		for i, w := range workers {
			t.Logf("worker %d output (tail):\n%s", i, tailLines(w.Output(), 400))
		}
	}
}

// assertProgress checks that every run of ids that had not finished by
// stoppedAt, when Redis stopped, makes progress within progressWithin of
// resumed, when it came back: its journal records something (an attempt
// started or ended, a repair, the run's end) after stoppedAt. Nothing is
// written while Redis is away, so what is stamped after stoppedAt was
// written once it was back (a worker's retried write can carry a time from
// just before the restart completed).
func assertProgress(t *testing.T, client *workflow.Client, ids []string, stoppedAt, resumed time.Time) {
	t.Helper()
	stuck := map[string]bool{}
	for _, id := range ids {
		stuck[id] = true
	}
	progressed := map[string]time.Duration{}
	deadline := resumed.Add(progressWithin)
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
		t.Errorf("run %s made no progress within %s of Redis coming back: %s\n%s", id, progressWithin,
			summary(r), journalText(evs))
	}
	slowest := time.Duration(0)
	for _, d := range progressed {
		slowest = max(slowest, d)
	}
	t.Logf("%d runs in flight when Redis stopped; the slowest made progress %s after it came back", len(progressed),
		slowest.Round(time.Millisecond))
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
