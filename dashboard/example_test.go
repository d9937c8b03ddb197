package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/embedded"
	"github.com/cairnhq/cairn/tasks/demo"
	"github.com/cairnhq/cairn/workflow"
)

func Example() {
	store, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	rdb := redis.NewClient(&redis.Options{Addr: store.Addr()})
	defer rdb.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// Workers publish their workflows; this one runs nothing.
	eng, _ := workflow.NewEngine(rdb, workflow.EngineConfig{Logger: quiet})
	_ = eng.Register(demo.Definition(workflow.Policy{}))
	_ = eng.Publish(context.Background())

	// One user and one admin (in production: dashboard.LoadTokens of
	// CAIRN_API_TOKENS_FILE).
	tokens, err := dashboard.ParseTokens(strings.NewReader(
		"alice-secret-token-0001 alice user\nroot-secret-token-00001 root admin\n"), "tokens")
	if err != nil {
		log.Fatal(err)
	}
	srv, err := dashboard.New(dashboard.Config{
		Client: workflow.NewClient(rdb, workflow.ClientConfig{Logger: quiet}),
		Redis:  rdb,
		Tokens: tokens,
		Logger: quiet,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	// In production: srv.ListenAndServe(ctx).
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	call := func(method, path, token, body string) *http.Response {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		return resp
	}

	resp := call("POST", "/api/v1/workflows", "alice-secret-token-0001", `{"workflow":"demo","input":{"fail_times":0}}`)
	var run workflow.Run
	_ = json.NewDecoder(resp.Body).Decode(&run)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, run.Workflow, run.Owner, run.Status)

	resp = call("GET", "/api/v1/workflows/"+run.ID, "", "")
	var p dashboard.Problem
	_ = json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, p.Type)

	resp = call("GET", "/api/v1/admin/workflows/failed", "alice-secret-token-0001", "")
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// 201 demo alice pending
	// 401 urn:cairn:problem:unauthorized
	// 403
}
