package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/workflow"
)

// TestBreakerCommands: breakers lists the queue's circuit breakers (text
// and JSON); breaker reset closes one; an unknown or malformed name exits 2.
func TestBreakerCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// An open breaker as the scripts leave it (they are tested in package
	// workflow).
	if err := e.rdb.HSet(ctx, "cairn:{"+e.queue+"}:breaker:billing", "state", "open", "open_until", "4102444800000",
		"cooldown", "20000", "opened", "1", "deferred", "3").Err(); err != nil {
		t.Fatal(err)
	}
	e.rdb.ZAdd(ctx, "cairn:{"+e.queue+"}:idx:breakers", redis.Z{Score: 1, Member: "billing"})

	r := e.run("breakers")
	mustSucceed(t, r)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "BREAKER") || !strings.Contains(lines[1], "billing") ||
		!strings.Contains(lines[1], "open") || !strings.Contains(lines[1], "20s") {
		t.Fatalf("breakers:\n%s", r.stdout)
	}
	mustSucceed(t, e.run("breaker", "reset", "billing"))
	r = e.run("breakers", "--json")
	mustSucceed(t, r)
	var bs []workflow.BreakerState
	if err := json.Unmarshal([]byte(r.stdout), &bs); err != nil || len(bs) != 1 || bs[0].State != "closed" {
		t.Fatalf("breakers --json after reset: %v %s", err, r.stdout)
	}
	checkOneErrorLine(t, e.run("breaker", "reset", "nope"), 2, "circuit breaker not found")
	checkOneErrorLine(t, e.run("breaker", "reset", "a|b"), 2, "breaker name")
	checkOneErrorLine(t, e.run("breaker", "open", "x"), 2, "breaker reset <name>")
}
