package retrystate_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/retrystate"
)

// luaMaxLen returns the value of the string constant name of helper file
// (lua/lib/notify.lua's NOTIFY_MAXLEN, journal.lua's JOURNAL_MAXLEN).
func luaMaxLen(t *testing.T, file, name string) int64 {
	t.Helper()
	src, err := os.ReadFile("lua/lib/" + file)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^local ` + name + ` = "([0-9]+)"$`).FindSubmatch(src)
	if m == nil {
		t.Fatalf("lua/lib/%s defines no %s", file, name)
	}
	n, err := strconv.ParseInt(string(m[1]), 10, 64)
	if err != nil || n <= 0 {
		t.Fatalf("%s = %q", name, m[1])
	}
	return n
}

// fill appends entries to a stream until it holds n, without trimming.
func fill(t *testing.T, rdb *redis.Client, key string, n int64) {
	t.Helper()
	ctx := context.Background()
	have, err := rdb.XLen(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	for have < n {
		pipe := rdb.Pipeline()
		for range min(n-have, 10000) {
			pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"type", "filler", "at", "0"}})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if have, err = rdb.XLen(ctx, key).Result(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStreamsStayBounded: every writer of the queue's notification and
// audit streams trims them (XADD MAXLEN ~): the scripts' notify()
// (cancel.lua, restore.lua), restore.lua's audit entry and AppendAudit.
// Each stream is filled past its bound, then one write brings it back to
// within a stream node (100 entries) of it.
func TestStreamsStayBounded(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	prefix := "cairn:{" + s.Queue() + "}:"
	notifications, audit := prefix+"notifications", prefix+"audit"
	t.Cleanup(func() { rdb.Del(context.Background(), notifications, audit) })
	notifyMax := luaMaxLen(t, "notify.lua", "NOTIFY_MAXLEN")
	const slack = 100 // stream-node-max-entries: approximate trimming drops whole nodes
	bounded := func(what, key string, limit int64) {
		t.Helper()
		n, err := rdb.XLen(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n > limit+slack {
			t.Errorf("%s: the stream holds %d entries, want at most about %d", what, n, limit)
		}
	}
	id := runID(1)
	createOwned(t, s, id, "alice", "wf", t0)

	// The scripts' notifications: cancel.lua.
	fill(t, rdb, notifications, notifyMax+1000)
	if _, err := s.Cancel(ctx, retrystate.CancelParams{RunID: id, Actor: "root", Retention: time.Hour,
		Now: t0}); err != nil {
		t.Fatal(err)
	}
	bounded("cancel's notification", notifications, notifyMax)

	// restore.lua: its notification and its audit entry.
	fill(t, rdb, notifications, notifyMax+1000)
	fill(t, rdb, audit, retrystate.AuditMaxLen+1000)
	rep, err := s.Restore(ctx, retrystate.RestoreParams{RunID: id, FromStep: "a", Actor: "root", Now: t0})
	if err != nil || rep.Outcome != retrystate.OutcomeDispatch {
		t.Fatalf("restore: %+v %v", rep, err)
	}
	bounded("restore's notification", notifications, notifyMax)
	bounded("restore's audit entry", audit, retrystate.AuditMaxLen)

	// AppendAudit.
	fill(t, rdb, audit, retrystate.AuditMaxLen+1000)
	if _, err := s.AppendAudit(ctx, retrystate.AuditEntry{At: t0, Actor: "root", Action: "test"}); err != nil {
		t.Fatal(err)
	}
	bounded("AppendAudit", audit, retrystate.AuditMaxLen)
}
