package dashboard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/workflow"
)

// pausedRun is a running run of owner (runningRun) that its owner paused.
func (e *env) pausedRun(owner string) *workflow.Run {
	e.t.Helper()
	run := e.runningRun(owner)
	if _, err := e.client.Pause(context.Background(), run.ID, &workflow.ActionOptions{Actor: owner}); err != nil {
		e.t.Fatal(err)
	}
	return run
}

// TestPauseAndResumeAPI: the owner pauses and resumes a run through the
// API; pausing twice and resuming a run that is not paused change nothing;
// a run that ended is refused with 409 and left as it was; the paused
// filter lists the caller's paused runs only; the browser's request needs
// the CSRF token.
func TestPauseAndResumeAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	run := e.runningRun("alice")
	bobs := e.pausedRun("bob")
	path := "/api/v1/workflows/" + run.ID

	// A browser's pause without the CSRF token is refused, and changes nothing.
	before := e.snapshot(run.ID)
	if resp := e.do(req{method: "POST", path: path + "/pause", cookie: aliceToken}); resp.status != 403 ||
		resp.problem(t).Type != dashboard.ProblemType(dashboard.ProblemCSRF) {
		t.Fatalf("pause without the CSRF token: %d %s", resp.status, resp.body)
	}
	if after := e.snapshot(run.ID); after != before {
		t.Fatal("a refused pause changed the run")
	}
	resp := e.do(req{method: "POST", path: path + "/pause", cookie: aliceToken, header: map[string]string{
		dashboard.CSRFHeader: e.srv.CSRFToken(aliceToken), "Sec-Fetch-Site": "same-origin"}})
	var got workflow.Run
	resp.decode(t, &got)
	if resp.status != 200 || got.Paused == nil || got.Paused.By != "alice" || got.Status != workflow.StatusRunning {
		t.Fatalf("pause: %d %s", resp.status, resp.body)
	}
	journal := len(e.events(run.ID))
	if resp := e.do(req{method: "POST", path: path + "/pause", token: aliceToken}); resp.status != 200 {
		t.Fatalf("pause again: %d %s", resp.status, resp.body)
	}
	if n := len(e.events(run.ID)); n != journal {
		t.Errorf("pausing twice journaled %d entries more", n-journal)
	}

	list := func(token, query string) []string {
		t.Helper()
		resp := e.do(req{method: "GET", path: "/api/v1/workflows?" + query, token: token})
		var l struct {
			Runs []workflow.Run `json:"runs"`
		}
		resp.decode(t, &l)
		if resp.status != 200 {
			t.Fatalf("list %s: %d %s", query, resp.status, resp.body)
		}
		var ids []string
		for _, r := range l.Runs {
			if r.Paused == nil {
				t.Errorf("list %s: run %s is not paused", query, r.ID)
			}
			ids = append(ids, r.ID)
		}
		return ids
	}
	if ids := list(aliceToken, "paused=true"); len(ids) != 1 || ids[0] != run.ID {
		t.Errorf("alice's paused runs: %v, want %s", ids, run.ID)
	}
	if ids := list(rootToken, "paused=1&status=running"); len(ids) != 2 {
		t.Errorf("every paused run, as an admin: %v, want %s and %s", ids, run.ID, bobs.ID)
	}
	if resp := e.do(req{method: "GET", path: "/api/v1/workflows?paused=maybe", token: aliceToken}); resp.status != 400 {
		t.Errorf("paused=maybe: %d, want 400", resp.status)
	}

	resp = e.do(req{method: "POST", path: path + "/resume", token: aliceToken})
	got = workflow.Run{}
	resp.decode(t, &got)
	if resp.status != 200 || got.Paused != nil {
		t.Fatalf("resume: %d %s", resp.status, resp.body)
	}
	evs := e.events(run.ID)
	if last := evs[len(evs)-1]; last.Type != workflow.EventResumed || last.Details["actor"] != "alice" {
		t.Errorf("last entry %+v, want resumed by alice", last)
	}
	if resp := e.do(req{method: "POST", path: path + "/resume", token: aliceToken}); resp.status != 200 {
		t.Errorf("resume a run that is not paused: %d %s", resp.status, resp.body)
	}
	if ids := list(aliceToken, "paused=true"); len(ids) != 0 {
		t.Errorf("alice's paused runs after the resume: %v", ids)
	}

	// A run that ended: 409, nothing written.
	failed := e.failedRun("alice")
	before = e.snapshot(failed.ID)
	for _, act := range []string{"pause", "resume"} {
		resp := e.do(req{method: "POST", path: "/api/v1/workflows/" + failed.ID + "/" + act, token: aliceToken})
		if resp.status != 409 || !strings.Contains(resp.problem(t).Detail, "failed") {
			t.Errorf("%s of a failed run: %d %s", act, resp.status, resp.body)
		}
	}
	if after := e.snapshot(failed.ID); after != before {
		t.Error("a refused pause changed the failed run")
	}
	_, _ = e.client.Cancel(context.Background(), run.ID, nil)
	_, _ = e.client.Cancel(context.Background(), bobs.ID, nil)
}

func (e *env) events(id string) []workflow.Event {
	e.t.Helper()
	evs, err := e.client.Events(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// TestUIPausedRun: a paused run's page says so (who, since when) and
// offers Resume instead of Pause; the list marks it and filters on it
// (without the bulk actions, whose filters know no pause); a bad filter
// is a 400.
func TestUIPausedRun(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	run := e.pausedRun("alice")
	other := e.runningRun("alice")
	defer func() {
		_, _ = e.client.Cancel(context.Background(), run.ID, nil)
		_, _ = e.client.Cancel(context.Background(), other.ID, nil)
	}()
	api := func(id string) string { return "/api/v1/workflows/" + id }

	resp := e.page("/runs/"+run.ID, aliceToken)
	page := resp.html()
	if resp.status != 200 || !strings.Contains(page, `id="paused"`) || !strings.Contains(page, `<span class="mono">alice</span>`) ||
		!strings.Contains(page, `<span class="badge paused"`) {
		t.Fatalf("paused run page: %d, no banner or badge:\n%s", resp.status, page)
	}
	if got := actionsOf(resp); strings.Join(got, ",") != "cancel "+api(run.ID)+"/cancel,resume "+api(run.ID)+"/resume" {
		t.Errorf("paused run: actions %v, want cancel and resume", got)
	}
	if got := actionsOf(e.page("/runs/"+other.ID, aliceToken)); len(got) != 2 || got[1] != "pause "+api(other.ID)+"/pause" {
		t.Errorf("running run: actions %v, want cancel and pause", got)
	}
	// bob sees neither the run nor its pause.
	if resp := e.page("/runs/"+run.ID, bobToken); resp.status != 404 || strings.Contains(resp.html(), `id="paused"`) {
		t.Errorf("bob's view of alice's paused run: %d", resp.status)
	}

	list := e.page("/?paused=true", rootToken).html()
	if !strings.Contains(list, run.ID) || strings.Contains(list, other.ID) || !strings.Contains(list, `name="paused" value="true" checked`) {
		t.Errorf("the paused filter lists the wrong runs, or loses the box")
	}
	if strings.Contains(list, `id="bulk"`) {
		t.Error("the paused list offers the bulk actions")
	}
	if all := e.page("/", rootToken).html(); !strings.Contains(all, `id="bulk"`) || !strings.Contains(all, other.ID) {
		t.Error("the unfiltered list lost its runs or its bulk actions")
	}
	if resp := e.page("/?paused=%3Cb%3E", aliceToken); resp.status != 400 || strings.Contains(resp.html(), "<b>") {
		t.Errorf("paused=<b>: %d, want an escaped 400", resp.status)
	}
}
