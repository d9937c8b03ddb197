package dashboard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/workflow"
)

// TestBreakersAPI: every user lists the queue's circuit breakers; only an
// admin resets one, which closes it and is audited; an unknown one is 404.
func TestBreakersAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true})
	ctx := context.Background()
	// A breaker as the scripts leave it when open (seeded: the scripts are
	// tested in package workflow).
	bk := "cairn:{" + e.queue + "}:breaker:billing"
	if err := e.rdb.HSet(ctx, bk, "state", "open", "open_until", "1900000000000", "cooldown", "20000",
		"opened", "2", "deferred", "7", "changed_at", "1800000000000").Err(); err != nil {
		t.Fatal(err)
	}
	e.rdb.ZAdd(ctx, "cairn:{"+e.queue+"}:idx:breakers", redis.Z{Score: 1800000000000, Member: "billing"})

	var l struct {
		Breakers []workflow.BreakerState `json:"breakers"`
	}
	resp := e.do(req{method: "GET", path: "/api/v1/breakers", token: bobToken})
	if resp.status != 200 {
		t.Fatalf("list: %d %s", resp.status, resp.body)
	}
	resp.decode(t, &l)
	if len(l.Breakers) != 1 || l.Breakers[0].Name != "billing" || l.Breakers[0].State != "open" ||
		l.Breakers[0].OpenUntil == nil || l.Breakers[0].Opened != 2 || l.Breakers[0].Deferred != 7 {
		t.Fatalf("breakers %+v", l.Breakers)
	}
	if resp := e.do(req{method: "POST", path: "/api/v1/admin/breakers/billing/reset", token: aliceToken}); resp.status != 403 {
		t.Fatalf("reset by a user: %d", resp.status)
	}
	before := len(e.audit())
	resp = e.do(req{method: "POST", path: "/api/v1/admin/breakers/billing/reset", token: rootToken})
	if resp.status != 200 {
		t.Fatalf("reset: %d %s", resp.status, resp.body)
	}
	var b workflow.BreakerState
	resp.decode(t, &b)
	if b.State != "closed" || b.OpenUntil != nil {
		t.Errorf("after reset: %+v", b)
	}
	if es := e.audit(); len(es) != before+1 || es[len(es)-1].Action != "breaker_reset" || es[len(es)-1].Actor != "root" {
		t.Errorf("audit %+v", es)
	}
	if resp := e.do(req{method: "POST", path: "/api/v1/admin/breakers/a%7Cb/reset", token: rootToken}); resp.status != 400 {
		t.Errorf("reset of a bad name: %d %s", resp.status, resp.body)
	}
}

// TestUIBreakersPage: every user sees the breakers page; only an admin
// gets the reset button of an open breaker.
func TestUIBreakersPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{ui: true, noWorker: true})
	ctx := context.Background()
	if err := e.rdb.HSet(ctx, "cairn:{"+e.queue+"}:breaker:billing", "state", "open", "open_until", "1900000000000",
		"opened", "1").Err(); err != nil {
		t.Fatal(err)
	}
	e.rdb.ZAdd(ctx, "cairn:{"+e.queue+"}:idx:breakers", redis.Z{Score: 1, Member: "billing"})
	user := e.page("/breakers", aliceToken)
	admin := e.page("/breakers", rootToken)
	if user.status != 200 || admin.status != 200 {
		t.Fatalf("breakers page: %d, %d", user.status, admin.status)
	}
	if !strings.Contains(user.html(), "billing") || strings.Contains(user.html(), "/api/v1/admin/breakers/") {
		t.Errorf("user's page: want the breaker and no reset button:\n%s", user.html())
	}
	if !strings.Contains(admin.html(), `data-action-url="/api/v1/admin/breakers/billing/reset"`) {
		t.Errorf("admin's page has no reset button:\n%s", admin.html())
	}
}
