package yamldef_test

import (
	"encoding/json"
	"fmt"

	"github.com/cairnhq/cairn/workflow/yamldef"
)

// Parse turns a workflows file into definitions to register with a worker.
func ExampleParse() {
	defs, err := yamldef.Parse("workflows.yaml", []byte(`
workflows:
  sync-invoices:
    resiliency:
      retry: {max_attempts: 5, backoff: exponential, initial_delay: 1s, max_delay: 30s, jitter: equal}
      timeouts: {step: 2m, total: 1h}
    steps:
      - name: fetch
        type: http
        with: {method: GET, url: "https://billing.internal/invoices?since={{.input.since}}"}
      - name: notify
        type: http
        optional: true
        retry: {max_attempts: 2, non_retryable_codes: [http_410]}
        with: {method: POST, url: "https://hooks.internal/done", body: "{{json .steps.fetch.body}}"}
`), yamldef.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range defs {
		p, err := json.Marshal(d.Policy)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(d.Name, string(p))
		for _, s := range d.Steps {
			p, err := json.Marshal(s.Policy)
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Printf("  %s optional=%v %s\n", s.Name, s.Optional, p)
		}
	}
	// w.Register(*defs[0]) then runs it.

	// Output:
	// sync-invoices {"max_attempts":5,"initial_interval":"1s","backoff":"exponential","max_interval":"30s","jitter":"equal","step_timeout":"2m0s","run_timeout":"1h0m0s"}
	//   fetch optional=false {}
	//   notify optional=true {"max_attempts":2,"non_retryable_codes":["http_410"]}
}

// Every problem of a file is reported at once, each at its line and column.
//
//nolint:misspell // deliberate typos: the example shows the suggestions
func ExampleParse_errors() {
	_, err := yamldef.Parse("workflows.yaml", []byte(`workflows:
  sync-invoices:
    resiliency:
      retry: {max_attemps: 5, initial_delay: 1}
    steps:
      - {name: fetch, type: htpp}
      - {name: notify, type: http, with: {url: "https://hooks.internal/{{.steps.fetch.body.id"}}
`), yamldef.Options{})
	fmt.Println(err)
	// Output:
	// workflows.yaml:4:15: workflow "sync-invoices": resiliency.retry: unknown key "max_attemps" (did you mean "max_attempts"?)
	// workflows.yaml:4:46: workflow "sync-invoices": resiliency.retry.initial_delay: 1 has no unit: want a duration like 500ms, 30s or 2m
	// workflows.yaml:6:29: workflow "sync-invoices": step "fetch": unknown step type "htpp" (want one of await, http, sleep)
	// workflows.yaml:7:42: workflow "sync-invoices": step "notify": with.method: missing (GET, POST, ...)
	// workflows.yaml:7:48: workflow "sync-invoices": step "notify": with.url: template: url:1: unclosed action
}

// A saga: compensations undo the succeeded steps of a run that fails for
// good, last first; a failure in the optional group extras rolls back only
// the group, and the run goes on after it.
func ExampleParse_saga() {
	defs, err := yamldef.Parse("workflows.yaml", []byte(`
workflows:
  order:
    on_failure: compensate
    groups:
      extras: {optional: true}
    steps:
      - name: charge
        type: http
        with: {method: POST, url: "https://pay.example.com/charges"}
        compensate:
          type: http
          retry: {max_attempts: 10}
          timeout: 30s
          with:
            method: POST
            url: "https://pay.example.com/refunds/{{.compensation.output.body.id}}"
            body: '{"reason": {{json .compensation.failure_reason}}}'
      - name: gift
        type: http
        group: extras
        with: {method: POST, url: "https://shop.example.com/gifts"}
        compensate: {type: http, with: {method: DELETE, url: "https://shop.example.com/gifts/{{.steps.gift.body.id}}"}}
      - name: wrap
        type: http
        group: extras
        with: {method: POST, url: "https://shop.example.com/wrap"}
`), yamldef.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	d := defs[0]
	fmt.Println(d.Name, "on_failure:", d.OnFailure, "groups:", d.Groups)
	for _, s := range d.Steps {
		p, err := json.Marshal(s.CompensatePolicy)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("  %s group=%q compensation=%v %s\n", s.Name, s.Group, s.Compensate != nil, p)
	}
	// Output:
	// order on_failure: compensate groups: map[extras:{true}]
	//   charge group="" compensation=true {"max_attempts":10,"step_timeout":"30s"}
	//   gift group="extras" compensation=true {}
	//   wrap group="extras" compensation=false {}
}
