package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// publish makes the demo workflow known without running a worker, so runs
// stay where they are.
func (e *env) publish() {
	e.t.Helper()
	eng, err := workflow.NewEngine(e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: testkit.Logger(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := eng.Register(demo.Definition(workflow.Policy{})); err != nil {
		e.t.Fatal(err)
	}
	if err := eng.Publish(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// TestOrderingKeyCommands: start --ordering-key, status showing the wait
// and what holds it, key listing the CLI's line (text and JSON), another
// owner's and the shared line with --owner and --shared, and bad keys and
// flags refused with exit 2.
func TestOrderingKeyCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish()
	first := runID(t, e.run("start", "demo", "--ordering-key", "acct 7"))
	second := runID(t, e.run("start", "demo", "--ordering-key", "acct 7"))

	r := e.run("status", second)
	mustSucceed(t, r)
	for _, want := range []string{`ordering key:     "acct 7"`,
		`waiting for:      its turn under ordering key "acct 7" (position 1 in line), held by ` + first} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}
	r = e.run("status", second, "--json")
	mustSucceed(t, r)
	var run struct {
		Status      string         `json:"status"`
		OrderingKey string         `json:"ordering_key"`
		WaitingFor  map[string]any `json:"waiting_for"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &run); err != nil {
		t.Fatal(err)
	}
	if run.Status != "pending" || run.OrderingKey != "acct 7" || run.WaitingFor["ordering_key"] != "acct 7" ||
		run.WaitingFor["position"] != float64(1) {
		t.Fatalf("status --json: %+v", run)
	}

	r = e.run("key", "acct 7")
	mustSucceed(t, r)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || lines[0] != `line of cli's runs with ordering key "acct 7"` || !strings.HasPrefix(lines[2], "active") ||
		!strings.Contains(lines[2], first) || !strings.HasPrefix(lines[3], "1") || !strings.Contains(lines[3], second) {
		t.Fatalf("key:\n%s", r.stdout)
	}
	// Another owner's run with the same key is in another line; a run
	// started with --shared-ordering in the key's shared line.
	other, err := e.client.Start(context.Background(), demo.Name, nil, &workflow.StartOptions{Owner: "alice", OrderingKey: "acct 7"})
	if err != nil || other.WaitingFor != nil {
		t.Fatalf("alice's run with the CLI's key: %+v, %v; want it started, not waiting", other, err)
	}
	shared := runID(t, e.run("start", "demo", "--ordering-key", "acct 7", "--shared-ordering"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--owner", "alice"}, other.ID},
		{[]string{"--shared"}, shared},
		{[]string{"--owner", "cli"}, first},
	} {
		r := e.run(append([]string{"key", "acct 7", "--json"}, c.args...)...)
		mustSucceed(t, r)
		var kr workflow.KeyRuns
		if err := json.Unmarshal([]byte(r.stdout), &kr); err != nil || len(kr.Active) != 1 || kr.Active[0].ID != c.want {
			t.Errorf("key %v: %v %s; want %s active", c.args, err, r.stdout, c.want)
		}
	}
	r = e.run("key", "acct 7", "--json")
	mustSucceed(t, r)
	var line workflow.KeyRuns
	if err := json.Unmarshal([]byte(r.stdout), &line); err != nil || len(line.Active) != 1 || len(line.Waiting) != 1 ||
		line.Waiting[0].ID != second || line.WaitingTotal != 1 {
		t.Fatalf("key --json: %v %s", err, r.stdout)
	}

	mustSucceed(t, e.run("cancel", first))
	if got := e.get(second); got.WaitingFor != nil {
		t.Fatalf("second run still waits after the first was cancelled: %+v", got.WaitingFor)
	}

	checkOneErrorLine(t, e.run("start", "demo", "--ordering-key", ""), 2, "empty ordering key")
	checkOneErrorLine(t, e.run("start", "demo", "--ordering-key", "a\tb"), 2, "control character")
	checkOneErrorLine(t, e.run("key", strings.Repeat("k", 300)), 2, "longer than 256 bytes")
	checkOneErrorLine(t, e.run("key"), 2, "ordering key")
	checkOneErrorLine(t, e.run("key", "k", "--owner", "alice", "--shared"), 2, "not both")
	checkOneErrorLine(t, e.run("key", "k", "--owner", ""), 2, "--owner needs a subject")
	checkOneErrorLine(t, e.run("start", "demo", "--shared-ordering"), 2, "--shared-ordering needs --ordering-key")
}
