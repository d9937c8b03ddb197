package dashboard_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/tasks/demo"
	"github.com/cairnhq/cairn/workflow"
)

// TestOrderingKeyAPI: POST /api/v1/workflows with ordering_key puts runs in
// the key's line; GET /api/v1/ordering-keys/{key} shows a user only their
// own runs (with their place in the whole line) and an admin all; a bad key
// is a 400 problem and starts nothing.
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
	if a.WaitingFor != nil || b.WaitingFor == nil || b.WaitingFor.Position != 1 || c.WaitingFor.Position != 2 ||
		c.OrderingKey != "order/42 ü" || c.Status != workflow.StatusPending {
		t.Fatalf("runs: a %+v\nb %+v\nc %+v", a.WaitingFor, b.WaitingFor, c.WaitingFor)
	}

	get := func(token string) workflow.KeyRuns {
		t.Helper()
		resp := e.do(req{method: "GET", path: "/api/v1/ordering-keys/order%2F42%20%C3%BC", token: token})
		if resp.status != 200 {
			t.Fatalf("get key: %d %s", resp.status, resp.body)
		}
		var k workflow.KeyRuns
		resp.decode(t, &k)
		return k
	}
	if k := get(aliceToken); len(k.Active) != 1 || k.Active[0].ID != a.ID || len(k.Waiting) != 1 ||
		k.Waiting[0].ID != c.ID || k.Waiting[0].WaitingFor.Position != 2 || k.WaitingTotal != 1 {
		t.Errorf("alice sees %+v", k)
	}
	if k := get(bobToken); len(k.Active) != 0 || len(k.Waiting) != 1 || k.Waiting[0].ID != b.ID {
		t.Errorf("bob sees %+v", k)
	}
	if k := get(rootToken); len(k.Active) != 1 || len(k.Waiting) != 2 || k.WaitingTotal != 2 {
		t.Errorf("admin sees %+v", k)
	}

	before := e.countRuns()
	for _, key := range []string{strings.Repeat("x", 257), "a\u0007b"} {
		resp := e.do(req{method: "POST", path: "/api/v1/workflows", token: aliceToken,
			body: `{"workflow":"` + demo.Name + `","ordering_key":` + jsonString(key) + `}`})
		if resp.status != 400 || resp.problem(t).Status != 400 {
			t.Errorf("key %q: %d %s", key, resp.status, resp.body)
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
	if k := get(rootToken); len(k.Active) != 1 || k.Active[0].ID != b.ID || len(k.Waiting) != 1 {
		t.Errorf("after a is cancelled, admin sees %+v", k)
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
	line, err := e.client.OrderingKey(context.Background(), key, "", 0)
	if err != nil || len(line.Waiting) != 1 {
		t.Fatalf("line %+v, %v", line, err)
	}
	resp := e.page("/runs/"+line.Waiting[0].ID, aliceToken)
	if resp.status != 200 {
		t.Fatalf("run page: %d", resp.status)
	}
	html := resp.html()
	if strings.Contains(html, "<b>acct</b>") || !strings.Contains(html, "&lt;b&gt;acct&lt;/b&gt;") ||
		!strings.Contains(html, "(position 1)") {
		t.Errorf("the run page does not show the wait (escaped):\n%s", html)
	}
}
