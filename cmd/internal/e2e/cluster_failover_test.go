package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/cmd/internal/config"
	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// clusterFailoverCeiling bounds, in TestClusterFailover, how long after a
// replica's promotion the workers run steps again, answer /readyz and
// starts, and stop reporting errors from the dead master. What it takes:
//
//   - the clients' slot maps: every command that the dead master does not
//     answer asks for a reload (cmd/internal/config, followFailovers), go-redis
//     runs one at a time, 200ms apart, and the first after the promotion
//     names the promoted replica; a reload that tries the dead node first
//     loses 5 dials 100ms apart: under a second;
//   - Cairn's write retries (a checkpoint, a retry schedule) back off to at
//     most 2s, which they have reached by the promotion: the cluster takes
//     its node timeout (3s here) and an election to promote the replica;
//     asynq's fetch loop retries at once;
//   - a step body (100ms here), and the test's polls (100ms, 250ms for
//     starts).
//
// About 3s in all; 15s is five times that, for a loaded 2-core machine. A
// client that does not follow the promotion keeps its stale map until
// go-redis reloads it on its own, once it is a minute old: the workers
// loaded theirs as they started, about 12s before the promotion on an
// idle machine, so they would recover about 48s after it (as the probe of
// issue 24 saw, and this test does without the reload hook), and beyond
// the ceiling as long as they started less than 45s before it (the test
// checks it as a premise).
const clusterFailoverCeiling = 15 * time.Second

// clusterStateReload is go-redis's ClusterStateReloadInterval, which the
// workers leave at its default: a cluster client reloads a slot map this
// old on its next command.
const clusterStateReload = time.Minute

// TestClusterFailover: two worker binaries on a Redis Cluster of three
// masters and three replicas (cluster-node-timeout 3s), 300 runs of the
// chaos workflow (five steps of 100ms, one attempt in ten failing) on the
// workers and starts coming through both workers' API, when the queue's
// master is killed with SIGKILL: once a fifth of the runs have succeeded
// and four bodies that wait for the test's release run (released after
// the promotion, so steps are surely in flight at the kill and left to
// complete after the promotion). Once the cluster has promoted its
// replica, within clusterFailoverCeiling: steps complete again, each
// worker's /readyz, API starts and asynqmon answer for good, and no worker
// logs an error from the dead master any more. Then every run ends as its
// injected failures say, its end and each step's success journaled once, no
// step body runs twice at once or after its step succeeded (checkChaos,
// from the journals and the bodies' audit trail). Writes the replica had
// not received when its master died are done again, as after a worker
// crash. The figures (promotion, and each recovery after it) are logged.
func TestClusterFailover(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	const (
		runs      = 300
		failRate  = 0.1
		stepSleep = 100
	)
	c := redistest.StartCluster(t, &redistest.ClusterOptions{Replicas: 1, NodeTimeout: 3 * time.Second})
	bin := proctest.Build(t, workerPkg)
	queue := c.QueuesOnDistinctMasters("failover")[0]
	victim, heir := c.Masters[0], c.Replicas[0]
	target, err := config.ParseRedisURL(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := target.NewClient() // one that follows the failover, as the workers' do
	t.Cleanup(func() { _ = rdb.Close() })
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: testkit.Logger(t)})

	addrs := []string{testkit.FreeAddr(t), testkit.FreeAddr(t)}
	workers := make([]*proctest.Proc, len(addrs))
	// The workers' cluster clients load their slot maps once they start.
	workersStarted := time.Now()
	for i, addr := range addrs {
		workers[i] = proctest.Start(t, bin, topoEnv(c.URL(), queue, "CAIRN_HTTP_ADDR="+addr, "CAIRN_DEMO_CHAOS=true",
			fmt.Sprintf("CAIRN_RETRY_MAX_ATTEMPTS=%d", chaosBudget), "CAIRN_MAX_CRASHES=20", "CAIRN_MAX_AUTO_RECOVERIES=50"))
	}
	for _, w := range workers {
		w.WaitForOutput(t, "worker started", 30*time.Second)
		w.WaitForOutput(t, "HTTP API listening", 30*time.Second)
	}
	// Four of the runs have a step (s1 to s4) whose body waits for the
	// test's release: steps surely in flight when the master dies, and
	// surely left to complete after the promotion.
	var blocked []demoRun
	for n := range runs {
		in := demo.ChaosInput{FailRate: failRate, SleepMS: stepSleep}
		if n < 4 {
			in.BlockStep = demo.ChaosSteps[n]
		}
		run, err := client.Start(ctxb, demo.ChaosName, in, nil)
		if err != nil {
			t.Fatalf("start %d: %v", n, err)
		}
		if in.BlockStep != "" {
			blocked = append(blocked, demoRun{client: client, id: run.ID, block: in.BlockStep})
		}
	}

	// Each worker's /readyz and asynqmon, polled every 100ms, and a start
	// through its API every 250ms, until each answers steadily after the
	// failover.
	pollCtx, stopPolls := context.WithCancel(ctxb)
	var polls sync.WaitGroup
	probes := map[string]*probeLog{}
	for i, addr := range addrs {
		base := "http://" + addr
		for name, p := range map[string]struct {
			every time.Duration
			ok    func() bool
		}{
			"/readyz": {100 * time.Millisecond, func() bool { code, _ := httpGet(base + "/readyz"); return code == http.StatusOK }},
			"asynqmon": {100 * time.Millisecond, func() bool {
				code, _ := httpGet(base + "/monitoring/api/queues/" + queue)
				return code == http.StatusOK
			}},
			"a start": {250 * time.Millisecond, func() bool {
				code, _ := httpPost(base+"/api/v1/workflows",
					fmt.Sprintf(`{"workflow":%q,"input":{"fail_rate":%v,"sleep_ms":%d}}`, demo.ChaosName, failRate, stepSleep))
				return code == http.StatusCreated
			}},
		} {
			l := &probeLog{}
			probes[fmt.Sprintf("worker %d %s", i, name)] = l
			polls.Go(func() {
				for pollCtx.Err() == nil {
					l.record(p.ok())
					select {
					case <-pollCtx.Done():
					case <-time.After(p.every):
					}
				}
			})
		}
	}
	defer polls.Wait()
	defer stopPolls()

	// The master dies while steps run: a fifth of the runs have succeeded,
	// and the blocked bodies run.
	testkit.Premise(t, 60*time.Second, "a fifth of the runs to succeed and the blocked bodies to run", func() bool {
		counts, err := client.Counts(ctxb)
		if err != nil || counts[string(workflow.StatusSucceeded)] < runs/5 {
			return false
		}
		for _, r := range blocked {
			if !r.blockedRunning(t, rdb, 0) {
				return false
			}
		}
		return true
	})
	victim.Kill(t)
	killed := time.Now()
	promoted := c.WaitPromoted(t, heir)
	t.Logf("the queue's master was killed %s after the workers started, with %d runs started; its replica was promoted %s later",
		killed.Sub(workersStarted).Round(time.Millisecond), runs, promoted.Sub(killed).Round(time.Millisecond))
	// A client that did not follow the promotion would reload its slot map
	// once it is ClusterStateReloadInterval (a minute) old, and not before:
	// the ceiling tells that from following only while the workers' maps,
	// loaded as they started, are younger than a minute less the ceiling at
	// the promotion.
	if age := promoted.Sub(workersStarted); age > clusterStateReload-clusterFailoverCeiling {
		t.Fatalf("premise: the promotion came %s after the workers started, more than %s: a worker that did not follow it would reload its slot map within the ceiling (%s), and the test could not tell",
			age.Round(time.Millisecond), clusterStateReload-clusterFailoverCeiling, clusterFailoverCeiling)
	}
	// The releases go to the promoted replica itself, which now serves the
	// queue's slot: not through a cluster client, which would have to
	// follow the failover, the mechanism under test.
	node := heir.Client(t)
	for _, r := range blocked {
		r.release(t, node)
	}

	// The polls stop once each has answered ten times in a row after the
	// promotion; then every run ends.
	testkit.Eventually(t, 2*time.Minute, "every poll to answer again", func() bool {
		for _, l := range probes {
			if !l.steady(promoted, 10) {
				return false
			}
		}
		return true
	})
	stopPolls()
	polls.Wait()
	pollsStopped := time.Now()
	testkit.Eventually(t, 3*time.Minute, "every run to end", func() bool {
		counts, err := client.Counts(ctxb)
		if err != nil {
			return false
		}
		for _, st := range workflow.RunStatuses {
			if !st.Terminal() && counts[string(st)] > 0 {
				return false
			}
		}
		return true
	})

	all := map[string]*workflow.Run{}
	journals := map[string][]workflow.Event{}
	for cursor := ""; ; {
		page, next, err := client.List(ctxb, workflow.ListOptions{Limit: 1000, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			if all[r.ID], err = client.Get(ctxb, r.ID); err != nil {
				t.Fatal(err)
			}
			if journals[r.ID], err = client.Events(ctxb, r.ID); err != nil {
				t.Fatal(err)
			}
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	if len(all) < runs {
		t.Fatalf("%d runs listed; want the %d started before the kill and those the API started", len(all), runs)
	}

	// The figures, each after the promotion.
	var firstStep time.Time
	for _, evs := range journals {
		for _, ev := range evs {
			if ev.Type == workflow.EventAttemptSucceeded && ev.At.After(promoted) && (firstStep.IsZero() || ev.At.Before(firstStep)) {
				firstStep = ev.At
			}
		}
	}
	figures := []string{fmt.Sprintf("promoted %s after the kill", promoted.Sub(killed).Round(time.Millisecond))}
	check := func(what string, at time.Time) {
		t.Helper()
		figures = append(figures, fmt.Sprintf("%s %s", what, at.Sub(promoted).Round(time.Millisecond)))
		if at.Sub(promoted) > clusterFailoverCeiling {
			t.Errorf("%s %s after the promotion; want at most %s", what, at.Sub(promoted).Round(time.Millisecond), clusterFailoverCeiling)
		}
	}
	if firstStep.IsZero() {
		t.Error("no step completed after the promotion")
	} else {
		check("first step completed", firstStep)
	}
	for _, name := range slices.Sorted(maps.Keys(probes)) {
		l := probes[name]
		lastFail, back, failed := l.recovery()
		switch {
		case !failed || lastFail.Before(killed):
			t.Errorf("%s: no failure seen after the kill; the poll did not see the outage", name)
		case back.IsZero():
			t.Errorf("%s: no answer after its last failure", name)
		default:
			check(name+" answers", back)
		}
	}
	for i, w := range workers {
		if at, line := lastLineNaming(t, w, victim.Addr(), pollsStopped); !at.IsZero() {
			check(fmt.Sprintf("worker %d's last error from the dead master", i), at)
			if at.Sub(promoted) > clusterFailoverCeiling {
				t.Errorf("worker %d's last line naming the dead master: %s", i, line)
			}
		}
	}
	t.Logf("after the promotion: %s", strings.Join(figures, "; "))

	// Nothing lost, nothing done twice: checkChaos, and each run's end and
	// each step's success journaled once.
	audit := readAudit(t, rdb, queue, "")
	res := checkChaos(all, journals, audit, map[int]time.Time{}, failRate)
	for _, v := range res.violations {
		t.Error(v)
	}
	for id, r := range all {
		evs := journals[id]
		if n := testkit.CountEvents(evs, workflow.EventRunSucceeded, "") + testkit.CountEvents(evs, workflow.EventRunFailed, ""); n != 1 {
			t.Errorf("run %s (%s) journaled %d ends, want 1: %s", id, r.Status, n, journalOf(evs, ""))
		}
		if r.Status != workflow.StatusSucceeded {
			continue
		}
		for _, step := range demo.ChaosSteps {
			if n := testkit.CountEvents(evs, workflow.EventAttemptSucceeded, step); n != 1 {
				t.Errorf("run %s: step %s succeeded %d times, want once: %s", id, step, n, journalOf(evs, step))
			}
		}
	}
	if res.lost != 0 {
		t.Errorf("%d runs lost", res.lost)
	}
	t.Logf("%d runs: %d succeeded, %d failed as injected; %d steps, %d resumed after a crash, %d after a hand-back, %d crashes, %d repairs",
		res.runs, res.succeeded, res.failed, res.steps, res.resumes, res.handBacks, res.crashes, res.repairs)
}

// probeLog records the outcomes of a poll and when each came back.
type probeLog struct {
	mu  sync.Mutex
	at  []time.Time
	oks []bool
}

func (l *probeLog) record(ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at, l.oks = append(l.at, time.Now()), append(l.oks, ok)
}

// steady reports whether the last n outcomes succeeded, all after since.
func (l *probeLog) steady(since time.Time, n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.oks) < n || !l.at[len(l.at)-n].After(since) {
		return false
	}
	return !slices.Contains(l.oks[len(l.oks)-n:], false)
}

// recovery returns the time of the last failure, whether there was any,
// and when the first success after it came back (zero if none did).
func (l *probeLog) recovery() (lastFail, back time.Time, failed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, ok := range l.oks {
		switch {
		case !ok:
			lastFail, back, failed = l.at[i], time.Time{}, true
		case failed && back.IsZero():
			back = l.at[i]
		}
	}
	return lastFail, back, failed
}

// httpPost posts a JSON body to url and returns the status, or 0 when the
// request fails.
func httpPost(url, body string) (int, string) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Post(url, "application/json", strings.NewReader(body)) //nolint:noctx // a test's bounded request
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// lastLineNaming returns the time and text of the last line of p's log
// up to until that names addr (zero if none does). (Later, go-redis's own
// reload of a minute-old slot map may try a node it still lists, the dead
// one, and log that it cannot dial it.)
func lastLineNaming(t *testing.T, p *proctest.Proc, addr string, until time.Time) (time.Time, string) {
	t.Helper()
	var at time.Time
	var last string
	sc := bufio.NewScanner(strings.NewReader(p.Output()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, addr) {
			continue
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		when, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t.Fatalf("a log line without a time: %s", line)
		}
		if when.After(until) {
			break
		}
		at, last = when, line
	}
	return at, last
}
