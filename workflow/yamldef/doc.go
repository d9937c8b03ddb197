// Package yamldef loads workflow definitions from YAML, for workflows made
// of built-in step types (the http step of package httpstep) that need no Go
// code. The worker loads the file CAIRN_WORKFLOWS_FILE names at start, and
// "enqueue validate FILE" checks one without a worker or Redis.
//
// The format (durations are Go durations: 500ms, 30s, 2m, 1h):
//
//	workflows:
//	  sync-invoices:                 # the workflow name
//	    description: any text        # optional, ignored
//	    resiliency:                  # optional: the workflow's policy
//	      retry:
//	        max_attempts: 5          # attempts per step, the first included
//	        backoff: exponential     # exponential, linear or fixed
//	        initial_delay: 1s        # the delay before the first retry
//	        multiplier: 2            # growth per retry (exponential)
//	        max_delay: 30s           # cap of the delay, before jitter
//	        jitter: equal            # none, full or equal
//	        unknown_errors: transient   # or permanent
//	        non_retryable_codes: [http_409, http_422]
//	      timeouts: {step: 2m, total: 1h}
//	      max_iterations: 50         # step executions per run, retries included
//	      max_crashes: 3             # worker crashes one step survives
//	      checkpoint: {enabled: true, interval: after_each_step}   # the only choice (see below)
//	    allowed_hosts: [api.example.com, "*.svc.example.net", "10.0.0.7:8443"]
//	    execution: inline            # strict (the default) or inline: workflow.Definition.Inline
//	    steps:
//	      - name: fetch
//	        type: http
//	        with: {method: GET, url: "https://billing.internal/invoices?since={{.input.since}}"}
//	      - name: notify
//	        type: http
//	        optional: true           # an operator may skip it once it failed
//	        retry: {max_attempts: 2} # the step's own retry settings
//	        timeout: 10s             # the step's timeout (or timeouts: {step: 10s})
//	        timeouts: {total: 30m}   # the run's deadline while this step is current
//	        max_iterations: 20       # the run's iteration ceiling while this step is current
//	        max_crashes: 1
//	        allowed_hosts: []        # replaces the workflow's list ([]: none)
//	        with:
//	          method: POST
//	          url: https://hooks.internal/done
//	          headers: {Authorization: "Bearer {{.input.token}}"}
//	          body: '{{json .steps.fetch.body}}'
//
// # Compensations and step groups (sagas)
//
// A step with a body may declare a compensation, which undoes it; a
// workflow's on_failure says what a run that fails for good does; steps may
// form groups (see workflow.Step.Compensate, workflow.Definition.OnFailure
// and workflow.Group):
//
//	workflows:
//	  order:
//	    on_failure: compensate       # stop (the default) or compensate
//	    groups:                      # optional: settings of step groups
//	      extras: {optional: true}   # a group not listed is required
//	    steps:
//	      - name: charge
//	        type: http
//	        with: {method: POST, url: "https://pay.example.com/charges"}
//	        compensate:              # the shape of a step, without a name
//	          type: http
//	          retry: {max_attempts: 10}   # over the step's effective policy
//	          timeout: 30s
//	          with:
//	            method: POST
//	            url: "https://pay.example.com/refunds/{{.compensation.output.body.id}}"
//	            body: '{"reason": {{json .compensation.failure_reason}}}'
//	      - name: gift
//	        type: http
//	        group: extras            # a group's steps follow one another
//	        with: {method: POST, url: "https://shop.example.com/gifts"}
//	        compensate: {type: http, with: {method: DELETE, url: "https://shop.example.com/gifts/{{.steps.gift.body.id}}"}}
//	      - name: wrap
//	        type: http
//	        group: extras
//	        with: {method: POST, url: "https://shop.example.com/wrap"}
//
// With on_failure: compensate, a run that fails for good runs the
// compensations of its succeeded steps, last first, and ends compensated,
// keeping its failure code and reason. A step of a group that fails for
// good compensates the group's succeeded steps; then an optional group's
// run goes on after the group (its steps rolled_back), and a required
// group's failure goes on to on_failure. ordering.on_failure (block or
// release) is another setting: what a failed run does to its ordering key.
//
// compensate takes a step's keys but name, optional, group, compensate,
// max_iterations and timeouts.total (a compensation is named
// compensate:STEP, cannot be skipped, runs under no iteration ceiling and
// no run deadline): type (any step type but await and sleep), with,
// description, retry, timeout or timeouts.step, max_crashes,
// circuit_breaker and allowed_hosts (which replaces the step's). Its
// settings override, for the compensation's attempts, the step's
// effective ones (step > workflow > worker). Its templates read what a
// step's do, the step itself included (.steps.NAME), .step is
// compensate:NAME, and:
//
//	.compensation.step            the name of the step it undoes
//	.compensation.output          that step's output (as .steps.NAME)
//	.compensation.failure_code    the run's failure code, like permanent_error
//	.compensation.failure_reason  the run's failure reason
//
// A template of a step that is not a compensation cannot read
// .compensation. A nameless circuit breaker in force for an http
// compensation (its own, else its step's, the workflow's or the
// worker's) is named after the compensation's own target host, as a
// step's is after its host; under a breaker with a name, it shares that
// breaker. A group name has 1-64 letters, digits, '.', '_' or '-'; a
// group under groups that no step is in is an error.
//
// Every field is optional but a workflow's steps and each step's name and
// type. A setting on a step beats the workflow's, which beats the worker's
// defaults (the CAIRN_* environment), which beat the built-in defaults;
// non_retryable_codes and allowed_hosts are replaced as a whole, and an
// empty list ([]) on a step turns off the workflow's list for that step.
// Workflow names may contain letters, digits, '.', '_' and '-'; step names
// no '-', so that templates can read .steps.NAME. YAML anchors, aliases and
// merge keys (<<) work as usual, as long as the aliases repeat at most
// MaxAliasedNodes YAML nodes in all; top-level keys starting with x- are
// ignored, a place to define anchors:
//
//	x-retry: &fast {max_attempts: 3, initial_delay: 200ms}
//	workflows:
//	  ping:
//	    resiliency: {retry: *fast}
//	    steps: [{name: ping, type: http, with: {method: GET, url: "https://example.com/"}}]
//
// The "with" mapping of an http step has method and url (required),
// headers (name: value), body and poll; each value is a template, described
// in package httpstep. A template may read only earlier steps' outputs.
// Other step types can be added with Options.StepTypes.
//
// allowed_hosts lists the hosts, besides its URL's literal one, an http
// step may reach: the hosts a URL whose host comes from a template may
// render, and the hosts redirects may go to (httpstep.Spec.AllowedHosts:
// exact names, case-insensitive; *.example.com for any name under
// example.com; host:port for a port other than the scheme's default).
// Without it, a url that renders into the scheme, userinfo, host or port
// is refused at load, at the url's position. Other step types get the
// list in StepSpec.AllowedHosts.
//
// Cairn checkpoints every step's output as the step completes, always:
// resiliency.checkpoint may say so ({enabled: true, interval:
// after_each_step}, either key left out), and anything else there
// (enabled: false, another interval, another key) is an error.
//
// # Editors: the JSON Schema
//
// schema.json, beside this package's sources (and Schema, in Go), is a
// JSON Schema (draft 2020-12) of the format: an editor with a YAML
// language server (VS Code's YAML extension, Neovim, JetBrains IDEs, Helix)
// completes keys, shows what each means and underlines mistakes as they are
// typed, when the file names it in a modeline (a URL, or a path relative
// to the file):
//
//	# yaml-language-server: $schema=https://raw.githubusercontent.com/cairnhq/cairn/main/workflow/yamldef/schema.json
//	workflows:
//	  ping:
//	    steps: [{name: ping, type: http, with: {method: GET, url: "https://example.com/"}}]
//
// The schema checks the file's shape: unknown keys, types, enums, names,
// durations, numbers, which keys each step type and a compensation take.
// What needs more than the shape (templates and the steps they read,
// unique step names, contiguous and used groups, hosts a URL may render,
// policies with the worker's defaults) only loading checks, as "enqueue
// validate FILE" does. The schema wants names, types, methods, URLs and
// signals written as strings; it knows the built-in step types only.
//
// Everything is checked when the file is loaded, and every problem is
// reported, each as FILE:LINE:COL: what is wrong (FILE:LINE: for YAML syntax
// errors, which have no column): unknown keys (with a suggestion), values of
// the wrong type, bad durations and numbers, duplicate workflow names, step
// names and keys, unknown step types, missing fields, templates that do not
// parse or read a step that does not come earlier (or .compensation outside
// a compensation), URLs whose host comes from a template without
// allowed_hosts, bad or repeated allowed_hosts entries, checkpoint settings
// Cairn does not support, policies that are invalid alone or once combined
// with the worker's defaults, bad group names, groups whose steps do not
// follow one another (at the group of the step out of place) or that no
// step is in, a compensate on an await or a sleep, and compensations that
// are an await or a sleep or have a key a compensation cannot have.
package yamldef
