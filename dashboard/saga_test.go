package dashboard_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// Saga workflows of the tests (every test worker runs them).
const (
	// sagaHoldWF: "charge" (with a compensation) succeeds, then "hold"
	// runs until its context ends: a running run to cancel and compensate.
	sagaHoldWF = "sagahold"
	// sagaStuckWF (on_failure compensate): "ship" fails, then the
	// compensation of "charge" fails on its first undo_fail_times attempts,
	// with one attempt allowed: the run fails with compensation_failed
	// until an operator retries it.
	sagaStuckWF = "sagastuck"
	// sagaSlowWF (on_failure compensate): "ship" fails with the input's
	// "why", and the compensation of "charge" fails transiently, an hour
	// between attempts: the run stays compensating.
	sagaSlowWF = "sagaslow"
	// sagaStopWF (on_failure stop): "ship" fails after "charge", which has
	// a compensation: a failed run that can be compensated.
	sagaStopWF = "sagastop"
	// sagaPromoWF: its optional group "promo" is rolled back after "gift"
	// fails; the run goes on and succeeds.
	sagaPromoWF = "sagapromo"
)

// sagaInput is the input of the saga workflows.
type sagaInput struct {
	UndoFailTimes int    `json:"undo_fail_times"`
	Why           string `json:"why"`
}

func sagaDefinitions() []workflow.Definition {
	did := func(name string) workflow.StepFunc {
		return func(context.Context, *workflow.StepContext) (any, error) { return map[string]string{"did": name}, nil }
	}
	undid := func(name string) workflow.StepFunc {
		return func(context.Context, *workflow.StepContext) (any, error) {
			return map[string]string{"undid": name}, nil
		}
	}
	refuse := func(_ context.Context, sc *workflow.StepContext) (any, error) {
		var in sagaInput
		_ = sc.DecodeInput(&in)
		return nil, workflow.Permanent(errors.New(sc.Step + " refused" + in.Why))
	}
	hold := func(ctx context.Context, _ *workflow.StepContext) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	flakyUndo := func(ctx context.Context, sc *workflow.StepContext) (any, error) {
		var in sagaInput
		if err := sc.DecodeInput(&in); err != nil {
			return nil, err
		}
		if sc.Attempt <= in.UndoFailTimes {
			return nil, errors.New("refund service answered 503")
		}
		return undid(sc.Step)(ctx, sc)
	}
	slowUndo := func(context.Context, *workflow.StepContext) (any, error) {
		return nil, errors.New("refund service answered 503")
	}
	return []workflow.Definition{
		{Name: sagaHoldWF, Policy: demoPolicy, Steps: []workflow.Step{
			{Name: "charge", Run: did("charge"), Compensate: undid("charge")},
			{Name: "hold", Run: hold, Compensate: undid("hold")},
		}},
		{Name: sagaStuckWF, Policy: demoPolicy, OnFailure: workflow.FailureCompensate, Steps: []workflow.Step{
			{Name: "reserve", Run: did("reserve"), Compensate: undid("reserve")},
			{Name: "charge", Run: did("charge"), Compensate: flakyUndo, CompensatePolicy: workflow.Policy{MaxAttempts: 1}},
			{Name: "ship", Run: refuse},
		}},
		{Name: sagaSlowWF, Policy: demoPolicy, OnFailure: workflow.FailureCompensate, Steps: []workflow.Step{
			{Name: "charge", Run: did("charge"), Compensate: slowUndo, CompensatePolicy: workflow.Policy{MaxAttempts: 10,
				InitialInterval: time.Hour, MaxInterval: time.Hour, Jitter: workflow.JitterNone}},
			{Name: "ship", Run: refuse},
		}},
		{Name: sagaStopWF, Policy: demoPolicy, Steps: []workflow.Step{
			{Name: "charge", Run: did("charge"), Compensate: undid("charge")},
			{Name: "ship", Run: refuse},
		}},
		{Name: sagaPromoWF, Policy: demoPolicy, OnFailure: workflow.FailureCompensate,
			Groups: map[string]workflow.Group{"promo": {Optional: true}},
			Steps: []workflow.Step{
				{Name: "order", Run: did("order"), Compensate: undid("order")},
				{Name: "coupon", Run: did("coupon"), Compensate: undid("coupon"), Group: "promo"},
				{Name: "gift", Run: refuse, Group: "promo"},
				{Name: "ship", Run: did("ship")},
			}},
	}
}

// holdingRun starts a sagaHoldWF run of alice and waits until its step
// "hold" runs (after "charge" succeeded); it returns the run as it runs.
func (e *env) holdingRun() *workflow.Run {
	e.t.Helper()
	run := e.startWF(sagaHoldWF, "alice", `{}`)
	testkit.Eventually(e.t, 20*time.Second, "step hold to run", func() bool {
		r, err := e.client.Get(context.Background(), run.ID)
		if err != nil || r.Step("hold").Status != workflow.StepRunning {
			return false
		}
		run = r
		return true
	})
	return run
}

// compensableFailedRun starts a sagaStopWF run of alice and waits until it
// fails, its step "charge" succeeded (with a compensation).
func (e *env) compensableFailedRun() *workflow.Run {
	e.t.Helper()
	run := e.wait(e.startWF(sagaStopWF, "alice", `{}`).ID)
	if run.Status != workflow.StatusFailed {
		e.t.Fatalf("run %s is %s, want failed", run.ID, run.Status)
	}
	return run
}

// stuckRun starts a sagaStuckWF run of owner whose compensation of charge
// fails undoFails times, and waits until it fails with compensation_failed.
func (e *env) stuckRun(owner string) *workflow.Run {
	e.t.Helper()
	run := e.wait(e.startWF(sagaStuckWF, owner, `{"undo_fail_times":1}`).ID)
	if run.Status != workflow.StatusFailed || run.FailureCode != workflow.CodeCompensationFailed {
		e.t.Fatalf("run %s: %s (%s), want failed with compensation_failed", run.ID, run.Status, run.FailureCode)
	}
	return run
}

// postAs POSTs an action as the bearer of token.
func (e *env) postAs(token, path string) response {
	e.t.Helper()
	return e.do(req{method: "POST", path: path, token: token})
}

// TestCancelCompensateEndpoint: POST .../cancel?compensate=true cancels a
// run and compensates its succeeded steps, as its owner or an admin (who
// is audited); a malformed compensate, or one on another action, is 400
// and another user's run 404, changing nothing; a run stopped at a failed
// compensation is 409.
func TestCancelCompensateEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	api := func(id string) string { return "/api/v1/workflows/" + id }

	run := e.holdingRun()
	before := e.snapshot(run.ID)
	for _, tc := range []struct {
		token, path string
		status      int
		kind        string
		detail      string
	}{
		{aliceToken, api(run.ID) + "/cancel?compensate=maybe", 400, dashboard.ProblemInvalidRequest, `"maybe": want true or false`},
		{aliceToken, api(run.ID) + "/cancel?compensate=", 400, dashboard.ProblemInvalidRequest, `"": want true or false`},
		{aliceToken, api(run.ID) + "/cancel?compensate=TRUE", 400, dashboard.ProblemInvalidRequest, "want true or false"},
		{aliceToken, api(run.ID) + "/cancel?compensate=" + strings.Repeat("x", 5000), 400, dashboard.ProblemInvalidRequest,
			"want true or false"},
		{aliceToken, api(run.ID) + "/cancel?compensate=true&compensate=true", 400, dashboard.ProblemInvalidRequest, "given 2 times"},
		{aliceToken, api(run.ID) + "/cancel?compensate=%zz", 400, dashboard.ProblemInvalidRequest, "malformed query string"},
		{aliceToken, api(run.ID) + "/cancel?compensate=true;x=1", 400, dashboard.ProblemInvalidRequest, "malformed query string"},
		{aliceToken, api(run.ID) + "/cancel?x=%zz&compensate=true", 400, dashboard.ProblemInvalidRequest, "malformed query string"},
		{aliceToken, api(run.ID) + "/recover?compensate=true", 400, dashboard.ProblemInvalidRequest, "applies to cancel only"},
		{aliceToken, api(run.ID) + "/steps/hold/retry?compensate=false", 400, dashboard.ProblemInvalidRequest,
			"applies to cancel only"},
		{bobToken, api(run.ID) + "/cancel?compensate=true", 404, dashboard.ProblemNotFound, "run not found"},
		{bobToken, api(run.ID) + "/cancel?compensate=1", 404, dashboard.ProblemNotFound, "run not found"},
		{"", api(run.ID) + "/cancel?compensate=true", 401, dashboard.ProblemUnauthorized, "token"},
	} {
		resp := e.postAs(tc.token, tc.path)
		if resp.status != tc.status {
			t.Errorf("POST %.80s: %d %s, want %d", tc.path, resp.status, resp.body, tc.status)
			continue
		}
		if p := resp.problem(t); p.Type != dashboard.ProblemType(tc.kind) || !strings.Contains(p.Detail, tc.detail) ||
			len(p.Detail) > 300 {
			t.Errorf("POST %.80s: problem %+v, want %s with %q", tc.path, p, tc.kind, tc.detail)
		}
	}
	if after := e.snapshot(run.ID); after != before {
		t.Fatalf("refused requests changed the run:\nbefore %+v\nafter  %+v", before, after)
	}
	if n := len(e.audit()); n != 0 {
		t.Errorf("refused requests were audited: %d entries", n)
	}

	// The owner: compensating (or already compensated), then compensated
	// with code cancelled.
	resp := e.postAs(aliceToken, api(run.ID)+"/cancel?compensate=true")
	if resp.status != 200 {
		t.Fatalf("cancel?compensate=true as the owner: %d %s", resp.status, resp.body)
	}
	var got workflow.Run
	resp.decode(t, &got)
	if got.Status != workflow.StatusCompensating && got.Status != workflow.StatusCompensated {
		t.Errorf("answer's status %s, want compensating", got.Status)
	}
	final := e.wait(run.ID)
	if final.Status != workflow.StatusCompensated || final.FailureCode != workflow.CodeCancelled ||
		final.FailureReason != "cancelled by alice" || final.Step("charge").Status != workflow.StepCompensated {
		t.Errorf("after cancel?compensate=true: %s %q %q, charge %s", final.Status, final.FailureCode, final.FailureReason,
			final.Step("charge").Status)
	}
	evs, err := e.client.Events(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(evs, func(ev workflow.Event) bool {
		return ev.Type == workflow.EventRunCancelled && ev.Details["actor"] == "alice" && ev.Details["compensate"] == "1"
	}) {
		t.Error("no run_cancelled by alice with compensate=1 in the journal")
	}
	if resp := e.postAs(aliceToken, api(run.ID)+"/cancel?compensate=true"); resp.status != 409 ||
		resp.problem(t).Type != dashboard.ProblemType(dashboard.ProblemActionRefused) {
		t.Errorf("cancel?compensate=true of a compensated run: %d %s, want 409", resp.status, resp.body)
	}
	if n := len(e.audit()); n != 0 {
		t.Errorf("the owner's action was audited: %d entries", n)
	}

	// An admin on alice's run: applied, and audited as a cancel with
	// compensation.
	other := e.holdingRun()
	if resp := e.postAs(rootToken, api(other.ID)+"/cancel?compensate=true"); resp.status != 200 {
		t.Fatalf("cancel?compensate=true as an admin: %d %s", resp.status, resp.body)
	}
	if r := e.wait(other.ID); r.Status != workflow.StatusCompensated || r.FailureReason != "cancelled by root" {
		t.Errorf("the admin's cancel with compensation: %s %q", r.Status, r.FailureReason)
	}
	audit := e.audit()
	if len(audit) != 1 || audit[0].Action != "cancel" || audit[0].RunID != other.ID || audit[0].Actor != "root" ||
		audit[0].Owner != "alice" || !strings.Contains(audit[0].Detail, "compensate") {
		t.Errorf("audit %+v, want one cancel with compensation of alice's run by root", audit)
	}

	// compensate=false is a plain cancel.
	plain := e.holdingRun()
	if resp := e.postAs(aliceToken, api(plain.ID)+"/cancel?compensate=false"); resp.status != 200 {
		t.Fatalf("cancel?compensate=false: %d %s", resp.status, resp.body)
	}
	if r := e.wait(plain.ID); r.Status != workflow.StatusCancelled || r.Step("charge").Status != workflow.StepSucceeded {
		t.Errorf("cancel?compensate=false: %s, charge %s; want cancelled, nothing compensated", r.Status, r.Step("charge").Status)
	}

	// A run stopped at a failed compensation: cancel with compensation and
	// skip of the compensation are refused; its retry goes on with the saga.
	stuck := e.stuckRun("alice")
	before = e.snapshot(stuck.ID)
	for _, path := range []string{"/cancel?compensate=true", "/steps/compensate:charge/skip", "/steps/ship/retry"} {
		resp := e.postAs(aliceToken, api(stuck.ID)+path)
		if resp.status != 409 || resp.problem(t).Type != dashboard.ProblemType(dashboard.ProblemActionRefused) {
			t.Errorf("POST %s of a run stopped at a compensation: %d %s, want 409", path, resp.status, resp.body)
		}
	}
	if after := e.snapshot(stuck.ID); after != before {
		t.Fatalf("refused actions changed the run:\nbefore %+v\nafter  %+v", before, after)
	}
	resp = e.postAs(aliceToken, api(stuck.ID)+"/steps/compensate:charge/retry")
	if resp.status != 200 {
		t.Fatalf("retry of the compensation: %d %s", resp.status, resp.body)
	}
	resp.decode(t, &got)
	if got.Status != workflow.StatusCompensating && got.Status != workflow.StatusCompensated {
		t.Errorf("after the retry of the compensation: %s, want compensating", got.Status)
	}
	if r := e.wait(stuck.ID); r.Status != workflow.StatusCompensated || r.FailureCode != workflow.CodePermanentError {
		t.Errorf("after the retry: %s %q, want compensated with permanent_error", r.Status, r.FailureCode)
	}
}

// TestRunJSONCarriesSaga: GET /api/v1/workflows/{id} of a compensating run
// has its statuses, its compensating state and each step's compensation.
func TestRunJSONCarriesSaga(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	run := e.startWF(sagaSlowWF, "alice", `{}`)
	testkit.Eventually(t, 20*time.Second, "the compensation's retry to be scheduled", func() bool {
		r, err := e.client.Get(context.Background(), run.ID)
		return err == nil && r.Step("charge").Compensation.RetryState == workflow.RetryScheduled
	})
	resp := e.do(req{method: "GET", path: "/api/v1/workflows/" + run.ID, token: aliceToken})
	if resp.status != 200 {
		t.Fatalf("GET: %d %s", resp.status, resp.body)
	}
	var m struct {
		Status       string `json:"status"`
		OnFailure    string `json:"on_failure"`
		CurrentStep  string `json:"current_step"`
		FailureCode  string `json:"failure_code"`
		Compensating *struct {
			Then       string `json:"then"`
			FailedStep string `json:"failed_step"`
			FromStep   string `json:"from_step"`
			ToStep     string `json:"to_step"`
		} `json:"compensating"`
		Steps []struct {
			Name         string `json:"name"`
			Status       string `json:"status"`
			Compensation *struct {
				Name       string `json:"name"`
				Status     string `json:"status"`
				Attempts   int    `json:"attempts"`
				RetryState string `json:"retry_state"`
				LastError  string `json:"last_error"`
			} `json:"compensation"`
		} `json:"steps"`
	}
	resp.decode(t, &m)
	if m.Status != "compensating" || m.OnFailure != "compensate" || m.CurrentStep != "compensate:charge" ||
		m.FailureCode != "permanent_error" || m.Compensating == nil || m.Compensating.Then != "compensated" ||
		m.Compensating.FailedStep != "ship" || m.Compensating.FromStep != "charge" || m.Compensating.ToStep != "ship" {
		t.Errorf("run JSON: %s", resp.body)
	}
	if c := m.Steps[0].Compensation; c == nil || c.Name != "compensate:charge" || c.Status != "pending" || c.Attempts != 1 ||
		c.RetryState != "scheduled" || c.LastError != "refund service answered 503" {
		t.Errorf("charge's compensation in the run JSON: %s", resp.body)
	}
	// A plain cancel stops the compensations.
	if resp := e.postAs(aliceToken, "/api/v1/workflows/"+run.ID+"/cancel"); resp.status != 200 {
		t.Fatalf("cancel of a compensating run: %d %s", resp.status, resp.body)
	}
	if r := e.wait(run.ID); r.Status != workflow.StatusCancelled || r.Compensating != nil {
		t.Errorf("after cancel: %s, compensating %+v", r.Status, r.Compensating)
	}
}

// TestEventStreamSagaEvents: the event stream carries a saga's
// run_compensating and run_compensated (not run_failed), and an optional
// group's group_rolled_back, to the run's owner only.
func TestEventStreamSagaEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	alice := e.openStream("alice", aliceToken, "")
	bob := e.openStream("bob", bobToken, "")
	saga := e.startWF(sagaStuckWF, "alice", `{}`) // nothing fails in the compensation: compensated
	promo := e.startWF(sagaPromoWF, "alice", `{}`)
	for _, id := range []string{saga.ID, promo.ID} {
		e.wait(id)
	}
	seen := map[string]map[string]string{}
	for len(seen) < 4 {
		ev := alice.next(20*time.Second, func(ev sseEvent) bool {
			d := ev.decode(t)
			return (d.RunID == saga.ID || d.RunID == promo.ID) && d.Type != ""
		})
		d := ev.decode(t)
		if ev.event != d.Type {
			t.Errorf("event %q carries type %q", ev.event, d.Type)
		}
		if d.RunID == saga.ID && (d.Type == workflow.NotifyRunFailed || d.Type == "step_failed") {
			t.Errorf("the saga's failure sent %s: %s", d.Type, ev.data)
		}
		switch {
		case d.RunID == saga.ID && (d.Type == "run_compensating" || d.Type == "run_compensated"),
			d.RunID == promo.ID && (d.Type == "group_rolled_back" || d.Type == workflow.NotifyRunSucceeded):
			seen[d.RunID+" "+d.Type] = d.Details
		}
	}
	if d := seen[saga.ID+" run_compensating"]; d["step"] != "ship" || d["code"] != "permanent_error" ||
		!strings.Contains(d["reason"], "ship refused") {
		t.Errorf("run_compensating details %v", d)
	}
	if d := seen[saga.ID+" run_compensated"]; d["code"] != "permanent_error" {
		t.Errorf("run_compensated details %v", d)
	}
	if d := seen[promo.ID+" group_rolled_back"]; d["group"] != "promo" || d["step"] != "gift" || d["code"] != "permanent_error" {
		t.Errorf("group_rolled_back details %v", d)
	}
	// Bob sees none of them: a run of his own arrives first.
	mine := e.wait(e.startWF(sagaStuckWF, "bob", `{}`).ID)
	ev := bob.next(20*time.Second, func(ev sseEvent) bool { return ev.event != "" })
	if d := ev.decode(t); d.RunID != mine.ID {
		t.Errorf("bob's stream sent %s of run %s, not his", ev.event, d.RunID)
	}
}

// TestUISagaPages: the run page shows a saga's state, each step's group
// and compensation, and offers the actions the run's state allows: cancel
// and compensate on a running run with something to undo, cancel alone on
// a compensating one, the compensation's retry (and recover) on a run
// stopped at it; everything escaped.
func TestUISagaPages(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	api := func(id string) string { return "/api/v1/workflows/" + id }
	contains := func(what, page string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(page, w) {
				t.Errorf("%s lacks %q", what, w)
			}
		}
	}

	// Running, with a succeeded step to undo.
	hold := e.holdingRun()
	resp := e.page("/runs/"+hold.ID, aliceToken)
	want := []string{"cancel " + api(hold.ID) + "/cancel", "compensate " + api(hold.ID) + "/cancel?compensate=true",
		"pause " + api(hold.ID) + "/pause"}
	if got := actionsOf(resp); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("running saga: actions %v, want %v", got, want)
	}
	contains("the running saga's page", resp.html(), ">Cancel and compensate</button>", `<span class="tag">compensable</span>`,
		"Cancel this run and compensate it?")
	// The button's request, as the script sends it, is accepted.
	act := e.do(req{method: "POST", path: api(hold.ID) + "/cancel?compensate=true", cookie: aliceToken, body: "{}",
		header: map[string]string{dashboard.CSRFHeader: csrfOf(t, resp), "Content-Type": "application/json"}})
	if act.status != 200 {
		t.Fatalf("cancel and compensate with the page's CSRF token: %d %s", act.status, act.body)
	}
	if r := e.wait(hold.ID); r.Status != workflow.StatusCompensated {
		t.Fatalf("after cancel and compensate: %s", r.Status)
	}
	resp = e.page("/runs/"+hold.ID, aliceToken)
	if got := actionsOf(resp); len(got) != 0 {
		t.Errorf("compensated run: actions %v, want none", got)
	}
	contains("the compensated run's page", resp.html(), `data-status="compensated"`,
		`<span class="badge status-compensated">compensated</span>`,
		`data-step="charge" data-step-status="compensated"`,
		`data-compensation="compensate:charge" data-compensation-status="succeeded"`,
		`<span class="code">cancelled</span> cancelled by alice`)
	if list := e.page("/?status=compensated", aliceToken); !strings.Contains(list.html(), hold.ID) ||
		!strings.Contains(list.html(), `<option value="compensated" selected>`) {
		t.Error("the list filtered by status compensated lacks the run or the filter")
	}

	// A failed run with something to undo: recover, retry, compensate.
	stopped := e.wait(e.startWF(sagaStopWF, "alice", `{}`).ID)
	resp = e.page("/runs/"+stopped.ID, aliceToken)
	want = []string{"recover " + api(stopped.ID) + "/recover", "compensate " + api(stopped.ID) + "/cancel?compensate=true",
		"retry " + api(stopped.ID) + "/steps/ship/retry"}
	if got := actionsOf(resp); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("failed run with a compensation: actions %v, want %v", got, want)
	}
	contains("the failed run's page", resp.html(), ">Compensate</button>", "Compensate this failed run?")

	// Compensating, its compensation retrying in an hour; the failure's
	// text is escaped.
	why := `: <script>alert(1)</script>"`
	slow := e.startWF(sagaSlowWF, "alice", `{"why":`+jsonString(why)+`}`)
	testkit.Eventually(t, 20*time.Second, "the compensation's retry to be scheduled", func() bool {
		r, err := e.client.Get(context.Background(), slow.ID)
		return err == nil && r.Step("charge").Compensation.RetryState == workflow.RetryScheduled
	})
	resp = e.page("/runs/"+slow.ID, aliceToken)
	page := resp.html()
	if got := actionsOf(resp); len(got) != 2 || got[0] != "cancel "+api(slow.ID)+"/cancel" || got[1] != "pause "+api(slow.ID)+"/pause" {
		t.Errorf("compensating run: actions %v, want cancel and pause", got)
	}
	contains("the compensating run's page", page, `data-status="compensating"`,
		`<span class="badge status-compensating">compensating</span>`,
		`id="compensating" data-then="compensated"`, "<strong>Compensating:</strong>",
		`<dt>Undoes</dt><dd>the succeeded steps from <span class="mono">charge</span> to <span class="mono">ship</span>; then the run ends compensated</dd>`,
		`at step <span class="mono">ship</span>`, `<span class="code">permanent_error</span>`,
		"Its compensations stop", `data-compensation="compensate:charge" data-compensation-status="pending"`,
		`<span class="badge retrying">retrying</span>`, "refund service answered 503", "max_attempts 10",
		"&lt;script&gt;alert(1)&lt;/script&gt;&#34;")
	if strings.Contains(page, "<script>alert") {
		t.Fatal("the failure reason reached the page unescaped")
	}
	if m := regexp.MustCompile(`(?s)data-compensation="compensate:charge".*?retry in (\d+)s`).FindStringSubmatch(page); m == nil || m[1] == "0" {
		t.Errorf("compensation countdown %v, want about an hour in seconds", m)
	}
	if !strings.Contains(page, `<p class="next-retry">Step <strong>compensate:charge</strong> attempt 1 failed;`) {
		t.Error("the summary does not say when the compensation is retried")
	}

	// Stopped at a failed compensation: recover, or retry it; nothing else.
	stuck := e.stuckRun("alice")
	resp = e.page("/runs/"+stuck.ID, aliceToken)
	want = []string{"recover " + api(stuck.ID) + "/recover", "retry " + api(stuck.ID) + "/steps/compensate:charge/retry"}
	if got := actionsOf(resp); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("run stopped at a compensation: actions %v, want %v", got, want)
	}
	contains("the stopped saga's page", resp.html(), "<strong>Compensations stopped:</strong>",
		`the compensation of step <strong class="mono">charge</strong>`,
		`data-compensation="compensate:charge" data-compensation-status="failed"`,
		`data-compensation="compensate:reserve" data-compensation-status="pending"`, ">Retry compensation</button>",
		`<span class="code">compensation_failed</span>`)
	act = e.do(req{method: "POST", path: api(stuck.ID) + "/steps/compensate:charge/retry", cookie: aliceToken, body: "{}",
		header: map[string]string{dashboard.CSRFHeader: csrfOf(t, resp), "Content-Type": "application/json"}})
	if act.status != 200 {
		t.Fatalf("retry of the compensation with the page's CSRF token: %d %s", act.status, act.body)
	}
	if r := e.wait(stuck.ID); r.Status != workflow.StatusCompensated {
		t.Errorf("after the retry: %s", r.Status)
	}

	// An optional group rolled back: the groups and the rolled-back steps.
	promo := e.wait(e.startWF(sagaPromoWF, "alice", `{}`).ID)
	page = e.page("/runs/"+promo.ID, aliceToken).html()
	contains("the rolled-back group's page", page, `data-status="succeeded"`,
		`data-step="coupon" data-step-status="rolled_back"`, `<span class="badge status-rolled_back">rolled_back</span>`,
		`<span class="tag group" data-group="promo">group promo (optional)</span>`,
		`data-compensation="compensate:coupon" data-compensation-status="succeeded"`, "group_rolled_back")
	if strings.Contains(page, `data-compensation="compensate:order"`) {
		t.Error("the page shows the compensation of a step that was not undone")
	}
}

// TestScriptRefreshesOnEveryNotificationType: the dashboard's script
// listens to every notification type the state scripts write, so that a
// page refreshes on a saga's run_compensating, run_compensated and
// group_rolled_back too.
func TestScriptRefreshesOnEveryNotificationType(t *testing.T) {
	t.Parallel()
	js, err := os.ReadFile("static/cairn.js")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)var types = \[(.*?)\];`).FindSubmatch(js)
	if m == nil {
		t.Fatal("cairn.js has no types array")
	}
	listened := map[string]bool{}
	for _, q := range regexp.MustCompile(`"([a-z_]+)"`).FindAllSubmatch(m[1], -1) {
		listened[string(q[1])] = true
	}
	scripts, err := filepath.Glob("../retrystate/lua/*.lua")
	helpers, herr := filepath.Glob("../retrystate/lua/lib/*.lua") // the helpers the scripts share
	if err != nil || herr != nil || len(scripts) == 0 || len(helpers) == 0 {
		t.Fatalf("no state scripts found: %v %v", err, herr)
	}
	scripts = append(scripts, helpers...)
	written := map[string]bool{}
	for _, path := range scripts {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range regexp.MustCompile(`notify\("([a-z_]+)"`).FindAllSubmatch(src, -1) {
			written[string(n[1])] = true
		}
	}
	for _, typ := range []string{"run_compensating", "run_compensated", "group_rolled_back", "run_failed"} {
		if !written[typ] {
			t.Errorf("no script writes %s: the scan of the scripts is broken", typ)
		}
	}
	for typ := range written {
		if !listened[typ] {
			t.Errorf("cairn.js does not refresh on %s", typ)
		}
	}
}
