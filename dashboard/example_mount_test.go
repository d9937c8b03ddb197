package dashboard_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/embedded"
)

// A service's own mux, with Cairn's dashboard, API and /metrics on it
// (no tokens file here: it answers on loopback only; in production set
// TokensFile, the worker's CAIRN_API_TOKENS_FILE).
func ExampleMount() {
	store, _ := embedded.Start("127.0.0.1:0") // in production: workflow/redisurl
	defer store.Close()
	rdb := redis.NewClient(&redis.Options{Addr: store.Addr()})
	defer rdb.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "orders") })
	srv, err := dashboard.Mount(mux, dashboard.Options{Redis: rdb, Queue: "orders", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close() // before the service's http.Server shuts down
	hs := httptest.NewServer(mux)
	defer hs.Close()

	for _, path := range []string{"/orders", "/api/v1/me", "/healthz"} {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s %d %s\n", path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	// Output:
	// /orders 200 orders
	// /api/v1/me 200 {"auth_disabled":true,"role":"admin","subject":"anonymous"}
	// /healthz 200 {"status":"ok"}
}
