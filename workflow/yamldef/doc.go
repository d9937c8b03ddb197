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
// Every field is optional but a workflow's steps and each step's name and
// type. A setting on a step beats the workflow's, which beats the worker's
// defaults (the CAIRN_* environment), which beat the built-in defaults;
// non_retryable_codes and allowed_hosts are replaced as a whole, and an
// empty list ([]) on a step turns off the workflow's list for that step.
// Workflow names may contain letters, digits, '.', '_' and '-'; step names
// no '-', so that templates can read .steps.NAME. YAML anchors, aliases and
// merge keys (<<) work as usual; top-level keys starting with x- are
// ignored, a place to define anchors:
//
//	x-retry: &fast {max_attempts: 3, initial_delay: 200ms}
//	workflows:
//	  ping:
//	    resiliency: {retry: *fast}
//	    steps: [{name: ping, type: http, with: {method: GET, url: "https://example.com/"}}]
//
// The "with" mapping of an http step has method and url (required),
// headers (name: value) and body; each value is a template, described in
// package httpstep. A template may read only earlier steps' outputs. Other
// step types can be added with Options.StepTypes.
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
// Everything is checked when the file is loaded, and every problem is
// reported, each as FILE:LINE:COL: what is wrong (FILE:LINE: for YAML syntax
// errors, which have no column): unknown keys (with a suggestion), values of
// the wrong type, bad durations and numbers, duplicate workflow names, step
// names and keys, unknown step types, missing fields, templates that do not
// parse or read a step that does not come earlier, URLs whose host comes
// from a template without allowed_hosts, bad or repeated allowed_hosts
// entries, checkpoint settings Cairn does not support, and policies that
// are invalid alone or once combined with the worker's defaults.
package yamldef
