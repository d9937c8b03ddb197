package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/metrics"
	"github.com/cairnhq/cairn/workflow"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// scrape GETs the handler like Prometheus does and parses the answer.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %s\n%s", resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// scrapeWhen scrapes until ready says the families hold what the test
// waits for, and returns them. The observer counts a run's last step and
// its end after the script that ended the run has returned, and asynq
// counts a processed task after the handler returns: a client can see the
// run ended a moment before either.
func scrapeWhen(t *testing.T, h http.Handler, what string, ready func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
	t.Helper()
	var fams map[string]*dto.MetricFamily
	testkit.Eventually(t, 10*time.Second, what, func() bool {
		fams = scrape(t, h)
		return ready(fams)
	})
	return fams
}

// sample finds the sample of family name with exactly the given labels. A
// histogram's value is its sample count; sum is its sum.
func sample(fams map[string]*dto.MetricFamily, name string, labels ...string) (value, sum float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, 0, false
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), 0, true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), 0, true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), m.Histogram.GetSampleSum(), true
		}
	}
	return 0, 0, false
}

// sumSamples sums the samples of family name that have the given labels
// (and any others).
func sumSamples(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	sum := 0.0
next:
	for _, m := range fams[name].GetMetric() {
		n := 0
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok {
				if v != l.GetValue() {
					continue next
				}
				n++
			}
		}
		if n == len(want) {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// expect checks samples: name, labels..., want.
type expectation struct {
	name   string
	labels []string
	want   float64
}

func check(t *testing.T, fams map[string]*dto.MetricFamily, exps ...expectation) {
	t.Helper()
	for _, e := range exps {
		got, _, ok := sample(fams, e.name, e.labels...)
		if !ok {
			t.Errorf("%s%v: missing", e.name, e.labels)
			continue
		}
		if got != e.want {
			t.Errorf("%s%v = %v, want %v", e.name, e.labels, got, e.want)
		}
	}
}

// TestWorkerMetrics runs a demo run whose transform step is retried once
// and one whose fetch step fails permanently through a real worker, then
// scrapes the metrics.
func TestWorkerMetrics(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	queue := testkit.Queue(t, "metrics")
	reg := prometheus.NewRegistry()
	// Timeout: a loaded machine can hold up a scrape's Redis reads past the 2 s default, and the gauges would be missing.
	m, err := metrics.New(reg, metrics.Config{Redis: rdb, Queue: queue, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	log := testkit.Logger(t)
	const delay = 300 * time.Millisecond
	testkit.StartWorker(t, rdb, workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{
		Queue: queue, Logger: log, Observer: m,
	}}, demo.Definition(workflow.Policy{MaxAttempts: 3, InitialInterval: delay, Jitter: workflow.JitterNone}))

	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: log, Observer: m})
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	ok, err := client.Start(wctx, demo.Name, demo.Input{FailStep: "transform", FailTimes: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := client.Start(wctx, demo.Name, demo.Input{FailStep: "fetch", Permanent: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]workflow.RunStatus{ok.ID: workflow.StatusSucceeded, bad.ID: workflow.StatusFailed} {
		r, err := client.Wait(wctx, id, 20*time.Millisecond)
		if err != nil || r.Status != want {
			t.Fatalf("run %s: %+v, %v; want %s", id, r, err, want)
		}
	}

	wf := []string{"workflow", demo.Name}
	fams := scrapeWhen(t, m.Handler(), "both runs' ends and asynq's 5 processed tasks to be counted", func(fams map[string]*dto.MetricFamily) bool {
		ok, _, _ := sample(fams, "cairn_runs_finished_total", append(wf, "status", "succeeded", "code", "")...)
		failed, _, _ := sample(fams, "cairn_runs_finished_total", append(wf, "status", "failed", "code", workflow.CodePermanentError)...)
		processed, _, _ := sample(fams, "asynq_tasks_processed_total", "queue", queue)
		return ok >= 1 && failed >= 1 && processed >= 5
	})
	step := func(s string, more ...string) []string {
		return append([]string{"workflow", demo.Name, "step", s}, more...)
	}
	check(t, fams,
		expectation{"cairn_runs_started_total", wf, 2},
		expectation{"cairn_runs_finished_total", append(wf, "status", "succeeded", "code", ""), 1},
		expectation{"cairn_runs_finished_total", append(wf, "status", "failed", "code", workflow.CodePermanentError), 1},
		expectation{"cairn_step_attempts_total", step("fetch", "outcome", string(workflow.OutcomeSucceeded)), 1},
		expectation{"cairn_step_attempts_total", step("fetch", "outcome", string(workflow.OutcomeFailedPermanent)), 1},
		expectation{"cairn_step_attempts_total", step("transform", "outcome", string(workflow.OutcomeFailedTransient)), 1},
		expectation{"cairn_step_attempts_total", step("transform", "outcome", string(workflow.OutcomeSucceeded)), 1},
		expectation{"cairn_step_attempts_total", step("deliver", "outcome", string(workflow.OutcomeSucceeded)), 1},
		expectation{"cairn_retries_scheduled_total", step("transform"), 1},
		expectation{"cairn_retry_delay_seconds", wf, 1},
		expectation{"cairn_step_duration_seconds", step("fetch"), 2},
		expectation{"cairn_step_duration_seconds", step("transform"), 2},
		expectation{"cairn_step_duration_seconds", step("deliver"), 1},
		expectation{"cairn_runs", []string{"status", "succeeded"}, 1},
		expectation{"cairn_runs", []string{"status", "failed"}, 1},
		expectation{"cairn_runs", []string{"status", "running"}, 0},
		expectation{"cairn_runs_needing_attention", nil, 1},
		expectation{"asynq_tasks_enqueued_total", []string{"queue", queue, "state", "pending"}, 0},
		// A failed step is not a failed task (docs/dashboard.md, asynqmon
		// under Cairn): asynq counts the attempts processed, none failed,
		// and archives none, with one run failed and a retry behind.
		expectation{"asynq_tasks_failed_total", []string{"queue", queue}, 0},
		expectation{"asynq_tasks_enqueued_total", []string{"queue", queue, "state", "archived"}, 0},
		expectation{"asynq_tasks_enqueued_total", []string{"queue", queue, "state", "retry"}, 0},
	)
	if _, sum, _ := sample(fams, "cairn_retry_delay_seconds", wf...); math.Abs(sum-delay.Seconds()) > 1e-9 {
		t.Errorf("retry delay sum %vs, want %vs", sum, delay.Seconds())
	}
	if n := len(fams["cairn_step_attempts_total"].GetMetric()); n != 5 {
		t.Errorf("%d step attempt series, want 5:\n%v", n, fams["cairn_step_attempts_total"])
	}
	// asynq processed the 5 attempts (fetch, transform twice, deliver; fetch).
	if n, _, ok := sample(fams, "asynq_tasks_processed_total", "queue", queue); !ok || n < 5 {
		t.Errorf("asynq_tasks_processed_total = %v (present %v), want at least 5", n, ok)
	}
	if _, _, ok := sample(fams, "asynq_queue_latency_seconds", "queue", queue); !ok {
		t.Error("asynq_queue_latency_seconds missing")
	}
	if n, _, ok := sample(fams, "cairn_metrics_collect_errors_total", "source", "runs"); ok && n > 0 {
		t.Errorf("%v collect errors", n)
	}
}

type failingCounts struct{}

func (failingCounts) Counts(context.Context) (map[string]int64, error) {
	return nil, errors.New("redis down")
}

type slowCounts struct{ release chan struct{} }

func (s slowCounts) Counts(context.Context) (map[string]int64, error) {
	<-s.release
	return map[string]int64{"failed": 3}, nil
}

// TestCollectErrors: a failed or slow read leaves its gauges out of the
// scrape and is counted; the scrape itself succeeds.
func TestCollectErrors(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Config{Runs: failingCounts{}})
	if err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, m.Handler())
	if _, _, ok := sample(fams, "cairn_runs_needing_attention"); ok {
		t.Error("a gauge was reported although its read failed")
	}
	// Collectors are gathered concurrently: a count made during one scrape
	// shows in that one or the next.
	if n, _, _ := sample(scrape(t, m.Handler()), "cairn_metrics_collect_errors_total", "source", "runs"); n < 1 || n > 2 {
		t.Errorf("collect errors (runs) = %v after 2 scrapes, want 1 or 2", n)
	}

	slow := slowCounts{release: make(chan struct{})}
	reg2 := prometheus.NewRegistry()
	const timeout = 50 * time.Millisecond
	m2, err := metrics.New(reg2, metrics.Config{Runs: slow, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	fams = scrape(t, m2.Handler())
	// The read never returns: a scrape that waited for it would not
	// return either. A hundred times the timeout is a ceiling only a
	// scrape that does not stop at its timeout misses.
	if d := time.Since(start); d > 100*timeout {
		t.Errorf("scrape took %s with a %s timeout", d, timeout)
	}
	if _, _, ok := sample(fams, "cairn_runs", "status", "failed"); ok {
		t.Error("cairn_runs reported although its read timed out")
	}
	// The stuck read is still out: the next scrapes do not start another.
	scrape(t, m2.Handler())
	fams = scrape(t, m2.Handler())
	if n, _, _ := sample(fams, "cairn_metrics_collect_errors_total", "source", "timeout"); n != 1 {
		t.Errorf("collect errors (timeout) = %v, want 1", n)
	}
	if n, _, _ := sample(fams, "cairn_metrics_collect_errors_total", "source", "busy"); n < 1 {
		t.Errorf("collect errors (busy) = %v, want at least 1", n)
	}
	close(slow.release)
}

func TestObserverDoesNotAllocate(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry(), metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var o workflow.Observer = m
	wf, step := "demo", "fetch"
	ctx := context.Background()
	o.StepAttempt(ctx, "run", wf, step, workflow.OutcomeSucceeded, time.Millisecond)
	o.RetryScheduled(ctx, "run", wf, step, time.Second)
	o.RunStarted(ctx, "run", wf)
	o.RunFinished(ctx, "run", wf, workflow.StatusSucceeded, "")
	if n := testing.AllocsPerRun(200, func() {
		o.StepAttempt(ctx, "run", wf, step, workflow.OutcomeSucceeded, time.Millisecond)
		o.RetryScheduled(ctx, "run", wf, step, time.Second)
		o.RunStarted(ctx, "run", wf)
		o.RunFinished(ctx, "run", wf, workflow.StatusSucceeded, "")
	}); n != 0 {
		t.Errorf("%v allocations per event batch, want 0", n)
	}
	o.Repair("task_missing")
	o.RunFinished(ctx, "run", "", workflow.StatusFailed, workflow.CodeRunTimeout)
	check(t, scrape(t, m.Handler()),
		expectation{"cairn_reconciler_repairs_total", []string{"kind", "task_missing"}, 1},
		expectation{"cairn_runs_finished_total", []string{"workflow", "unknown", "status", "failed", "code", "run_timeout"}, 1},
		expectation{"cairn_step_attempts_total", []string{"workflow", wf, "step", step, "outcome", "succeeded"}, 202})
}

func ExampleNew() {
	reg := prometheus.NewRegistry() // metrics.NewRegistry() adds the Go and process collectors
	// With Config.Redis set, the scrape also reads run counts and asynq's
	// queue state.
	m, err := metrics.New(reg, metrics.Config{})
	if err != nil {
		panic(err)
	}
	// Set m as the Observer of the engine (workflow.EngineConfig.Observer);
	// here we tell it of one run directly.
	ctx := context.Background()
	m.RunStarted(ctx, "run", "signup")
	m.StepAttempt(ctx, "run", "signup", "create_account", workflow.OutcomeSucceeded, 120*time.Millisecond)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.SplitSeq(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, "cairn_runs_started_total") || strings.HasPrefix(line, "cairn_step_attempts_total") {
			fmt.Println(line)
		}
	}
	// Output:
	// cairn_runs_started_total{workflow="signup"} 1
	// cairn_step_attempts_total{outcome="succeeded",step="create_account",workflow="signup"} 1
}

// TestWaitingRunsGauge: cairn_runs_waiting counts the runs waiting in an
// ordering key's line and under a workflow's max_running.
func TestWaitingRunsGauge(t *testing.T) {
	t.Parallel()
	rdb := redistest.Shared(t).Client(t)
	queue := testkit.Queue(t, "metrics")
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Config{Redis: rdb, Queue: queue, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	log := testkit.Logger(t)
	eng, err := workflow.NewEngine(rdb, workflow.EngineConfig{Queue: queue, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	limited := demo.Definition(workflow.Policy{})
	limited.Name, limited.MaxRunning = "limited", 1
	if err := eng.Register(demo.Definition(workflow.Policy{}), limited); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := eng.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: log})
	for range 3 { // one runs, two wait
		if _, err := client.Start(ctx, demo.Name, nil, &workflow.StartOptions{OrderingKey: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // one runs, one waits
		if _, err := client.Start(ctx, "limited", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	check(t, scrape(t, m.Handler()),
		expectation{"cairn_runs_waiting", []string{"reason", "ordering_key"}, 2},
		expectation{"cairn_runs_waiting", []string{"reason", "workflow_limit"}, 1},
		expectation{"cairn_runs_waiting", []string{"reason", "signal"}, 0},
		expectation{"cairn_runs", []string{"status", "pending"}, 5},
	)
}

// TestBreakerMetrics: each circuit breaker's state, openings and deferrals.
func TestBreakerMetrics(t *testing.T) {
	t.Parallel()
	rdb := redistest.Shared(t).Client(t)
	queue := testkit.Queue(t, "metrics")
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Config{Redis: rdb, Queue: queue, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Breakers as the scripts leave them (they are tested in package
	// workflow).
	for name, state := range map[string]string{"billing": "open", "search": "half_open"} {
		rdb.HSet(ctx, "cairn:{"+queue+"}:breaker:"+name, "state", state, "opened", "3", "deferred", "11")
		rdb.ZAdd(ctx, "cairn:{"+queue+"}:idx:breakers", redis.Z{Score: 1, Member: name})
	}
	check(t, scrape(t, m.Handler()),
		expectation{"cairn_breaker_state", []string{"breaker", "billing"}, 1},
		expectation{"cairn_breaker_state", []string{"breaker", "search"}, 2},
		expectation{"cairn_breaker_openings_total", []string{"breaker", "billing"}, 3},
		expectation{"cairn_breaker_deferrals_total", []string{"breaker", "search"}, 11},
	)
}

// TestSagaMetrics: a saga's compensations count under their steps
// "compensate:<step>", a compensated run finishes with status compensated
// and the code of the failure that started its compensations (a cancel
// with compensation: cancelled), a compensation that fails for good fails
// the run with compensation_failed, and cairn_runs reports the runs
// compensating and compensated.
func TestSagaMetrics(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	queue := testkit.Queue(t, "metrics")
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Config{Redis: rdb, Queue: queue, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	log := testkit.Logger(t)
	ok := func(context.Context, *workflow.StepContext) (any, error) { return "ok", nil }
	refuse := func(context.Context, *workflow.StepContext) (any, error) {
		return nil, workflow.Permanent(errors.New("refused"))
	}
	flaky := func(_ context.Context, sc *workflow.StepContext) (any, error) {
		if sc.Attempt == 1 {
			return nil, errors.New("refund service answered 503")
		}
		return "undone", nil
	}
	broken := func(context.Context, *workflow.StepContext) (any, error) { return nil, errors.New("refund rejected") }
	hold := func(ctx context.Context, _ *workflow.StepContext) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	fast := workflow.Policy{MaxAttempts: 3, InitialInterval: 50 * time.Millisecond, Jitter: workflow.JitterNone}
	slow := workflow.Policy{MaxAttempts: 3, InitialInterval: time.Hour, MaxInterval: time.Hour, Jitter: workflow.JitterNone}
	testkit.StartWorker(t, rdb, workflow.WorkerConfig{EngineConfig: workflow.EngineConfig{
		Queue: queue, Logger: log, Observer: m,
	}},
		workflow.Definition{Name: "saga", Policy: fast, OnFailure: workflow.FailureCompensate, Steps: []workflow.Step{
			{Name: "charge", Run: ok, Compensate: flaky},
			{Name: "ship", Run: refuse},
		}},
		workflow.Definition{Name: "stuck", Policy: fast, OnFailure: workflow.FailureCompensate, Steps: []workflow.Step{
			{Name: "charge", Run: ok, Compensate: broken, CompensatePolicy: workflow.Policy{MaxAttempts: 1}},
			{Name: "ship", Run: refuse},
		}},
		workflow.Definition{Name: "slow", Policy: fast, OnFailure: workflow.FailureCompensate, Steps: []workflow.Step{
			{Name: "charge", Run: ok, Compensate: broken, CompensatePolicy: slow},
			{Name: "ship", Run: refuse},
		}},
		workflow.Definition{Name: "hold", Policy: fast, Steps: []workflow.Step{
			{Name: "charge", Run: ok, Compensate: ok},
			{Name: "hold", Run: hold},
		}},
	)
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: log, Observer: m})
	ctx := context.Background()
	start := func(wf string) string {
		run, err := client.Start(ctx, wf, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return run.ID
	}
	wait := func(id string, want workflow.RunStatus) {
		t.Helper()
		if r := testkit.WaitRun(t, client, id, 20*time.Second); r.Status != want {
			t.Fatalf("run %s: %s (%s), want %s", id, r.Status, r.FailureCode, want)
		}
	}
	wait(start("saga"), workflow.StatusCompensated)
	wait(start("stuck"), workflow.StatusFailed)
	slowID := start("slow")
	testkit.Eventually(t, 20*time.Second, "the slow compensation's retry", func() bool {
		r, err := client.Get(ctx, slowID)
		return err == nil && r.Status == workflow.StatusCompensating && r.Step("charge").Compensation.RetryState == workflow.RetryScheduled
	})
	holdID := start("hold")
	testkit.Eventually(t, 20*time.Second, "step hold to run", func() bool {
		r, err := client.Get(ctx, holdID)
		return err == nil && r.Step("hold").Status == workflow.StepRunning
	})
	if _, err := client.Cancel(ctx, holdID, &workflow.ActionOptions{Compensate: true}); err != nil {
		t.Fatal(err)
	}
	wait(holdID, workflow.StatusCompensated)

	fams := scrapeWhen(t, m.Handler(), "the cancelled run's compensated end to be counted", func(fams map[string]*dto.MetricFamily) bool {
		n, _, _ := sample(fams, "cairn_runs_finished_total", "workflow", "hold", "status", "compensated", "code", workflow.CodeCancelled)
		return n >= 1
	})
	step := func(wf, s string, more ...string) []string {
		return append([]string{"workflow", wf, "step", s}, more...)
	}
	check(t, fams,
		expectation{"cairn_runs_finished_total", []string{"workflow", "saga", "status", "compensated", "code", workflow.CodePermanentError}, 1},
		expectation{"cairn_runs_finished_total", []string{"workflow", "hold", "status", "compensated", "code", workflow.CodeCancelled}, 1},
		expectation{"cairn_step_attempts_total", step("saga", "compensate:charge", "outcome", string(workflow.OutcomeFailedTransient)), 1},
		expectation{"cairn_step_attempts_total", step("saga", "compensate:charge", "outcome", string(workflow.OutcomeSucceeded)), 1},
		expectation{"cairn_step_attempts_total", step("stuck", "compensate:charge", "outcome", string(workflow.OutcomeExhausted)), 1},
		expectation{"cairn_step_attempts_total", step("hold", "compensate:charge", "outcome", string(workflow.OutcomeSucceeded)), 1},
		expectation{"cairn_retries_scheduled_total", step("saga", "compensate:charge"), 1},
		expectation{"cairn_retries_scheduled_total", step("slow", "compensate:charge"), 1},
		expectation{"cairn_step_duration_seconds", step("saga", "compensate:charge"), 2},
		expectation{"cairn_runs", []string{"status", "compensated"}, 2},
		expectation{"cairn_runs", []string{"status", "compensating"}, 1},
		expectation{"cairn_runs", []string{"status", "failed"}, 1},
		expectation{"cairn_runs", []string{"status", "running"}, 0},
		expectation{"cairn_runs_needing_attention", nil, 1},
	)
	// The run whose compensation failed for good is counted failed, once,
	// with the run's code.
	if n, _, ok := sample(fams, "cairn_runs_finished_total", "workflow", "stuck", "status", "failed", "code",
		workflow.CodeCompensationFailed); !ok || n != 1 {
		t.Errorf("%v runs of stuck finished failed with compensation_failed, want 1", n)
	}
	if n := sumSamples(fams, "cairn_runs_finished_total", "workflow", "stuck"); n != 1 {
		t.Errorf("%v runs of stuck finished, want 1 (failed)", n)
	}
	// Neither the saga's failure nor the cancel counted the run as ended
	// before its compensations did.
	for _, wf := range []string{"saga", "slow", "hold"} {
		for _, st := range []string{"failed", "cancelled"} {
			if n, _, ok := sample(fams, "cairn_runs_finished_total", "workflow", wf, "status", st, "code", workflow.CodePermanentError); ok && n > 0 {
				t.Errorf("%s counted %v runs finished %s (permanent_error)", wf, n, st)
			}
			if n, _, ok := sample(fams, "cairn_runs_finished_total", "workflow", wf, "status", st, "code", workflow.CodeCancelled); ok && n > 0 {
				t.Errorf("%s counted %v runs finished %s (cancelled)", wf, n, st)
			}
		}
	}
	if help := fams["cairn_runs"].GetHelp(); !strings.Contains(help, "compensating") || !strings.Contains(help, "compensated") {
		t.Errorf("cairn_runs help %q does not name the saga statuses", help)
	}
	if help := fams["cairn_step_attempts_total"].GetHelp(); !strings.Contains(help, "compensate:<step>") {
		t.Errorf("cairn_step_attempts_total help %q does not say where compensations count", help)
	}
	if help := fams["cairn_runs_finished_total"].GetHelp(); !strings.Contains(help, "compensated") {
		t.Errorf("cairn_runs_finished_total help %q does not name compensated", help)
	}
	// The slow run's hold on a worker ends with the test: cancel it.
	if _, err := client.Cancel(ctx, slowID, nil); err != nil {
		t.Fatal(err)
	}
}
