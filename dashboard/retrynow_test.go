package dashboard_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// backoffWF is a workflow whose step fails its first attempt and then
// waits an hour for its retry, which succeeds: the run of "retry now".
const backoffWF = "backoff"

func backoffDefinition() workflow.Definition {
	return workflow.Definition{Name: backoffWF,
		Policy: workflow.Policy{MaxAttempts: 3, InitialInterval: time.Hour, MaxInterval: time.Hour,
			Jitter: workflow.JitterNone},
		Steps: []workflow.Step{{Name: "call", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
			if sc.Attempt == 1 {
				return nil, errors.New("503 from upstream")
			}
			return map[string]bool{"ok": true}, nil
		}}}}
}

// retryingRun starts a run of backoffWF owned by alice and waits until its
// step waits out its hour of backoff.
func (e *env) retryingRun() *workflow.Run {
	e.t.Helper()
	run, err := e.client.Start(context.Background(), backoffWF, nil, &workflow.StartOptions{Owner: "alice"})
	if err != nil {
		e.t.Fatal(err)
	}
	testkit.Eventually(e.t, 10*time.Second, "the retry to be scheduled", func() bool {
		r, err := e.client.Get(context.Background(), run.ID)
		return err == nil && r.Steps[0].RetryState == workflow.RetryScheduled
	})
	return run
}

// TestRetryNowEndpoint: POST .../steps/{step}/retry-now makes the step's
// retry due now (the run then succeeds, its backoff an hour long), journaled
// with the caller; a step that does not wait out a backoff is 409 with why,
// a hostile step name 400 or 409, and nothing is written.
func TestRetryNowEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	run := e.retryingRun()
	for _, c := range []struct {
		step   string
		status int
		says   string
	}{
		{"nope", 409, "not waiting out a retry's backoff"},
		{"%3Cscript%3Ealert(1)%3C%2Fscript%3E", 409, "not waiting out a retry's backoff"},
		{strings.Repeat("x", 129), 400, "longer than 128 bytes"},
	} {
		before := e.snapshot(run.ID)
		resp := e.do(req{method: "POST", path: "/api/v1/workflows/" + run.ID + "/steps/" + c.step + "/retry-now",
			token: aliceToken})
		if resp.status != c.status || !strings.Contains(resp.problem(t).Detail, c.says) {
			t.Errorf("retry now of %q: %d %s", c.step, resp.status, resp.body)
		}
		if after := e.snapshot(run.ID); after != before {
			t.Errorf("a refused retry now of %q changed the run", c.step)
		}
	}
	resp := e.do(req{method: "POST", path: "/api/v1/workflows/" + run.ID + "/steps/call/retry-now", token: aliceToken})
	if resp.status != 200 {
		t.Fatalf("retry now: %d %s", resp.status, resp.body)
	}
	var after workflow.Run
	resp.decode(t, &after)
	// (A worker may have begun the attempt before the run was read.)
	if st := after.Steps[0]; st.NextAttemptAt != nil && time.Until(*st.NextAttemptAt) > time.Minute {
		t.Errorf("after retry now the step is due at %v", st.NextAttemptAt)
	}
	if end := e.wait(run.ID); end.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s: %s", end.Status, end.FailureReason)
	}
	evs, err := e.client.Events(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range evs {
		if ev.Type == workflow.EventRetryNow {
			found = ev.Details["actor"] == "alice" && ev.Step == "call" && ev.Attempt == 2
		}
	}
	if !found {
		t.Errorf("no retry_now entry by alice in the journal: %+v", evs)
	}
	again := e.do(req{method: "POST", path: "/api/v1/workflows/" + run.ID + "/steps/call/retry-now", token: aliceToken})
	if again.status != 409 {
		t.Errorf("retry now of a succeeded run: %d %s", again.status, again.body)
	}
}

// TestUIRetryNowAndRestoreForms: the run page shows a step waiting out
// its backoff a "Retry now" form (a plain POST with the CSRF token: no
// script needed), to its owner and to an admin; a finished run shows an
// admin, and only an admin, the restore form, with the steps it may start
// again from and a confirmation to tick. Following the form (as a browser
// without JavaScript would) makes the retry due: the run succeeds.
func TestUIRetryNowAndRestoreForms(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	run := e.retryingRun()
	action := `action="/runs/` + run.ID + `/steps/call/retry-now"`
	for _, tok := range []string{aliceToken, rootToken} {
		body := string(e.page("/runs/"+run.ID, tok).body)
		if !strings.Contains(body, action) || !strings.Contains(body, `name="csrf" value="`+e.srv.CSRFToken(tok)+`"`) {
			t.Errorf("the run page shows %s no retry-now form with its CSRF token", tok)
		}
		if strings.Contains(body, `id="restore"`) {
			t.Errorf("a running run offers %s the restore form", tok)
		}
	}
	form := url.Values{"csrf": {e.srv.CSRFToken(aliceToken)}}
	resp := e.do(req{method: "POST", path: "/runs/" + run.ID + "/steps/call/retry-now", cookie: aliceToken,
		body: form.Encode(), header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
	if resp.status != 303 {
		t.Fatalf("retry now: %d %s", resp.status, resp.body)
	}
	if end := e.wait(run.ID); end.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s: %s", end.Status, end.FailureReason)
	}
	if body := string(e.page("/runs/"+run.ID, aliceToken).body); strings.Contains(body, action) ||
		strings.Contains(body, `id="restore"`) {
		t.Errorf("a succeeded run shows its owner retry now or restore")
	}
	body := string(e.page("/runs/"+run.ID, rootToken).body)
	if strings.Contains(body, action) || !strings.Contains(body, `action="/runs/`+run.ID+`/restore"`) ||
		!strings.Contains(body, `<option value="call">call</option>`) ||
		!strings.Contains(body, `name="confirm" value="yes" required`) {
		t.Errorf("the succeeded run's page shows an admin no restore form")
	}
	// A failed step has no retry-now form (retry starts it afresh).
	failed := e.failedRun("alice")
	if body := string(e.page("/runs/"+failed.ID, aliceToken).body); strings.Contains(body, "retry-now") {
		t.Errorf("a failed run's page offers retry now")
	}
}
