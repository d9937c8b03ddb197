package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

const enqueuePkg = "github.com/cairnhq/cairn/cmd/enqueue"

// topoEnv is the environment of a worker binary, or of the CLI, on the
// Redis of url (any topology) and queue: quick retries, and a crashed
// worker's attempt found within about 2.5s; a worker registers the demo
// workflow. The HTTP API is off unless extra gives CAIRN_HTTP_ADDR
// (workerEnv).
func topoEnv(url, queue string, extra ...string) []string {
	return append([]string{
		"CAIRN_REDIS_URL=" + url, "CAIRN_QUEUE=" + queue, "CAIRN_HTTP_ADDR=", "CAIRN_LOG_LEVEL=info", "CAIRN_LOG_FORMAT=text",
		"CAIRN_DEMO=true",
		"CAIRN_RETRY_INITIAL_INTERVAL=200ms", "CAIRN_RETRY_MAX_INTERVAL=1s",
		"CAIRN_FENCE_TTL=2s", "CAIRN_SWEEP_INTERVAL=300ms", "CAIRN_RECONCILE_INTERVAL=2s",
	}, extra...)
}

// cliStart starts a demo run with the enqueue binary and returns its ID.
func cliStart(t *testing.T, cli string, env []string, in demo.Input) string {
	t.Helper()
	body, _ := json.Marshal(in)
	stdout, stderr, code := proctest.Run(t, cli, env, "", "start", demo.Name, "--input", string(body))
	if code != 0 {
		t.Fatalf("enqueue start: exit %d: %s%s", code, stdout, stderr)
	}
	return strings.TrimSpace(stdout)
}

// httpGet returns the status and body of GET url, or 0 when it cannot be
// fetched.
func httpGet(url string) (int, string) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url) //nolint:noctx // a test's bounded request
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// demoRun is a run a topology test started, and how it must end: a run of
// the demo workflow with input in or, when block is set, of the chaos
// workflow with no failure injected whose step block waits for the test's
// release (demo.ChaosInput.BlockStep, demo.ReleaseKey).
type demoRun struct {
	client  *workflow.Client
	id      string
	in      demo.Input
	block   string
	crashes int // worker crashes its first step (the chaos run's block step) must have counted
}

// startBlocked starts a chaos run on client whose step block waits for the
// test's release.
func startBlocked(t *testing.T, client *workflow.Client, block string) demoRun {
	t.Helper()
	run, err := client.Start(ctxb, demo.ChaosName, demo.ChaosInput{BlockStep: block}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return demoRun{client: client, id: run.ID, block: block}
}

// blockedRunning reports whether the body of r's block step runs on the
// worker whose pid is pid (any worker when pid is 0), waiting for its
// release: its attempt has begun (attempt_started, once: no hand-back or
// crash yet) and its body's start, with no end, is in the audit of rdb.
func (r demoRun) blockedRunning(t *testing.T, rdb redis.UniversalClient, pid int) bool {
	t.Helper()
	evs, err := r.client.Events(ctxb, r.id)
	if err != nil || testkit.CountEvents(evs, workflow.EventAttemptStarted, r.block) != 1 {
		return false
	}
	var phases []string
	for _, a := range readAudit(t, rdb, r.client.Queue(), r.id) {
		if a.Step == r.block && (pid == 0 || a.PID == pid) {
			phases = append(phases, a.Phase)
		}
	}
	return slices.Equal(phases, []string{"start"})
}

// release lets r's blocked bodies end (demo.ReleaseKey), retrying while
// Redis does not take the write.
func (r demoRun) release(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, "the release of run "+r.id, func() bool {
		return rdb.Set(ctxb, demo.ReleaseKey(r.client.Queue(), r.id), "1", 0).Err() == nil
	})
}

// check waits for the run to end and checks that it ended as its input
// says (succeeded; failed with permanent_error for a permanent failure),
// with each step succeeding once and the injected failures and crashes
// journaled, no more. strictCrashes: no crash other than r.crashes (a
// topology where no write can be lost).
func (r demoRun) check(t *testing.T, timeout time.Duration, strictCrashes bool) *workflow.Run {
	t.Helper()
	steps, first := []string{"fetch", "transform", "deliver"}, "fetch"
	if r.block != "" {
		steps, first = demo.ChaosSteps, r.block
	}
	final := testkit.WaitRun(t, r.client, r.id, timeout)
	evs, err := r.client.Events(ctxb, r.id)
	if err != nil {
		t.Fatal(err)
	}
	bad := func(format string, args ...any) {
		t.Helper()
		t.Errorf("run %s (queue %s, input %+v): %s\n%s", r.id, r.client.Queue(), r.in, fmt.Sprintf(format, args...),
			journalText(evs))
	}
	if r.in.Permanent {
		if final.Status != workflow.StatusFailed || final.FailureCode != "permanent_error" {
			bad("%s %s %q; want failed permanent_error", final.Status, final.FailureCode, final.FailureReason)
		}
		if n := testkit.CountEvents(evs, workflow.EventAttemptSucceeded, ""); n != 0 {
			bad("%d steps succeeded before the permanent failure of its first step", n)
		}
		return final
	}
	if final.Status != workflow.StatusSucceeded {
		bad("%s %s", final.Status, final.FailureReason)
		return final
	}
	for _, step := range steps {
		if n := testkit.CountEvents(evs, workflow.EventAttemptSucceeded, step); n != 1 {
			bad("%s succeeded %d times", step, n)
		}
		want := 0
		if step == r.in.FailStep {
			want = r.in.FailTimes
		}
		if n := testkit.CountEvents(evs, workflow.EventAttemptFailed, step); n != want {
			bad("%s failed %d times, want %d", step, n, want)
		}
	}
	if n := testkit.CountEvents(evs, workflow.EventAttemptCrashed, first); n < r.crashes || strictCrashes && n != r.crashes {
		bad("%s crashed %d times, want %d", first, n, r.crashes)
	}
	if n := testkit.CountEvents(evs, workflow.EventAttemptCrashed, ""); strictCrashes && n != r.crashes {
		bad("%d crashes, want %d", n, r.crashes)
	}
	return final
}

// TestClusterTopology: the worker binary, the CLI and --dashboard-only on
// a Redis Cluster of three masters (appendonly, fsync always), with three
// queues whose hash tags land on the three masters, one worker each:
//
//   - the demo workflow with retries on every queue, runs started by the
//     CLI and by a cluster client;
//   - a worker killed with SIGKILL mid-step (queue 0), the body of a chaos
//     run's step that waits for the test's release: its replacement
//     resumes the step once its fence expires (the reconciler's repair),
//     one crash counted, the body run again on the new worker;
//   - the master of queue 1 killed with SIGKILL while its runs are in
//     flight (two chaos runs' bodies surely, blocked until the master is
//     back), until the other masters flag it failed (the cluster is down
//     meanwhile), then restarted on its data: /readyz of queue 1's worker
//     says 503 while it is down, every worker's 200 once it is back;
//   - webhooks (queue 2): each run's end delivered once, signed.
//
// Every run ends as its input says, each step succeeding once, within a
// ceiling of the cluster's return derived from the workers' settings; no
// chaos run's body ran after its step succeeded or beside another of its
// step (checkChaos); the CLI, the metrics and a --dashboard-only server
// read the runs through the cluster.
func TestClusterTopology(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	start := time.Now()
	c := redistest.StartCluster(t, &redistest.ClusterOptions{AppendOnly: true, AppendFsync: "always"})
	worker := proctest.Build(t, workerPkg)
	cli := proctest.Build(t, enqueuePkg)
	queues := c.QueuesOnDistinctMasters("topo")
	rdb := c.Client(t)
	const secret = "topo-secret"
	rcvURL, requests := hookReceiver(t, secret, func(int) int { return http.StatusOK })

	clients := make([]*workflow.Client, len(queues))
	envs := make([][]string, len(queues))
	addrs := make([]string, len(queues))
	procs := make([]*proctest.Proc, len(queues))
	for i, q := range queues {
		clients[i] = workflow.NewClient(rdb, workflow.ClientConfig{Queue: q, Logger: testkit.Logger(t)})
		addrs[i] = testkit.FreeAddr(t)
		envs[i] = topoEnv(c.URL(), q, "CAIRN_HTTP_ADDR="+addrs[i], "CAIRN_DEMO_CHAOS=true")
		if i == 2 {
			envs[i] = append(envs[i], "CAIRN_WEBHOOK_URL="+rcvURL+"/hooks", "CAIRN_WEBHOOK_SECRET="+secret)
		}
		procs[i] = proctest.Start(t, worker, envs[i])
	}
	for i, p := range procs {
		p.WaitForOutput(t, "worker started", 30*time.Second)
		// The start-up check of asynq's task format ran in its scratch
		// queue, whose slot is on some master.
		p.WaitForOutput(t, "asynq task format checked", time.Second)
		if i == 2 {
			p.WaitForOutput(t, "webhook notifier started", 30*time.Second)
		}
	}
	readyz := func(i int) int {
		code, _ := httpGet("http://" + addrs[i] + "/readyz")
		return code
	}
	for i := range queues {
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("queue %d's worker to be ready", i), func() bool {
			return readyz(i) == http.StatusOK
		})
	}
	t.Logf("cluster and workers up in %s; queues %v on masters %v", time.Since(start).Round(time.Millisecond), queues, c.Addrs())

	var runs []demoRun
	add := func(i int, id string, in demo.Input, crashes int) demoRun {
		r := demoRun{client: clients[i], id: id, in: in, crashes: crashes}
		runs = append(runs, r)
		return r
	}
	startRun := func(i int, in demo.Input) demoRun {
		run, err := clients[i].Start(ctxb, demo.Name, in, nil)
		if err != nil {
			t.Fatal(err)
		}
		return add(i, run.ID, in, 0)
	}
	// Queue 0: the victim of the worker kill, a chaos run whose first step
	// blocks until the test releases it, so that its body surely runs when
	// its worker is killed (its runs with retries start after the kill,
	// which must not land in one of their attempts: only the victim may
	// count a crash).
	victim := startBlocked(t, clients[0], demo.ChaosSteps[0])
	victim.crashes = 1
	runs = append(runs, victim)
	// Queue 2: webhooks, and a permanent failure.
	ok := demo.Input{FailStep: "deliver", FailTimes: 1}
	add(2, cliStart(t, cli, envs[2], ok), ok, 0)
	startRun(2, demo.Input{})
	permanent := startRun(2, demo.Input{FailStep: "fetch", Permanent: true})

	// A worker killed mid-step: once the victim's attempt has begun and its
	// body runs on queue 0's worker, waiting for its release.
	testkit.Premise(t, 60*time.Second, "the victim's first step to be running on queue 0's worker", func() bool {
		return victim.blockedRunning(t, rdb, procs[0].PID())
	})
	victimPID := procs[0].PID()
	procs[0].Kill(t)
	killed := map[int]time.Time{victimPID: time.Now()}
	victim.release(t, rdb)
	procs[0] = startWorker(t, worker, envs[0])
	retry := demo.Input{FailStep: "transform", FailTimes: 2}
	add(0, cliStart(t, cli, envs[0], retry), retry, 0)
	startRun(0, retry)

	// Queue 1: runs in flight when its master dies. Two chaos runs whose
	// first and third steps block until the test releases them, after the
	// master is back: their attempts surely run through the outage; and
	// demo runs with retries, one started by the CLI, which may be anywhere.
	var blocked []demoRun
	for _, step := range []string{demo.ChaosSteps[0], demo.ChaosSteps[2]} {
		r := startBlocked(t, clients[1], step)
		blocked = append(blocked, r)
		runs = append(runs, r)
	}
	var q1cli demoRun // started by the CLI, succeeds after one failure
	for n := range 6 {
		in := demo.Input{StepSleepMS: 300}
		if n%2 == 0 {
			in.FailStep, in.FailTimes = "transform", 1
		}
		if n == 0 {
			q1cli = add(1, cliStart(t, cli, envs[1], in), in, 0)
			continue
		}
		startRun(1, in)
	}

	// A master killed while its queue's runs are in flight.
	testkit.Premise(t, 60*time.Second, "queue 1's blocked bodies to run", func() bool {
		for _, r := range blocked {
			if !r.blockedRunning(t, rdb, procs[1].PID()) {
				return false
			}
		}
		return true
	})
	master := c.Masters[1]
	master.Kill(t)
	masterKilled := time.Now()
	testkit.Eventually(t, 30*time.Second, "queue 1's worker to say it is not ready", func() bool {
		return readyz(1) == http.StatusServiceUnavailable
	})
	c.WaitNodeFailed(t, master)
	master.Restart(t)
	c.WaitHealthy(t)
	healthy := time.Now()
	t.Logf("queue 1's master was down %s", healthy.Sub(masterKilled).Round(time.Millisecond))
	for i := range queues {
		testkit.Eventually(t, 30*time.Second, fmt.Sprintf("queue %d's worker to be ready again", i), func() bool {
			return readyz(i) == http.StatusOK
		})
	}
	for _, r := range blocked {
		r.release(t, rdb)
	}

	// Every run ends soon after the cluster is back: a run in flight on the
	// dead master makes progress within progressCeiling (the slowest
	// repair: a delivery whose reply was lost, dispatched again once its
	// lease is StalledAfter old and the outage grace has passed); the
	// victim's attempt resumes once its fence expires, at a sweep, after
	// the outage grace (four times that is within progressCeiling here);
	// then a run has at most two retries and its steps left, each a due
	// task (dueCeiling).
	cfg := workerConfig(t, envs[0])
	endBy := healthy.Add(progressCeiling(cfg) + 3*dueCeiling(cfg))
	succeeded := make([]int, len(queues))
	finals := map[string]*workflow.Run{}
	for _, r := range runs {
		final := r.check(t, max(time.Until(endBy), time.Second), true)
		if final.Status == workflow.StatusSucceeded {
			succeeded[indexOf(queues, r.client.Queue())]++
		}
		finals[r.id] = final
	}
	if t.Failed() {
		return
	}

	// The chaos runs' bodies (their audit): none ran after its step
	// succeeded or while another body of its step ran (the victim's killed
	// one ran until the kill). The victim's first step: begun on the
	// killed worker, its crash found by the reconciler (a repair; asynq's
	// own recovery would come a minute later), resumed and ended on the new
	// worker.
	for _, q := range queues[:2] {
		chaos, journals := map[string]*workflow.Run{}, map[string][]workflow.Event{}
		for _, r := range runs {
			if r.block != "" && r.client.Queue() == q {
				chaos[r.id] = finals[r.id]
				evs, err := r.client.Events(ctxb, r.id)
				if err != nil {
					t.Fatal(err)
				}
				journals[r.id] = evs
			}
		}
		for _, v := range checkChaos(chaos, journals, readAudit(t, rdb, q, ""), killed, 0).violations {
			t.Error(v)
		}
	}
	evs, err := victim.client.Events(ctxb, victim.id)
	if err != nil {
		t.Fatal(err)
	}
	repaired := false
	for _, ev := range evs {
		repaired = repaired || ev.Type == workflow.EventRepair && ev.Details["kind"] == "crashed_attempt" && ev.Step == victim.block
	}
	if !repaired {
		t.Errorf("the victim: no repair of kind crashed_attempt, the reconciler did not find the crash\n%s", journalText(evs))
	}
	var bodies []string
	for _, a := range readAudit(t, rdb, queues[0], victim.id) {
		if a.Step == victim.block {
			who := "the new worker"
			if a.PID == victimPID {
				who = "the killed worker"
			}
			bodies = append(bodies, a.Phase+" on "+who)
		}
	}
	if want := []string{"start on the killed worker", "start on the new worker", "end on the new worker"}; !slices.Equal(bodies, want) {
		t.Errorf("the victim's %s bodies: %q; want %q", victim.block, bodies, want)
	}

	// Webhooks: each of queue 2's runs' ends notified once (one delivery
	// ID), signed. Delivery is at least once: a request answered 2xx while
	// the cluster was down can be sent again, with the same ID.
	testkit.EventuallyNone(t, deliveredWithin, "queue 2's run ends to be delivered once", func() []string {
		ends := map[string]map[string]bool{}
		for _, h := range requests() {
			if h.verified && (h.event == workflow.NotifyRunSucceeded || h.event == workflow.NotifyRunFailed) {
				if ends[h.note.RunID] == nil {
					ends[h.note.RunID] = map[string]bool{}
				}
				ends[h.note.RunID][h.delivery] = true
			}
		}
		var missing []string
		for _, r := range runs {
			if r.client.Queue() == queues[2] && len(ends[r.id]) != 1 {
				missing = append(missing, fmt.Sprintf("%s (%d delivery IDs)", r.id, len(ends[r.id])))
			}
		}
		return missing
	})

	// The CLI reads a run and lists the failures through the cluster.
	stdout, stderr, code := proctest.Run(t, cli, envs[1], "", "status", q1cli.id)
	if code != 0 || !strings.Contains(stdout, "succeeded") {
		t.Errorf("enqueue status: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, stderr, code = proctest.Run(t, cli, envs[2], "", "list", "--status", "failed")
	if code != 0 || !strings.Contains(stdout, permanent.id) {
		t.Errorf("enqueue list --status failed: exit %d\n%s%s", code, stdout, stderr)
	}

	// Metrics read the cluster: the runs of queue 1, its asynq queue.
	_, body := httpGet("http://" + addrs[1] + "/metrics")
	for _, want := range []string{
		fmt.Sprintf(`cairn_runs{status="succeeded"} %d`, succeeded[1]),
		fmt.Sprintf(`asynq_queue_size{queue=%q}`, queues[1]),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics of queue 1's worker has no %s:\n%s", want, grepLines(body, "cairn_runs", "asynq_queue_size", "collect_errors"))
		}
	}
	if strings.Contains(body, "cairn_metrics_collect_errors_total{") {
		t.Errorf("/metrics: reads of Redis failed:\n%s", grepLines(body, "collect_errors"))
	}

	// --dashboard-only serves the API and readiness from the cluster.
	dashAddr := testkit.FreeAddr(t)
	dash := proctest.Start(t, worker, topoEnv(c.URL(), queues[1], "CAIRN_HTTP_ADDR="+dashAddr), "--dashboard-only")
	dash.WaitForOutput(t, "HTTP API listening", 30*time.Second)
	if code, body := httpGet("http://" + dashAddr + "/readyz"); code != http.StatusOK {
		t.Errorf("--dashboard-only /readyz: %d %s", code, body)
	}
	code, body = httpGet("http://" + dashAddr + "/api/v1/workflows/" + q1cli.id)
	if code != http.StatusOK || !strings.Contains(body, `"status":"succeeded"`) {
		t.Errorf("--dashboard-only GET run: %d %s", code, body)
	}
	t.Logf("%d runs on 3 masters ended as they should in %s", len(runs), time.Since(start).Round(time.Millisecond))
}

// metricValue returns the value of an unlabelled metric in a Prometheus
// text exposition, "" when absent.
func metricValue(body, name string) string {
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// grepLines returns the lines of s that contain any of subs.
func grepLines(s string, subs ...string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(line, sub) {
				out = append(out, line)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// syncReplicas waits until n replicas of master have everything master
// holds: a write and WAIT on one connection (WAIT waits for the writes of
// its connection, which come after all earlier ones in the replication
// stream).
func syncReplicas(t *testing.T, master *redistest.Server, n int) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: master.Addr(), PoolSize: 1})
	defer c.Close()
	var wait *redis.IntCmd
	if _, err := c.Pipelined(ctxb, func(p redis.Pipeliner) error {
		p.Set(ctxb, "e2e:sync", time.Now().UnixNano(), 0)
		wait = redis.NewIntCmd(ctxb, "wait", n, 10000)
		return p.Process(ctxb, wait)
	}); err != nil || wait.Val() < int64(n) {
		t.Fatalf("WAIT %d on %s: %d, %v", n, master.Addr(), wait.Val(), err)
	}
}

// TestSentinelTopology: two worker binaries (one with
// CAIRN_REDIS_MIN_REPLICAS=1) and the CLI on a master with one replica
// (appendonly) and three sentinels. Runs of the demo workflow (with
// retries) are started through Sentinel, by the CLI and by a client, and
// four runs of the chaos workflow whose steps s1 to s4 wait for the test's
// release; once the replica has their creation, the four blocked bodies
// run and a run has succeeded, the master is killed with SIGKILL. The
// sentinels promote the replica; the workers, the client and the CLI
// follow it; the test releases the blocked bodies, and every run
// completes, within a ceiling derived from the workers' settings, each
// step succeeding once in its journal (a transition the old master had
// not yet sent to the replica is lost with it, and done again: a crash
// found by the reconciler, a step run again; see
// TestLostWritesAtFailover). Worker a's writes waited for the replica,
// then, with none left, each waited out its timeout, logged and counted.
func TestSentinelTopology(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	start := time.Now()
	d := redistest.StartSentinel(t, &redistest.SentinelOptions{AppendOnly: true})
	worker := proctest.Build(t, workerPkg)
	cli := proctest.Build(t, enqueuePkg)
	const queue = "sentinel"
	addr := testkit.FreeAddr(t)
	env := topoEnv(d.URL(), queue, "CAIRN_DEMO_CHAOS=true")
	cfg := workerConfig(t, env)
	// Both workers deliver webhooks (the delivery tasks share the queue).
	const secret = "sentinel-secret"
	rcvURL, requests := hookReceiver(t, secret, func(int) int { return http.StatusOK })
	hooks := []string{"CAIRN_WEBHOOK_URL=" + rcvURL + "/hooks", "CAIRN_WEBHOOK_SECRET=" + secret}
	// Worker a's state writes wait for the replica.
	a := proctest.Start(t, worker, append(append(slices.Clip(env), hooks...), "CAIRN_HTTP_ADDR="+addr,
		"CAIRN_REDIS_MIN_REPLICAS=1", "CAIRN_REDIS_MIN_REPLICAS_TIMEOUT=200ms"))
	b := proctest.Start(t, worker, append(append(slices.Clip(env), hooks...), "CAIRN_HTTP_ADDR="))
	a.WaitForOutput(t, "webhook notifier started", 30*time.Second)
	b.WaitForOutput(t, "webhook notifier started", 30*time.Second)
	client := workflow.NewClient(d.Client(t), workflow.ClientConfig{Queue: queue, Logger: testkit.Logger(t)})
	t.Logf("master, replica, 3 sentinels and 2 workers up in %s", time.Since(start).Round(time.Millisecond))

	var runs []demoRun
	for n := range 16 {
		in := demo.Input{StepSleepMS: 250}
		if n%3 == 0 {
			in.FailStep, in.FailTimes = "transform", 1
		}
		if n < 2 {
			runs = append(runs, demoRun{client: client, id: cliStart(t, cli, env, in), in: in})
			continue
		}
		run, err := client.Start(ctxb, demo.Name, in, nil)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, demoRun{client: client, id: run.ID, in: in})
	}
	// Steps surely in flight when the master dies: four bodies that wait
	// for the test's release, at four points of their runs.
	var blocked []demoRun
	for _, step := range demo.ChaosSteps[:4] {
		r := startBlocked(t, client, step)
		blocked = append(blocked, r)
		runs = append(runs, r)
	}
	syncReplicas(t, d.Master, 1)
	rdb := d.Client(t)
	testkit.Premise(t, 60*time.Second, "a run to succeed and the blocked bodies to run", func() bool {
		for _, r := range blocked {
			if !r.blockedRunning(t, rdb, 0) {
				return false
			}
		}
		done, _, err := client.List(ctxb, workflow.ListOptions{Status: workflow.StatusSucceeded})
		return err == nil && len(done) >= 1
	})
	d.Master.Kill(t)
	killed := time.Now()
	d.WaitMaster(t, d.Replicas[0])
	t.Logf("the replica was promoted %s after the master's kill", time.Since(killed).Round(time.Millisecond))
	testkit.Eventually(t, 30*time.Second, "the worker to be ready on the new master", func() bool {
		code, _ := httpGet("http://" + addr + "/readyz")
		return code == http.StatusOK
	})
	ready := time.Now()
	for _, r := range blocked {
		r.release(t, rdb)
	}
	// Every run ends soon after the workers are back: a run whose writes
	// the replica lacked is repaired as after a crash (an expired fence, at
	// a sweep, after the outage grace) or a lost dequeue (a stalled
	// delivery), within progressCeiling; then a run has a retry and its
	// steps left, each a due task (dueCeiling).
	endBy := ready.Add(progressCeiling(cfg) + 3*dueCeiling(cfg))
	crashes := 0
	for _, r := range runs {
		final := r.check(t, max(time.Until(endBy), time.Second), false)
		for _, s := range final.Steps {
			crashes += s.Crashes
		}
	}
	t.Logf("%d runs completed %s after the master's kill; %d attempts found crashed (their completion lost with the old master, or their worker cut off)",
		len(runs), time.Since(killed).Round(time.Millisecond), crashes)

	// With worker b stopped, worker a runs two more: its writes have no
	// replica left to confirm them (whether it ran any step after the
	// failover until now depends on the timing).
	b.Signal(t, syscall.SIGTERM)
	b.Wait(t, 30*time.Second)
	for range 2 {
		run, err := client.Start(ctxb, demo.Name, demo.Input{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := demoRun{client: client, id: run.ID}
		r.check(t, 60*time.Second, false)
		runs = append(runs, r)
	}
	_, body := httpGet("http://" + addr + "/metrics")
	// Worker a's writes waited for the replica, and once it was promoted
	// (leaving no replica) each waited out its timeout, said so, and went
	// on.
	waits, shortfalls := metricValue(body, "cairn_redis_replica_waits_total"), metricValue(body, "cairn_redis_replica_wait_shortfalls_total")
	t.Logf("worker a (CAIRN_REDIS_MIN_REPLICAS=1): %s waits, %s not confirmed in time", waits, shortfalls)
	if waits == "" || waits == "0" || shortfalls == "" || shortfalls == "0" {
		t.Errorf("worker a: %q waits, %q shortfalls; want some of each", waits, shortfalls)
	}
	if !strings.Contains(a.Output(), "not confirmed by enough replicas") {
		t.Error("worker a did not log that its writes had no replica to confirm them")
	}

	// Webhooks: each run's end delivered, at least once (a run end the
	// replica had not received is done, and sent, again).
	testkit.EventuallyNone(t, deliveredWithin, "every run's end to be delivered", func() []string {
		ends := map[string]int{}
		for _, h := range requests() {
			if h.verified && h.event == workflow.NotifyRunSucceeded {
				ends[h.note.RunID]++
			}
		}
		var missing []string
		for _, r := range runs {
			if ends[r.id] == 0 {
				missing = append(missing, r.id)
			}
		}
		return missing
	})

	// --dashboard-only follows the new master too.
	dashAddr := testkit.FreeAddr(t)
	dash := proctest.Start(t, worker, append(slices.Clip(env), "CAIRN_HTTP_ADDR="+dashAddr), "--dashboard-only")
	dash.WaitForOutput(t, "HTTP API listening", 30*time.Second)
	if code, body := httpGet("http://" + dashAddr + "/readyz"); code != http.StatusOK {
		t.Errorf("--dashboard-only /readyz: %d %s", code, body)
	}
	if code, body := httpGet("http://" + dashAddr + "/api/v1/workflows/" + runs[0].id); code != http.StatusOK ||
		!strings.Contains(body, `"status":"succeeded"`) {
		t.Errorf("--dashboard-only GET run: %d %s", code, body)
	}

	// The CLI follows the new master.
	stdout, stderr, code := proctest.Run(t, cli, env, "", "start", demo.Name, "--wait")
	if code != 0 {
		t.Errorf("enqueue start --wait after the failover: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, stderr, code = proctest.Run(t, cli, env, "", "status", runs[0].id)
	if code != 0 || !strings.Contains(stdout, "succeeded") {
		t.Errorf("enqueue status after the failover: exit %d\n%s%s", code, stdout, stderr)
	}
}

// deliveredWithin bounds the wait for webhook deliveries after a failover.
// A delivery is an asynq task on the run's queue: one a worker took before
// the failover, whose acknowledgement or retry the old master took with
// it, is active on the new master until its lease expires, and only then
// handed back and delivered (tasks.AsynqLeaseDuration, 30s). So the wait
// is that lease and a generous margin for the hand-back, the delivery's
// backoff and a loaded machine.
const deliveredWithin = tasks.AsynqLeaseDuration + 60*time.Second
