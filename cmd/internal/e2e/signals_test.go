package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// waitsFile is a workflows file of awaits and sleeps (CAIRN_WORKFLOWS_FILE).
const waitsFile = `workflows:
  approve:
    steps:
      - {name: approval, type: await, with: {signal: approved, timeout: 1h}}
      - {name: nap, type: sleep, with: {duration: 3s}}
  sleepy:
    steps:
      - {name: nap, type: sleep, with: {duration: 6s}}
      - {name: until, type: sleep, with: {until: "{{.input.at}}"}}
`

func writeWaitsFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "workflows.yaml")
	if err := os.WriteFile(path, []byte(waitsFile), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// timerFiredOnTime checks that every sleep of the run fired at or after its
// time, and at most late after it or after up, when the worker that fires
// it started, whichever is later.
func timerFiredOnTime(t *testing.T, evs []workflow.Event, late time.Duration, up time.Time) {
	t.Helper()
	set := map[string]time.Time{}
	for _, ev := range evs {
		if ev.Type == workflow.EventTimerSet {
			until, err := time.Parse(time.RFC3339Nano, ev.Details["until"])
			if err != nil {
				t.Fatalf("timer_set of %s: until %q: %v", ev.Step, ev.Details["until"], err)
			}
			set[ev.Step] = until
		}
	}
	fired := 0
	for _, ev := range evs {
		if ev.Type != workflow.EventTimerFired {
			continue
		}
		fired++
		until, ok := set[ev.Step]
		switch {
		case !ok:
			t.Errorf("%s fired without a timer_set", ev.Step)
		case ev.At.Before(until):
			t.Errorf("%s fired at %s, %s before its time %s", ev.Step, ev.At, until.Sub(ev.At), until)
		case ev.At.Sub(until) > late && ev.At.Sub(up) > late:
			t.Errorf("%s fired %s after its time (%s) and %s after the worker's start; want within %s of the later",
				ev.Step, ev.At.Sub(until), until.Format(tsFormat), ev.At.Sub(up), late)
		}
	}
	if fired != len(set) || fired == 0 {
		t.Errorf("%d timers fired, %d set\n%s", fired, len(set), journalText(evs))
	}
}

// TestSignalSurvivesWorkerKillAndRedisRestart: a run waits for a signal; its
// worker is killed (SIGKILL) and Redis restarted (appendonly): the run still
// waits, holding no worker, and a signal sent to it afterwards completes
// the await; the sleep after it fires at its time, not before.
func TestSignalSurvivesWorkerKillAndRedisRestart(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	bin := proctest.Build(t, workerPkg)
	const queue = "signals"
	env := workerEnv(srv, queue, "CAIRN_WORKFLOWS_FILE="+writeWaitsFile(t))
	client := workflow.NewClient(srv.Client(t), workflow.ClientConfig{Queue: queue})

	a := startWorker(t, bin, env)
	run, err := client.Start(ctxb, "approve", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Premise(t, 20*time.Second, "the await to wait", func() bool {
		r, err := client.Get(ctxb, run.ID)
		return err == nil && r.Step("approval").Status == workflow.StepWaiting
	})
	a.Kill(t)
	srv.Kill(t)
	srv.Restart(t)
	r, err := client.Get(ctxb, run.ID)
	if err != nil || r.Status != workflow.StatusRunning || r.WaitingFor == nil || r.WaitingFor.Signal != "approved" {
		t.Fatalf("after the worker's kill and Redis's restart: %+v, %v", r, err)
	}
	b := startWorker(t, bin, env)
	up := time.Now()
	res, err := client.Signal(ctxb, run.ID, "approved", map[string]string{"by": "ann"}, &workflow.SignalOptions{ID: "once"})
	if err != nil || res.Outcome != workflow.SignalDelivered {
		t.Fatalf("signal: %+v %v", res, err)
	}
	if again, err := client.Signal(ctxb, run.ID, "approved", nil, &workflow.SignalOptions{ID: "once"}); err != nil ||
		again.Outcome != workflow.SignalDuplicate {
		t.Fatalf("the signal again: %+v %v", again, err)
	}
	final := testkit.WaitRun(t, client, run.ID, 60*time.Second)
	if final.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s: %s\n%s", final.Status, final.FailureReason, b.Output())
	}
	if out := string(final.Step("approval").Output); out != `{"by":"ann"}` {
		t.Errorf("approval's output %s", out)
	}
	evs, err := client.Events(ctxb, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for typ, want := range map[string]int{workflow.EventAwaitStarted: 1, workflow.EventSignalReceived: 1,
		workflow.EventTimerSet: 1, workflow.EventTimerFired: 1, workflow.EventAttemptCrashed: 0} {
		if n := testkit.CountEvents(evs, typ, ""); n != want {
			t.Errorf("%d %s events, want %d\n%s", n, typ, want, journalText(evs))
		}
	}
	timerFiredOnTime(t, evs, dueCeiling(workerConfig(t, env)), up)
}

// TestSleepSurvivesWorkerKill: a worker is killed (SIGKILL) while a run
// sleeps; another worker fires the timer at its time, never before, and
// the run's second sleep, until a time from its input, fires then too.
func TestSleepSurvivesWorkerKill(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	bin := proctest.Build(t, workerPkg)
	const queue = "sleeps"
	env := workerEnv(srv, queue, "CAIRN_WORKFLOWS_FILE="+writeWaitsFile(t))
	client := workflow.NewClient(srv.Client(t), workflow.ClientConfig{Queue: queue})

	a := startWorker(t, bin, env)
	at := time.Now().Add(9 * time.Second).UTC().Truncate(time.Millisecond)
	run, err := client.Start(ctxb, "sleepy", map[string]string{"at": at.Format(time.RFC3339Nano)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Premise(t, 20*time.Second, "the sleep to begin", func() bool {
		r, err := client.Get(ctxb, run.ID)
		return err == nil && r.Step("nap").Status == workflow.StepWaiting
	})
	a.Kill(t)
	killed := time.Now()
	if r, _ := client.Get(ctxb, run.ID); r.Step("nap").Status != workflow.StepWaiting {
		t.Fatalf("premise: nap %s right after the kill; the kill did not come while it slept", r.Step("nap").Status)
	}
	b := startWorker(t, bin, env)
	up := time.Now()
	final := testkit.WaitRun(t, client, run.ID, 60*time.Second)
	if final.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s: %s\n%s", final.Status, final.FailureReason, b.Output())
	}
	evs, err := client.Events(ctxb, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	timerFiredOnTime(t, evs, dueCeiling(workerConfig(t, env)), up)
	var until string
	for _, ev := range evs {
		if ev.Type == workflow.EventTimerSet && ev.Step == "until" {
			until = ev.Details["until"]
		}
	}
	if got, err := time.Parse(time.RFC3339Nano, until); err != nil || !got.Equal(at) {
		t.Errorf("the second sleep was until %q, want %s (from the input)", until, at)
	}
	t.Logf("worker killed %s after the run started; the run took %s", killed.Sub(final.CreatedAt).Round(100*time.Millisecond),
		final.FinishedAt.Sub(final.CreatedAt).Round(100*time.Millisecond))
}
