package dashboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// approvalWF's first step awaits the signal "approved" (an hour at most);
// its second returns what the approval said.
const approvalWF = "approval"

func approvalDefinition() workflow.Definition {
	return workflow.Definition{Name: approvalWF, Steps: []workflow.Step{
		{Name: "approval", Await: &workflow.Await{Signal: "approved", Timeout: time.Hour}},
		{Name: "after", Run: func(_ context.Context, sc *workflow.StepContext) (any, error) {
			o, _ := sc.Output("approval")
			return o, nil
		}},
	}}
}

// waitingRun starts a run of approvalWF owned by owner and waits until its
// await waits.
func (e *env) waitingRun(owner string) *workflow.Run {
	e.t.Helper()
	run, err := e.client.Start(context.Background(), approvalWF, nil, &workflow.StartOptions{Owner: owner})
	if err != nil {
		e.t.Fatal(err)
	}
	testkit.Eventually(e.t, 10*time.Second, "the await to wait", func() bool {
		r, err := e.client.Get(context.Background(), run.ID)
		return err == nil && r.Steps[0].Status == workflow.StepWaiting
	})
	return run
}

func TestSignalEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	run := e.waitingRun("alice")
	path := "/api/v1/workflows/" + run.ID + "/signals/approved"

	for _, c := range []struct {
		name, path, body string
		status           int
		kind             string
	}{
		{"bad JSON", path, `{"ok":`, 400, "invalid-input"},
		{"payload too large", path, `"` + strings.Repeat("x", workflow.MaxSignalPayload) + `"`, 413, "body-too-large"},
		{"bad signal name", "/api/v1/workflows/" + run.ID + "/signals/app-roved", `1`, 400, "invalid-input"},
		{"id too long", path + "?id=" + strings.Repeat("i", 257), `1`, 400, "invalid-request"},
		{"unknown run", "/api/v1/workflows/" + workflow.NewRunID(time.Now()) + "/signals/approved", `1`, 404, "not-found"},
	} {
		resp := e.do(req{method: "POST", path: c.path, token: aliceToken, body: c.body})
		if resp.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, resp.status, resp.body, c.status)
			continue
		}
		if p := resp.problem(t); p.Type != "urn:cairn:problem:"+c.kind {
			t.Errorf("%s: problem %+v, want kind %s", c.name, p, c.kind)
		}
	}

	resp := e.do(req{method: "POST", path: path + "?id=a1", token: aliceToken, body: `{"by":"alice"}`})
	var res workflow.SignalResult
	if resp.status != 200 {
		t.Fatalf("signal: %d %s", resp.status, resp.body)
	}
	resp.decode(t, &res)
	if res.Outcome != workflow.SignalDelivered || res.Step != "approval" {
		t.Fatalf("signal: %+v", res)
	}
	done := e.wait(run.ID)
	if done.Status != workflow.StatusSucceeded || string(done.Step("after").Output) != `{"by":"alice"}` {
		t.Fatalf("run %s, after's output %s", done.Status, done.Step("after").Output)
	}
	// The run has finished: refused, 409.
	if resp := e.do(req{method: "POST", path: path + "?id=a1", token: aliceToken}); resp.status != 409 {
		t.Errorf("signal to a finished run: %d %s", resp.status, resp.body)
	}
}

// The run page of a waiting run says what it waits for and has the signal
// form, for its owner and admins; the form's request, as the script sends
// it, is accepted.
func TestUIWaitingRunShowsSignalForm(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	run := e.waitingRun("alice")
	form := `data-signal-url="/api/v1/workflows/` + run.ID + `/signals/approved"`
	for _, token := range []string{aliceToken, rootToken} {
		resp := e.page("/runs/"+run.ID, token)
		page := resp.html()
		if resp.status != 200 || !strings.Contains(page, form) || !strings.Contains(page, "Waiting for signal") ||
			!strings.Contains(page, `<strong class="mono">approved</strong>`) {
			t.Errorf("as %s: %d, no wait or no signal form\n%s", token, resp.status, page)
		}
	}
	if resp := e.page("/runs/"+run.ID, bobToken); resp.status != 404 || strings.Contains(resp.html(), form) {
		t.Errorf("as another user: %d", resp.status)
	}
	page := e.page("/runs/"+run.ID, aliceToken)
	// Without the CSRF header, the cookie's request is refused.
	path := "/api/v1/workflows/" + run.ID + "/signals/approved"
	if resp := e.do(req{method: "POST", path: path, cookie: aliceToken, body: `{"ok":1}`}); resp.status != 403 {
		t.Fatalf("signal without CSRF: %d %s", resp.status, resp.body)
	}
	resp := e.do(req{method: "POST", path: path, cookie: aliceToken, body: `{"ok":1}`,
		header: map[string]string{dashboard.CSRFHeader: csrfOf(t, page), "Content-Type": "application/json"}})
	if resp.status != 200 {
		t.Fatalf("signal with the page's CSRF token: %d %s", resp.status, resp.body)
	}
	if r := e.wait(run.ID); r.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s", r.Status)
	}
	if after := e.page("/runs/"+run.ID, aliceToken).html(); strings.Contains(after, form) {
		t.Error("a finished run still has the signal form")
	}
}
