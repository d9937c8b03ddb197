package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// TestLatencyCommand: latency prints the percentiles per workflow and
// step (text and JSON) over the window asked for; a bad window, workflow
// or argument exits 2 with one line.
func TestLatencyCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// Counts as the workers' flushes write them (tested in package
	// workflow): demo/fetch ran 9 times in [90.5ms, 107.6ms) and once in
	// [27.6s, 32.8s), and waited 10 times in [2ms, 2.38ms); 30 hours ago,
	// transform ran once.
	h := time.Now().Unix() / 3600
	key := func(hour int64) string { return fmt.Sprintf("cairn:{%s}:lat:%d", e.queue, hour) }
	if err := e.rdb.HSet(ctx, key(h), "d|demo|fetch|27", 9, "d|demo|fetch|60", 1, "w|demo|fetch|5", 10).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HSet(ctx, key(h-30), "d|demo|transform|27", 1).Err(); err != nil {
		t.Fatal(err)
	}

	r := e.run("latency")
	mustSucceed(t, r)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "WORKFLOW") || strings.Join(strings.Fields(lines[1]), " ") !=
		"demo fetch 10 107ms 107ms 33s 10 2.38ms 2.38ms 2.38ms" || !strings.HasPrefix(lines[2], "counted since ") {
		t.Fatalf("latency:\n%s", r.stdout)
	}
	r = e.run("latency", "--window", "7d", "--workflow", "demo", "--json")
	mustSucceed(t, r)
	var rep workflow.LatencyReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.WindowName != "7d" || len(rep.Series) != 2 ||
		rep.Series[1].Step != "transform" || rep.Series[1].Duration.Count != 1 || rep.Series[1].Wait.Count != 0 {
		t.Fatalf("latency --window 7d --json: %v\n%s", err, r.stdout)
	}
	r = e.run("latency", "--window", "1h", "--workflow", "other")
	mustSucceed(t, r)
	if !strings.HasPrefix(r.stdout, "no step attempt counted since ") {
		t.Errorf("latency of a workflow without counts:\n%s", r.stdout)
	}
	checkOneErrorLine(t, e.run("latency", "--window", "2d"), 2, "want 1h, 24h or 7d")
	checkOneErrorLine(t, e.run("latency", "--workflow", "<script>"), 2, "workflow name")
	checkOneErrorLine(t, e.run("latency", "extra"), 2, "latency takes no arguments")
}
