package httpstep_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/httpstep"
)

// An http step renders its request from the run input and earlier steps'
// outputs, and returns the response as its output.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/customers/c404" {
			http.Error(w, "no such customer", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path": %q, "key": %q, "total": 1250}`, r.URL.Path, r.Header.Get("Idempotency-Key"))
	}))
	defer srv.Close()

	step, err := httpstep.New(httpstep.Spec{
		Method: "GET",
		URL:    srv.URL + "/customers/{{.input.customer}}",
	}, httpstep.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := step.Do(context.Background(), httpstep.Attempt{
		RunID: "r1", Step: "fetch", Attempt: 1, IdempotencyKey: "r1:fetch:1",
		Input: json.RawMessage(`{"customer": "c42"}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Status, resp.Headers["content-type"], resp.Body)

	_, err = step.Do(context.Background(), httpstep.Attempt{RunID: "r2", Step: "fetch", Attempt: 1,
		Input: json.RawMessage(`{"customer": "c404"}`)})
	fmt.Println(workflow.IsPermanent(err), workflow.Code(err))
	// Output:
	// 200 application/json map[key:r1:fetch:1 path:/customers/c42 total:1250]
	// true http_404
}

// Templates read the run input and earlier steps' outputs; json writes a
// value as JSON.
func ExampleParseTemplate() {
	t, err := httpstep.ParseTemplate("body", `{"customer": {{json .steps.fetch.body.id}}, "lines": {{json .input.lines}}}`)
	if err != nil {
		fmt.Println(err)
		return
	}
	data, err := httpstep.Attempt{
		Input:   json.RawMessage(`{"lines": [{"sku": "A-1", "qty": 2}]}`),
		Outputs: map[string]json.RawMessage{"fetch": json.RawMessage(`{"status": 200, "body": {"id": 12345678901234567890}}`)},
	}.Data()
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := t.Execute(data)
	fmt.Println(out, err)
	fmt.Println(t.StepRefs())
	// Output:
	// {"customer": 12345678901234567890, "lines": [{"qty":2,"sku":"A-1"}]} <nil>
	// [fetch]
}
