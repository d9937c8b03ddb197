package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestRedisUnavailable stops the server's redis-server and calls every
// route that reads Redis, API and web UI: each answers 503, problem
// unavailable (the UI its error page), with Retry-After, not a 500.
func TestRedisUnavailable(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, nil)
	// One connection pool: go-redis's dedicated pipeline pool, once its
	// dials have failed, probes the server once a second on a goroutine of
	// its own, which the Ping below cannot wait for.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PipelinePoolSize: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	q := testkit.Queue(t, "unavail")
	logs := newSyncBuffer()
	log := testkit.LoggerTo(t, logs)
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: q, Logger: log})
	eng, err := workflow.NewEngine(rdb, workflow.EngineConfig{Queue: q, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(demo.Definition(demoPolicy)); err != nil {
		t.Fatal(err)
	}
	if err := eng.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	run, err := client.Start(context.Background(), demo.Name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dashboard.New(dashboard.Config{Client: client, Redis: rdb, Logger: log, UI: dashboard.WebUI})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		_ = s.Close()
	})
	srv.Stop(t)

	id := run.ID
	for _, c := range []struct {
		method, path, body string
		page               bool // a web UI page: HTML, not a problem
	}{
		{method: "GET", path: "/readyz"},
		{method: "POST", path: "/api/v1/workflows", body: `{"workflow":"demo"}`},
		{method: "GET", path: "/api/v1/workflows"},
		{method: "GET", path: "/api/v1/workflows/" + id},
		{method: "GET", path: "/api/v1/workflows/" + id + "/events"},
		{method: "POST", path: "/api/v1/workflows/" + id + "/recover"},
		{method: "POST", path: "/api/v1/workflows/" + id + "/cancel"},
		{method: "POST", path: "/api/v1/workflows/" + id + "/steps/transform/retry"},
		{method: "POST", path: "/api/v1/workflows/" + id + "/steps/transform/skip"},
		{method: "POST", path: "/api/v1/workflows/" + id + "/signals/approved", body: `true`},
		{method: "GET", path: "/api/v1/ordering-keys/k1"},
		{method: "GET", path: "/api/v1/breakers"},
		{method: "POST", path: "/api/v1/admin/breakers/b1/reset"},
		{method: "GET", path: "/api/v1/events"},
		{method: "GET", path: "/api/v1/admin/workflows/failed"},
		{method: "POST", path: "/api/v1/admin/workflows/" + id + "/restore", body: `{"from_step":"fetch"}`},
		{method: "POST", path: dashboard.BulkPath, body: `{"action":"recover","ids":["` + id + `"],"dry_run":true}`},
		{method: "GET", path: "/api/v1/admin/audit"},
		{method: "GET", path: "/", page: true},
		{method: "GET", path: "/runs/" + id, page: true},
		{method: "GET", path: dashboard.AttentionPath, page: true},
		{method: "GET", path: dashboard.BreakersPath, page: true},
		{method: "GET", path: dashboard.ActivityPath, page: true},
		{method: "GET", path: dashboard.OrderingPath + "?key=k1", page: true},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			hr, err := http.NewRequestWithContext(ctx, c.method, hs.URL+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			hresp, err := http.DefaultClient.Do(hr)
			if err != nil {
				t.Fatal(err)
			}
			defer hresp.Body.Close()
			body, err := io.ReadAll(hresp.Body)
			if err != nil {
				t.Fatal(err)
			}
			resp := response{status: hresp.StatusCode, header: hresp.Header, body: body}
			if resp.status != http.StatusServiceUnavailable {
				t.Fatalf("status %d, want 503: %s", resp.status, resp.body)
			}
			if ra, err := strconv.Atoi(resp.header.Get("Retry-After")); err != nil || ra < 1 {
				t.Errorf("Retry-After %q, want a number of seconds", resp.header.Get("Retry-After"))
			}
			if c.page {
				if ct := resp.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
					t.Errorf("content type %q, want the HTML error page", ct)
				}
				if !strings.Contains(string(resp.body), "Redis") {
					t.Errorf("the error page does not say Redis is unavailable: %s", resp.body)
				}
				return
			}
			if p := resp.problem(t); p.Type != dashboard.ProblemType(dashboard.ProblemUnavailable) || p.Status != 503 {
				t.Errorf("problem %+v, want type %s", p, dashboard.ProblemType(dashboard.ProblemUnavailable))
			}
		})
	}
	if strings.Contains(logs.String(), "request failed") || strings.Contains(logs.String(), "page failed") {
		t.Errorf("Redis being unavailable was logged as an internal error:\n%s", logs.String())
	}

	// Back: the server serves again. (This also waits for the client's
	// pool to find Redis again: after that many failed dials it probes
	// once a second, on a goroutine that ends when a dial succeeds, and
	// serves nothing before.)
	srv.Restart(t)
	testkit.Eventually(t, 30*time.Second, "the client to reach Redis again", func() bool {
		return rdb.Ping(context.Background()).Err() == nil
	})
	hresp, err := http.Get(hs.URL + "/api/v1/workflows") //nolint:noctx // the test's own server
	if err != nil {
		t.Fatal(err)
	}
	hresp.Body.Close()
	if hresp.StatusCode != http.StatusOK {
		t.Errorf("with Redis back: status %d, want 200", hresp.StatusCode)
	}
}
