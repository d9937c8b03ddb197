package dashboard_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/workflow"
)

// TestOrderingKeyAPI: POST /api/v1/workflows with ordering_key puts runs in
// the caller's line of the key; GET /api/v1/ordering-keys/{key} shows the
// caller's own line (owner= another's and shared=true are an admin's);
// a bad key is a 400 problem and starts nothing.
func TestOrderingKeyAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true})
	start := func(token, key string) workflow.Run {
		t.Helper()
		resp := e.do(req{method: "POST", path: "/api/v1/workflows", token: token,
			body: `{"workflow":"` + demo.Name + `","ordering_key":` + jsonString(key) + `}`})
		if resp.status != 201 {
			t.Fatalf("start: %d %s", resp.status, resp.body)
		}
		var r workflow.Run
		resp.decode(t, &r)
		return r
	}
	a := start(aliceToken, "order/42 ü")
	b := start(bobToken, "order/42 ü")
	c := start(aliceToken, "order/42 ü")
	// bob's line of the key is his own: his run does not wait for alice's.
	if a.WaitingFor != nil || b.WaitingFor != nil || c.WaitingFor == nil || c.WaitingFor.Position != 1 ||
		c.OrderingKey != "order/42 ü" || c.OrderingShared || c.Status != workflow.StatusPending {
		t.Fatalf("runs: a %+v\nb %+v\nc %+v", a.WaitingFor, b.WaitingFor, c.WaitingFor)
	}
	if got, err := e.client.Get(context.Background(), c.ID); err != nil || got.WaitingFor == nil ||
		strings.Join(got.WaitingFor.HeldBy, ",") != a.ID {
		t.Errorf("c waits held by %+v (%v), want alice's first run %s", got.WaitingFor, err, a.ID)
	}

	get := func(token, query string, want int) workflow.KeyRuns {
		t.Helper()
		resp := e.do(req{method: "GET", path: "/api/v1/ordering-keys/order%2F42%20%C3%BC" + query, token: token})
		if resp.status != want {
			t.Fatalf("get key%s: %d %s", query, resp.status, resp.body)
		}
		var k workflow.KeyRuns
		if want == 200 {
			resp.decode(t, &k)
		} else if p := resp.problem(t); p.Status != want {
			t.Errorf("get key%s: problem %+v", query, p)
		}
		return k
	}
	if k := get(aliceToken, "", 200); k.Owner != "alice" || k.Shared || len(k.Active) != 1 || k.Active[0].ID != a.ID ||
		len(k.Waiting) != 1 || k.Waiting[0].ID != c.ID || k.Waiting[0].WaitingFor.Position != 1 || k.WaitingTotal != 1 {
		t.Errorf("alice sees %+v", k)
	}
	if k := get(bobToken, "", 200); k.Owner != "bob" || len(k.Active) != 1 || k.Active[0].ID != b.ID || len(k.Waiting) != 0 {
		t.Errorf("bob sees %+v", k)
	}
	get(bobToken, "?owner=alice", 403)
	get(bobToken, "?shared=true", 403)
	get(rootToken, "?owner=alice&shared=true", 400)
	if k := get(rootToken, "?owner=alice", 200); len(k.Active) != 1 || len(k.Waiting) != 1 || k.WaitingTotal != 1 {
		t.Errorf("admin sees alice's line as %+v", k)
	}
	if k := get(rootToken, "?shared=true", 200); !k.Shared || len(k.Active)+len(k.Waiting) != 0 {
		t.Errorf("admin sees the shared line as %+v", k)
	}

	before := e.countRuns()
	for _, body := range []string{
		`{"workflow":"` + demo.Name + `","ordering_key":` + jsonString(strings.Repeat("x", 257)) + `}`,
		`{"workflow":"` + demo.Name + `","ordering_key":"a\u0007b"}`,
		`{"workflow":"` + demo.Name + `","shared_ordering":true}`,
	} {
		token := aliceToken
		if strings.Contains(body, "shared") {
			token = rootToken // refused for its missing key, not its caller
		}
		resp := e.do(req{method: "POST", path: "/api/v1/workflows", token: token, body: body})
		if resp.status != 400 || resp.problem(t).Status != 400 {
			t.Errorf("%s: %d %s", body, resp.status, resp.body)
		}
	}
	if resp := e.do(req{method: "GET", path: "/api/v1/ordering-keys/a%07b", token: aliceToken}); resp.status != 400 {
		t.Errorf("GET a bad key: %d %s", resp.status, resp.body)
	}
	if n := e.countRuns(); n != before {
		t.Errorf("refused starts wrote runs: %d, then %d", before, n)
	}
	if _, err := e.client.Cancel(context.Background(), a.ID, nil); err != nil {
		t.Fatal(err)
	}
	if k := get(aliceToken, "", 200); len(k.Active) != 1 || k.Active[0].ID != c.ID || len(k.Waiting) != 0 {
		t.Errorf("after a is cancelled, alice sees %+v", k)
	}
}

// TestOrderingKeyOwnersIsolated is the attack of issue 24: bob's run fails
// and blocks ordering key k-victim (on_failure: block); alice's run of the
// same workflow and key is not held by it, and neither learns of the other's
// runs. bob, blocked by his own failed run, sees what holds him and frees
// his line by cancelling it. In a key's shared line, which an admin chose,
// a user's run does not show the runs of others that hold it.
func TestOrderingKeyOwnersIsolated(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	start := func(token, key, input string, shared bool, want int) workflow.Run {
		t.Helper()
		body := `{"workflow":"` + demo.OrderedName + `","ordering_key":` + jsonString(key) + `,"input":` + input
		if shared {
			body += `,"shared_ordering":true`
		}
		resp := e.do(req{method: "POST", path: "/api/v1/workflows", token: token, body: body + `}`})
		if resp.status != want {
			t.Fatalf("start %s: %d %s", body, resp.status, resp.body)
		}
		var r workflow.Run
		if want == 201 {
			resp.decode(t, &r)
		}
		return r
	}
	getRun := func(token, id string) workflow.Run {
		t.Helper()
		resp := e.do(req{method: "GET", path: "/api/v1/workflows/" + id, token: token})
		if resp.status != 200 {
			t.Fatalf("get %s: %d %s", id, resp.status, resp.body)
		}
		var r workflow.Run
		resp.decode(t, &r)
		return r
	}

	blocker := start(bobToken, "k-victim", `{"fail_step":"s1"}`, false, 201)
	if r := e.wait(blocker.ID); r.Status != workflow.StatusFailed {
		t.Fatalf("bob's run is %s, want failed", r.Status)
	}
	victim := start(aliceToken, "k-victim", `{}`, false, 201)
	if victim.WaitingFor != nil {
		t.Errorf("alice's run waits behind bob's: %+v", victim.WaitingFor)
	}
	if r := e.wait(victim.ID); r.Status != workflow.StatusSucceeded {
		t.Errorf("alice's run is %s, want succeeded", r.Status)
	}

	// bob's next run waits behind his own failed run, and says so.
	next := start(bobToken, "k-victim", `{}`, false, 201)
	if w := getRun(bobToken, next.ID).WaitingFor; w == nil || w.Position != 1 || w.Shared ||
		strings.Join(w.HeldBy, ",") != blocker.ID {
		t.Fatalf("bob's next run waits for %+v, want position 1 held by %s", w, blocker.ID)
	}
	resp := e.do(req{method: "GET", path: "/api/v1/ordering-keys/k-victim", token: aliceToken})
	var line workflow.KeyRuns
	resp.decode(t, &line)
	if resp.status != 200 || len(line.Active)+len(line.Waiting) != 0 || strings.Contains(string(resp.body), blocker.ID) {
		t.Errorf("alice's line of k-victim shows %s", resp.body)
	}
	if resp := e.do(req{method: "POST", path: "/api/v1/workflows/" + blocker.ID + "/cancel", token: bobToken}); resp.status != 200 {
		t.Fatalf("bob cancels his failed run: %d %s", resp.status, resp.body)
	}
	if r := e.wait(next.ID); r.Status != workflow.StatusSucceeded {
		t.Errorf("bob's next run is %s after he cancelled the blocker, want succeeded", r.Status)
	}

	// A shared line: the admin's long run holds it, alice's run (put there
	// by a trusted Go client) waits; alice is not shown the admin's run.
	start(aliceToken, "k-shared", `{}`, true, 403)
	holder := start(rootToken, "k-shared", `{"sleep_ms":60000}`, true, 201)
	if !holder.OrderingShared {
		t.Errorf("the admin's shared run: %+v", holder)
	}
	waiter, err := e.client.Start(context.Background(), demo.OrderedName, nil,
		&workflow.StartOptions{Owner: "alice", OrderingKey: "k-shared", SharedOrdering: true})
	if err != nil {
		t.Fatal(err)
	}
	if w := getRun(aliceToken, waiter.ID).WaitingFor; w == nil || !w.Shared || w.Position != 1 || len(w.HeldBy) != 0 {
		t.Errorf("alice's run in the shared line, as alice: %+v, want shared, position 1, no held_by", w)
	}
	if w := getRun(rootToken, waiter.ID).WaitingFor; w == nil || strings.Join(w.HeldBy, ",") != holder.ID {
		t.Errorf("alice's run in the shared line, as admin: %+v, want held by %s", w, holder.ID)
	}
	if _, err := e.client.Cancel(context.Background(), holder.ID, nil); err != nil {
		t.Fatal(err)
	}
	e.wait(waiter.ID)
}

// TestUIOrderingPageLines: the ordering page shows the caller's own line of
// a key; another subject's line and the shared line are an admin's (403
// for a user, nothing of them shown), and the admin's list of keys in use
// names each line's owner.
func TestUIOrderingPageLines(t *testing.T) {
	t.Parallel()
	e := newUIEnv(t, false)
	ctx := context.Background()
	a, err := e.client.Start(ctx, demo.Name, json.RawMessage(inputSlow), &workflow.StartOptions{Owner: "alice", OrderingKey: "k-ui"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Start(ctx, demo.Name, nil, &workflow.StartOptions{Owner: "alice", OrderingKey: "k-ui"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, token string
		want        int
		shows       bool // the page shows alice's run
	}{
		{"/ordering?key=k-ui", aliceToken, 200, true},
		{"/ordering?key=k-ui&owner=alice", aliceToken, 200, true},
		{"/ordering?key=k-ui", bobToken, 200, false},
		{"/ordering?key=k-ui&owner=alice", bobToken, 403, false},
		{"/ordering?key=k-ui&shared=true", bobToken, 403, false},
		{"/ordering?key=k-ui&owner=alice", rootToken, 200, true},
		{"/ordering?key=k-ui&shared=true", rootToken, 200, false},
		{"/ordering", rootToken, 200, false}, // the keys in use, not their runs
	} {
		resp := e.page(c.path, c.token)
		if resp.status != c.want || strings.Contains(resp.html(), a.ID) != c.shows {
			t.Errorf("%s as %s: %d (want %d), shows alice's run: %v (want %v)", c.path, c.token, resp.status, c.want,
				strings.Contains(resp.html(), a.ID), c.shows)
		}
	}
	if html := e.page("/ordering", rootToken).html(); !strings.Contains(html, "line of <b>alice</b>") {
		t.Errorf("the keys in use do not name alice's line:\n%s", html)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestUIRunPageShowsWait: a run waiting in an ordering key's line shows
// its key and its place, escaped.
func TestUIRunPageShowsWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{ui: true, noWorker: true})
	key := `<b>acct</b>`
	for range 2 {
		if _, err := e.client.Start(context.Background(), demo.Name, nil,
			&workflow.StartOptions{Owner: "alice", OrderingKey: key}); err != nil {
			t.Fatal(err)
		}
	}
	line, err := e.client.OrderingKey(context.Background(), workflow.KeyLine{Key: key, Owner: "alice"}, 0)
	if err != nil || len(line.Waiting) != 1 {
		t.Fatalf("line %+v, %v", line, err)
	}
	resp := e.page("/runs/"+line.Waiting[0].ID, aliceToken)
	if resp.status != 200 {
		t.Fatalf("run page: %d", resp.status)
	}
	html := resp.html()
	if strings.Contains(html, "<b>acct</b>") || !strings.Contains(html, "&lt;b&gt;acct&lt;/b&gt;") ||
		!strings.Contains(html, "(position 1)") || !strings.Contains(html, "held by") {
		t.Errorf("the run page does not show the wait (escaped):\n%s", html)
	}
}
