package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestOutboxSurvivesKill9MidFlush: an application queues 200 Starts (most
// with ordering keys, several per key) while Redis is stopped; Redis
// starts; the application flushes and is killed with -9 twice, each time
// right after a create.lua applied and before its entry left the outbox,
// and restarted. In the end: exactly 200 runs, each created once, in start
// order per key (and overall), and the outbox empty.
func TestOutboxSurvivesKill9MidFlush(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	const total = 200
	srv := redistest.Start(t, &redistest.Options{AppendOnly: true, AppendFsync: "always"})
	rdb := srv.Client(t)
	const queue = "outboxkill"
	quiet := slog.New(slog.DiscardHandler)
	eng, err := workflow.NewEngine(rdb, workflow.EngineConfig{Queue: queue, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }
	if err := eng.Register(workflow.Definition{Name: "ordered", Ordering: &workflow.Ordering{Concurrency: 1},
		Steps: []workflow.Step{{Name: "s", Run: noop}}}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Publish(ctxb); err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)

	bin := proctest.Build(t, "./testdata/outboxapp")
	path := filepath.Join(t.TempDir(), "outbox.db")
	args := []string{"-redis", srv.Addr(), "-queue", queue, "-outbox", path}
	stdout, stderr, code := proctest.Run(t, bin, nil, "", append(args, "enqueue", "-n", fmt.Sprint(total))...)
	if code != 0 {
		t.Fatalf("enqueue exited %d: %s", code, stderr)
	}
	type started struct{ id, key string }
	var order []started
	for line := range strings.Lines(stdout) {
		var i int
		var s started
		if n, _ := fmt.Sscanf(line, "queued %d %s %s", &i, &s.id, &s.key); n >= 2 && i == len(order) {
			order = append(order, s)
		}
	}
	if len(order) != total {
		t.Fatalf("%d runs queued; want %d:\n%s", len(order), total, stdout)
	}

	srv.Restart(t)
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: quiet})
	count := func() int64 {
		t.Helper()
		counts, err := client.Counts(ctxb)
		if err != nil {
			t.Fatal(err)
		}
		return counts[string(workflow.StatusPending)]
	}
	created := int64(0)
	for _, k := range []int64{80, 60} {
		p := proctest.Start(t, bin, nil, append(args, "flush", "-block-after", fmt.Sprint(k))...)
		p.WaitForOutput(t, fmt.Sprintf("blocked after %d creates", k), 60*time.Second)
		p.Kill(t)
		created += k
		if n := count(); n != created {
			t.Fatalf("%d runs after the kill; want %d", n, created)
		}
		// The run created last is still queued: it was applied, its entry
		// not yet removed.
		contents, err := workflow.ReadOutbox(path, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if want := total - int(created) + 1; len(contents.Queued) != want || contents.Queued[0].RunID != order[created-1].id {
			t.Fatalf("after the kill the outbox holds %d entries, the first for run %s; want %d, the first for %s",
				len(contents.Queued), contents.Queued[0].RunID, want, order[created-1].id)
		}
	}
	stdout, stderr, code = proctest.Run(t, bin, nil, "", append(args, "flush")...)
	if code != 0 || !strings.Contains(stdout, "drained") {
		t.Fatalf("flush exited %d: %s%s", code, stdout, stderr)
	}

	if n := count(); n != total {
		t.Fatalf("%d runs; want %d", n, total)
	}
	byKey := map[string][]string{}
	var prev time.Time
	for i, s := range order {
		run, err := client.Get(ctxb, s.id)
		if err != nil {
			t.Fatalf("run %d (%s): %v", i, s.id, err)
		}
		if run.OrderingKey != s.key || run.CreatedAt.Before(prev) {
			t.Fatalf("run %d (%s): key %q, created %s after %s; want key %q, created in start order", i, s.id,
				run.OrderingKey, run.CreatedAt, prev, s.key)
		}
		prev = run.CreatedAt
		evs, err := client.Events(ctxb, s.id)
		if err != nil || testkit.CountEvents(evs, workflow.EventRunStarted, "") != 1 {
			t.Fatalf("run %d (%s): %d run_started events (%v); want 1", i, s.id,
				testkit.CountEvents(evs, workflow.EventRunStarted, ""), err)
		}
		if s.key != "" {
			byKey[s.key] = append(byKey[s.key], s.id)
		}
	}
	for key, want := range byKey {
		line, err := client.OrderingKey(ctxb, workflow.KeyLine{Key: key}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range slices.Concat(line.Active, line.Waiting) {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("key %s's line:\n%v\nwant the start order:\n%v", key, got, want)
		}
	}
	contents, err := workflow.ReadOutbox(path, 10*time.Second)
	if err != nil || len(contents.Queued) != 0 || len(contents.Dead) != 0 {
		t.Fatalf("outbox after the flush: %+v, %v; want it empty", contents, err)
	}
}
