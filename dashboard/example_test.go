package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/embedded"
	"github.com/cairnhq/cairn/workflow"
)

func Example() {
	if err := serveDashboard(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 201 demo alice pending
	// 401 urn:cairn:problem:unauthorized
	// 403
}

// serveDashboard publishes a workflow, serves the dashboard's API and calls
// it as a user, anonymously and as a user on an admin route.
func serveDashboard() error {
	store, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer store.Close()
	rdb := redis.NewClient(&redis.Options{Addr: store.Addr()})
	defer rdb.Close()
	quiet := slog.New(slog.DiscardHandler)

	// Workers publish their workflows; this one runs nothing.
	eng, _ := workflow.NewEngine(rdb, workflow.EngineConfig{Logger: quiet})
	_ = eng.Register(demo.Definition(workflow.Policy{}))
	_ = eng.Publish(context.Background())

	// One user and one admin (in production: dashboard.LoadTokens of
	// CAIRN_API_TOKENS_FILE).
	tokens, err := dashboard.ParseTokens(strings.NewReader(
		"alice-secret-token-0001 alice user\nroot-secret-token-00001 root admin\n"), "tokens")
	if err != nil {
		return err
	}
	srv, err := dashboard.New(dashboard.Config{
		Client: workflow.NewClient(rdb, workflow.ClientConfig{Logger: quiet}),
		Redis:  rdb,
		Tokens: tokens,
		Logger: quiet,
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	// In production: srv.ListenAndServe(ctx).
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	// call sends a request and decodes the JSON answer into out (if not nil).
	call := func(method, path, token, body string, out any) (int, error) {
		req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode, nil
	}

	var run workflow.Run
	code, err := call(http.MethodPost, "/api/v1/workflows", "alice-secret-token-0001", `{"workflow":"demo","input":{"fail_times":0}}`, &run)
	if err != nil {
		return err
	}
	fmt.Println(code, run.Workflow, run.Owner, run.Status)

	var p dashboard.Problem
	if code, err = call(http.MethodGet, "/api/v1/workflows/"+run.ID, "", "", &p); err != nil {
		return err
	}
	fmt.Println(code, p.Type)

	if code, err = call(http.MethodGet, "/api/v1/admin/workflows/failed", "alice-secret-token-0001", "", nil); err != nil {
		return err
	}
	fmt.Println(code)
	return nil
}

// The server serves the OpenAPI document of its API to anyone, at
// dashboard.OpenAPIPath.
func Example_openAPI() {
	if err := fetchOpenAPI(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 200 3.1.1 Cairn HTTP API
	// getRun
}

// fetchOpenAPI serves the dashboard's API and reads its OpenAPI document
// without a token.
func fetchOpenAPI() error {
	store, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer store.Close()
	rdb := redis.NewClient(&redis.Options{Addr: store.Addr()})
	defer rdb.Close()
	quiet := slog.New(slog.DiscardHandler)
	tokens, err := dashboard.ParseTokens(strings.NewReader("alice-secret-token-0001 alice user\n"), "tokens")
	if err != nil {
		return err
	}
	srv, err := dashboard.New(dashboard.Config{Client: workflow.NewClient(rdb, workflow.ClientConfig{Logger: quiet}),
		Redis: rdb, Tokens: tokens, Logger: quiet})
	if err != nil {
		return err
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	resp, err := http.Get(ts.URL + dashboard.OpenAPIPath) // no token
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	type operation struct {
		OperationID string `json:"operationId"` //nolint:tagliatelle // OpenAPI spells it so
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Info    struct {
			Title string `json:"title"`
		} `json:"info"`
		Paths map[string]map[string]operation `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return err
	}
	fmt.Println(resp.StatusCode, doc.OpenAPI, doc.Info.Title)
	fmt.Println(doc.Paths["/api/v1/workflows/{id}"]["get"].OperationID)
	return nil
}
